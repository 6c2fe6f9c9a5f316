"""The loader's API beside the Hugging Face library's: get_kernel's argument forms, has_kernel,
get_local_kernel, and the LOCAL_KERNELS development override (which kernels verify refuses).

Every Hub call goes to the local olah Hub over real HTTP; local builds are real folders.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

import kernel_deps
from kernel_deps import get_kernel, get_local_kernel, get_locked_kernel, has_kernel, load_kernel
from kernel_deps.commands.download import download_project
from kernel_deps.core.errors import ResolutionError, UsageError
from kernel_deps.lock.read import read_lock
from kernel_deps.loader import api as loader
from kernel_deps.loader.origin import KernelOrigin
from kernel_deps.loader.local import LocalKernelError, LocalKernelWarning
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, UNIVERSAL_VARIANT, KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.local_builds import write_local_repo
from tests.fixtures.projects import write_project



# -- get_kernel: the Hugging Face argument forms ---------------------------------------------


def test_get_kernel_takes_an_integer_major_on_a_branches_only_repo(hub_env) -> None:
    flash = hub_env.repos["kernels-test/flash"]
    module = get_kernel("kernels-test/flash", version=1, trust_remote_code=True)
    assert module.__version__ == "1.1.0"
    assert module.__kernel_origin__.commit == flash.branches["v1"]
    assert get_kernel("kernels-test/flash", version=2, trust_remote_code=True).__version__ == "2.0.0"


def test_get_kernel_takes_a_major_on_a_tags_only_repo_and_a_range(hub_env) -> None:
    assert get_kernel("kernels-test/rotary", version=1, trust_remote_code=True).__version__ == "1.1.0"  # the newest v1.* tag
    assert get_kernel("kernels-test/rotary", version=">=1,<2", trust_remote_code=True).__version__ == "1.1.0"


def test_get_kernel_takes_a_revision_branch_tag_or_commit(hub_env) -> None:
    flash = hub_env.repos["kernels-test/flash"]
    assert get_kernel("kernels-test/flash", revision="v2", trust_remote_code=True).__version__ == "2.0.0"
    assert get_kernel("kernels-test/rotary", revision="v1.0.0", trust_remote_code=True).__version__ == "1.0.0"
    by_commit = get_kernel("kernels-test/flash", revision=flash.commits["1.0.0"], trust_remote_code=True)
    assert by_commit.__version__ == "1.0.0"


def test_get_kernel_chooses_a_backend_as_the_hugging_face_library_does(hub_env) -> None:
    module = get_kernel("kernels-test/flash", version=1, backend="cpu", trust_remote_code=True)
    assert module.__kernel_origin__.variant == CPU_VARIANT
    for function in (get_kernel, has_kernel):
        with pytest.raises(UsageError) as info:
            function("kernels-test/flash", version=1, backend="metal")
        # On a CPU machine the one choice is named once.
        assert info.value.message == (
            "backend='metal': this machine's torch runs cpu; pass backend='cpu', or leave it out"
        )


# get_kernel(backend="cpu") on a CUDA machine loads the CPU build, as the Hugging Face
# library does, rather than the CUDA build this machine would otherwise get. The CUDA
# machine is a synthetic CUDA torch install (a ``torch`` package and its ``.dist-info``, no
# compiled code) put first on ``sys.path``, which kernel-deps describes from its files, as
# it describes any torch it has not imported; the real torch is hidden from ``sys.modules``
# for the test and the process's description is taken afresh before and after it.


def _cuda_torch(site: Path) -> Path:
    """A torch 2.13 + CUDA 12.8 install in ``site``, laid out as its wheel lays it out."""
    package = site / "torch"
    package.mkdir(parents=True)
    info = site / "torch-2.13.0+cu128.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+cu128\n")
    (package / "version.py").write_text(
        "from typing import Optional\n\n"
        "__version__ = '2.13.0+cu128'\ndebug = False\ncuda: Optional[str] = '12.8'\n"
        "hip: Optional[str] = None\nrocm: Optional[str] = None\nxpu: Optional[str] = None\n"
    )
    (package / "__init__.py").write_text(
        "from torch.version import __version__\n\n\n"
        "def compiled_with_cxx11_abi() -> bool:\n    return True\n"
    )
    return site


@pytest.fixture
def cuda_machine(tmp_path, monkeypatch):
    if not sys.platform.startswith("linux") or loader._this_system().arch != "x86_64":
        pytest.skip("the synthetic torch is a linux x86_64 wheel")
    for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(_cuda_torch(tmp_path / "cuda-site")))
    loader._this_system.cache_clear()
    try:
        system = loader._this_system()
        assert (system.backend, system.backend_version) == ("cuda", (12, 8))
        yield system
    finally:
        # Whatever the test imported of the synthetic torch goes (monkeypatch then puts back
        # the real torch modules it hid), and the real machine is described again.
        fake = str(tmp_path)
        for name in [m for m, module in sys.modules.items() if (m == "torch" or m.startswith("torch."))
                     and (getattr(module, "__file__", None) or "").startswith(fake)]:  # fmt: skip
            del sys.modules[name]
        loader._this_system.cache_clear()


def test_get_kernel_with_backend_cpu_loads_the_cpu_build_on_a_cuda_machine(hub_env, cuda_machine, monkeypatch) -> None:
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    repo_id = "kernels-test/backendchoice-both"
    if repo_id not in hub_env.repos:
        hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CUDA_VARIANT, CPU_VARIANT)),)))
    assert get_kernel(repo_id, version=1, backend="cpu", trust_remote_code=True).__kernel_origin__.variant == CPU_VARIANT


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"version": "garbage"}, "version='garbage'): invalid version specifier; pass exactly one of version= "
         "(a major, e.g. version=1, or a range such as '>=1.2,<2') and revision= (a branch, tag or commit)"),
        ({"version": -1}, "version=-1): a major version cannot be negative; pass exactly one of version="),
        ({"revision": "a b"}, "revision='a b'): invalid revision \"a b\"; expected a branch, tag or 40-hex commit"),
    ],
    ids=["specifier", "negative-major", "revision"],
)  # fmt: skip
def test_a_bad_version_or_revision_names_the_call_not_a_pyproject_table(kwargs, message) -> None:
    for function in (get_kernel, has_kernel):
        with pytest.raises(UsageError) as info:
            function("kernels-test/flash", **kwargs)
        assert info.value.message.startswith(f"{function.__name__}('kernels-test/flash', {message}")
        assert "tool.kernels" not in info.value.message


def test_a_version_that_does_not_exist_says_what_to_pass_to_the_call(hub_env) -> None:
    for function in (get_kernel, has_kernel):
        with pytest.raises(ResolutionError) as info:
            function("kernels-test/flash", version=9)
        assert str(info.value).splitlines() == [
            "cannot find versions that satisfy every requirement:",
            f"  kernels-test/flash 9 (branch v9) (from {function.__name__}())",
            "  versions of kernels-test/flash: none (branches v2, v1)",
            f"hint: pass another version= or revision= to {function.__name__}()",
        ]


@pytest.mark.parametrize(
    ("kwargs", "given"),
    [({}, "neither"), ({"version": 1, "revision": "v1"}, "both")],
    ids=["neither", "both"],
)
def test_get_kernel_needs_exactly_one_of_version_and_revision(kwargs, given) -> None:
    for function in (get_kernel, has_kernel):
        with pytest.raises(UsageError) as info:
            function("kernels-test/flash", **kwargs)
        assert info.value.message == (
            f"{function.__name__}('kernels-test/flash'): pass exactly one of version= (a major, e.g. version=1, "
            f"or a range such as '>=1.2,<2') and revision= (a branch, tag or commit); {given} given"
        )


def test_version_and_revision_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        get_kernel("kernels-test/flash", 1)  # type: ignore[misc]


# -- has_kernel --------------------------------------------------------------------------------


def test_has_kernel_says_whether_this_machine_has_a_build(hub_env) -> None:
    cuda_only = "kernels-test/api-cuda-only"
    hub_env.add_repo(KernelRepo(cuda_only, (Release("1.0.0", variants=(CUDA_VARIANT,)),)))
    assert has_kernel("kernels-test/flash", version=1, trust_remote_code=True) is True
    assert has_kernel("kernels-test/norm-universal", revision="v1.0.0", trust_remote_code=True) is True
    assert has_kernel(cuda_only, version=1, trust_remote_code=True) is False  # this CPU machine has no build
    assert has_kernel("kernels-test/flash", version=1, backend="cpu", trust_remote_code=True) is True


# -- local builds -------------------------------------------------------------------------------


def test_get_local_kernel_imports_this_machines_build_with_a_warning(tmp_path) -> None:
    repo = write_local_repo(tmp_path / "my-kernel", "dev-1")
    with pytest.warns(LocalKernelWarning, match=r"my-kernel: loading the local build in .*torch213-cxx11-cpu") as seen:
        module = get_local_kernel(repo)
    # No LOCAL_KERNELS is involved: the warning does not tell the caller to unset it.
    assert str(seen[0].message).endswith("lock the kernel and load it with load_kernel before shipping")
    assert (module.__version__, module.where()) == ("dev-1", CPU_VARIANT)
    # It says what it is as a locked load does, and that it is local: no lock, no commit.
    assert module.__kernel_origin__ == KernelOrigin(
        str(repo), None, CPU_VARIANT, repo / "build" / CPU_VARIANT, "local", "get_local_kernel"
    )
    from importlib import import_module

    assert import_module(module.__name__ + ".layers").layer_where() == CPU_VARIANT
    # A build folder itself, and the older layout with its package folder named.
    with pytest.warns(LocalKernelWarning):
        assert get_local_kernel(repo / "build" / CPU_VARIANT).__version__ == "dev-1"
    older = tmp_path / "older" / "build" / UNIVERSAL_VARIANT / "my_kernel"
    older.mkdir(parents=True)
    (older / "__init__.py").write_text("__version__ = 'older'\n")
    with pytest.warns(LocalKernelWarning):
        older_module = get_local_kernel(tmp_path / "older", "my_kernel")
    assert older_module.__version__ == "older"
    assert (older_module.__kernel_origin__.variant, older_module.__kernel_origin__.path) == (
        UNIVERSAL_VARIANT, tmp_path / "older" / "build" / UNIVERSAL_VARIANT
    )
    one_build = tmp_path / "one-build"
    one_build.mkdir()
    (one_build / "__init__.py").write_text("")
    with pytest.warns(LocalKernelWarning):
        origin = get_local_kernel(one_build).__kernel_origin__
    assert (origin.variant, origin.path, origin.lock_origin) == (None, one_build, "local")  # no variant named
    with pytest.raises(LocalKernelError, match=r"no kernel build in .*empty \(no __init__.py\)"):
        (tmp_path / "empty").mkdir()
        get_local_kernel(tmp_path / "empty")


def test_local_kernels_overrides_locked_and_unlocked_loads_warning_each_time(hub_env, tmp_path, monkeypatch) -> None:
    repo_id = "kernels-test/api-overridden"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    project = write_project(tmp_path / "app", f'"{repo_id}" = 1', locked=True)
    download_project(project)
    local = write_local_repo(tmp_path / "dev", "local-build")
    monkeypatch.setenv("LOCAL_KERNELS", f"kernels-test/other=/nowhere:{repo_id}={local}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's own default: once per place, unless we warn anew
        loads = [load_kernel(repo_id, lockfile=project / "kernels.lock") for _ in range(2)]
        loads.append(get_locked_kernel(repo_id, lockfile=project / "kernels.lock"))
        loads.append(get_kernel(repo_id, version=1, trust_remote_code=True))
    assert {m.__version__ for m in loads} == {"local-build"}
    assert [w.category for w in caught] == [LocalKernelWarning] * 4
    assert all(w.filename == __file__ for w in caught)  # points at the caller's line
    assert f"{repo_id}: loading the local build in {local / 'build' / CPU_VARIANT}" in str(caught[0].message)
    assert str(caught[0].message).endswith("unset LOCAL_KERNELS before shipping ('kernels verify' fails while it is set)")
    assert has_kernel(repo_id, version=1, trust_remote_code=True) is True
    assert {m.__kernel_origin__ for m in loads} == {
        KernelOrigin(repo_id, None, CPU_VARIANT, local / "build" / CPU_VARIANT, "local", "LOCAL_KERNELS")
    }

    monkeypatch.delenv("LOCAL_KERNELS")
    locked = load_kernel(repo_id, lockfile=project / "kernels.lock")
    assert locked.__version__ == "1.0.0" and locked.__kernel_origin__.variant == CPU_VARIANT
    # The same record, the lock's where the local one says "local".
    origin = locked.__kernel_origin__
    assert type(origin) is KernelOrigin and (origin.repo_id, origin.lock_origin) == (repo_id, "argument")
    assert origin.commit == read_lock(project / "kernels.lock", purpose="use").lock.get(repo_id).sha


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("kernels-test/x", "expected org/name=/path/to/build"),
        ("kernels-test/x=", "the path after '=' is empty"),
        ("not-a-repo=/tmp/x", "'not-a-repo' is not a repo id of the form org/name"),
    ],
)
def test_a_malformed_local_kernels_is_one_line_naming_it(tmp_path, monkeypatch, value, problem) -> None:
    monkeypatch.setenv("LOCAL_KERNELS", value)
    with pytest.raises(UsageError) as info:
        load_kernel("kernels-test/x", lockfile=tmp_path / "kernels.lock")
    assert info.value.message.startswith(f"LOCAL_KERNELS: invalid entry {value.split(':')[0]!r}: {problem}; ")
    project = write_project(tmp_path / "app", {})
    result = run_kernels("verify", str(project))
    assert result.returncode == 2 and result.stderr.startswith("error: LOCAL_KERNELS: invalid entry")
    assert len(result.stderr.splitlines()) == 1


def test_a_kernel_listed_twice_in_local_kernels_is_refused_naming_it(tmp_path, monkeypatch) -> None:
    first, second = write_local_repo(tmp_path / "one", "one"), write_local_repo(tmp_path / "two", "two")
    value = f"kernels-test/twice={first}:kernels-test/other={first}:kernels-test/twice={second}"
    monkeypatch.setenv("LOCAL_KERNELS", value)
    message = f"LOCAL_KERNELS: kernels-test/twice is listed twice (={first} and ={second}); keep one entry for it"
    for load in (lambda: load_kernel("kernels-test/twice", lockfile=tmp_path / "kernels.lock"),
                 lambda: get_kernel("kernels-test/other", version=1), lambda: has_kernel("kernels-test/x", version=1)):
        with pytest.raises(UsageError) as info:
            load()
        assert info.value.message == message
    project = write_project(tmp_path / "app", {})
    result = run_kernels("verify", str(project))
    assert (result.returncode, result.stderr.splitlines(), result.stdout) == (2, [f"error: {message}"], "")


def test_kernels_verify_fails_while_local_kernels_is_set(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/rotary"
    project = write_project(tmp_path / "app", {repo_id: ">=1,<2"}, locked=True)
    assert run_kernels("verify", str(project), env={"LOCAL_KERNELS": None}).returncode == 0
    result = run_kernels("verify", str(project), env={"LOCAL_KERNELS": f"{repo_id}={tmp_path / 'dev'}"})
    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == (
        f"LOCAL_KERNELS is set ({repo_id} -> {tmp_path / 'dev'}): loads of those kernels use the local builds "
        "instead of kernels.lock; unset LOCAL_KERNELS to ship"
    )
    assert "1 problem found" in result.stdout


def test_the_package_exports_the_hugging_face_names() -> None:
    for name in ("get_kernel", "has_kernel", "get_local_kernel", "load_kernel", "get_locked_kernel"):
        assert callable(getattr(kernel_deps, name))

"""The import runs only verified bytes: no bytecode, no file outside the lock, no file
changed after the check, no link out of the cache, and one module name per repo id."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import py_compile
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from kernel_deps import get_locked_kernel, load_kernel
from kernel_deps.cache import store as cache
from kernel_deps.commands.download import download_project
from kernel_deps.commands.lock import lock_project
from kernel_deps.commands.verify import verify_project
from kernel_deps.core.errors import KernelCacheReadError, KernelIntegrityError
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release
from tests.fixtures.unprivileged import where_modes_apply
from tests.fixtures.projects import TEST_PUBLISHERS, trust_table

INIT = b'''"""A kernel with an optional submodule and lazily imported ones."""
import importlib

from ._ops import OPS_NAMESPACE
from .layers import describe

try:
    from . import _optional
except ImportError:
    _optional = None

__version__ = "1.0.0"


def late(name):
    return importlib.import_module(f"{__name__}.{name}")
'''

LAZY_FILES = (
    ("__init__.py", INIT),
    ("layers/lazy.py", b"VALUE = 1\n"),
    ("layers/lazy_ok.py", b"VALUE = 2  # its own blob\n"),
)


def downloaded(hub_env, tmp_path: Path, name: str, files: tuple[tuple[str, bytes], ...] = LAZY_FILES, *, download=True):
    """A fresh kernel with lazy submodules (and ``files``), locked and (unless told) downloaded;
    returns (variant folder, project)."""
    repo_id = f"kernels-test/verified-{name}"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CPU_VARIANT,), extra_files=files),)))
    project = tmp_path / "app"
    project.mkdir()
    (project / "pyproject.toml").write_text(f'{trust_table(TEST_PUBLISHERS)}[tool.kernels.dependencies]\n"{repo_id}" = ">=1"\n')
    lock_project(project)
    if download:
        download_project(project)
    folder = cache.variant_dir(cache.find_repo_dir(repo_id), built.commits["1.0.0"], CPU_VARIANT)
    return folder, project


def plant_pyc(target: Path, source: str, tmp_path: Path) -> None:
    """Compiled bytecode of ``source`` at ``target``, with no source file beside it."""
    source_file = tmp_path / "planted_source.py"
    source_file.write_text(source)
    py_compile.compile(str(source_file), cfile=str(target), doraise=True)


def marker_code(marker: Path) -> str:
    return f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\nPLANTED = True\n"


# -- 1. only files the lock covers ---------------------------------------------------------


def test_a_planted_pyc_for_an_optional_module_never_runs(hub_env, tmp_path) -> None:
    folder, project = downloaded(hub_env, tmp_path, "optional-pyc")
    marker = tmp_path / "ran"
    plant_pyc(folder / "_optional.pyc", marker_code(marker), tmp_path)
    assert verify_project(project).ok  # bytecode is outside the lock hash, as in the HF algorithm
    module = load_kernel("kernels-test/verified-optional-pyc", lockfile=project / "kernels.lock")
    assert module._optional is None
    assert not marker.exists()


@pytest.mark.parametrize(
    "planted",
    ["layers/helpers.pyc", "layers/helpers.py", "layers/helpers.abi3.so", "layers/helpers/__init__.py",
     "layers/__pycache__/helpers.cpython-311.pyc", "layers/helpers/inner.py",
     "layers/helpers/__pycache__/inner.cpython-311.pyc"],
)  # fmt: skip
def test_a_file_outside_the_verified_set_is_never_imported(hub_env, tmp_path, planted) -> None:
    folder, project = downloaded(hub_env, tmp_path, "planted")
    module = load_kernel("kernels-test/verified-planted", lockfile=project / "kernels.lock")
    marker = tmp_path / "ran"
    target = folder / planted
    target.parent.mkdir(parents=True, exist_ok=True)
    if planted.endswith(".pyc"):
        plant_pyc(target, marker_code(marker), tmp_path)
    elif planted.endswith(".so"):
        target.write_bytes(b"\x7fELF not really")
    else:
        target.write_text(marker_code(marker))
    name = f"{module.__name__}.layers.helpers"
    assert importlib.util.find_spec(name) is None  # as for a file that does not exist
    with pytest.raises(ModuleNotFoundError) as info:
        module.late("layers.helpers")
    assert info.value.name == name
    if planted.startswith("layers/helpers/"):
        with pytest.raises(ModuleNotFoundError):
            module.late("layers.helpers.inner")
    assert not marker.exists()
    assert name not in sys.modules
    assert module.late("layers.lazy_ok").VALUE == 2


def test_find_spec_of_a_name_the_lock_does_not_cover_is_none_and_of_a_covered_one_its_spec(hub_env, tmp_path) -> None:
    # The optional-feature idiom: `if importlib.util.find_spec(f"{__name__}._cuda") is not None:`
    folder, project = downloaded(hub_env, tmp_path, "find-spec")
    module = load_kernel("kernels-test/verified-find-spec", lockfile=project / "kernels.lock")
    assert importlib.util.find_spec(f"{module.__name__}._cuda") is None
    assert importlib.util.find_spec(f"{module.__name__}.layers.nothing") is None
    found = importlib.util.find_spec(f"{module.__name__}.layers.lazy")
    assert found is not None and found.origin == str(folder / "layers" / "lazy.py")
    assert importlib.util.find_spec(f"{module.__name__}.layers") is not None


# -- 2. the bytes that were hashed are the bytes that run ------------------------------------


def test_a_source_changed_after_the_check_is_refused_at_its_lazy_import(hub_env, tmp_path) -> None:
    folder, project = downloaded(hub_env, tmp_path, "toctou")
    module = load_kernel("kernels-test/verified-toctou", lockfile=project / "kernels.lock")
    marker = tmp_path / "ran"
    (folder / "layers" / "lazy.py").resolve().write_text(marker_code(marker))  # the blob itself
    with pytest.raises(KernelIntegrityError, match=(
        rf"^refusing to import layers/lazy\.py of kernels-test/verified-toctou {CPU_VARIANT}: it changed after it "
        r"was verified \(expected [0-9a-f]{40}, got [0-9a-f]{40}\); run 'kernels download' to repair the cache$"
    )):  # fmt: skip
        module.late("layers.lazy")
    assert not marker.exists()
    assert f"{module.__name__}.layers.lazy" not in sys.modules
    assert module.late("layers.lazy_ok").VALUE == 2


def test_a_shared_object_changed_after_the_check_is_refused_before_dlopen(hub_env, tmp_path) -> None:
    folder, project = downloaded(hub_env, tmp_path, "toctou-so")
    module = load_kernel("kernels-test/verified-toctou-so", lockfile=project / "kernels.lock")
    library = folder / f"{module.OPS_NAMESPACE}.abi3.so"
    blob = library.resolve()
    blob.write_bytes(blob.read_bytes()[:-1] + b"!")
    with pytest.raises(KernelIntegrityError, match=rf"refusing to import {module.OPS_NAMESPACE}\.abi3\.so of .*: it changed after it was verified \(expected [0-9a-f]{{64}}"):
        module.late(module.OPS_NAMESPACE)


def test_a_folder_where_a_verified_file_was_is_one_clear_line(hub_env, tmp_path) -> None:
    folder, project = downloaded(hub_env, tmp_path, "gone")
    module = load_kernel("kernels-test/verified-gone", lockfile=project / "kernels.lock")
    lazy = folder / "layers" / "lazy.py"
    lazy.unlink()
    lazy.mkdir()
    with pytest.raises(KernelCacheReadError) as info:
        module.late("layers.lazy")
    assert str(info.value) == (
        f"kernels-test/verified-gone {CPU_VARIANT}: cannot read {lazy} (Is a directory); "
        "check the cache's permissions, or run 'kernels download' to repair it"
    )


def test_an_unreadable_blob_is_one_clear_line(hub_env, tmp_path) -> None:
    folder, project = downloaded(hub_env, tmp_path, "unreadable")
    blob = (folder / "_ops.py").resolve()
    blob.chmod(0)
    try:
        # The file is named as it appears in the variant folder (a link to the blob).
        with pytest.raises(KernelCacheReadError, match=rf"kernels-test/verified-unreadable {CPU_VARIANT}: cannot read {folder / '_ops.py'} \(Permission denied\); check"):
            where_modes_apply(load_kernel, "kernels-test/verified-unreadable", lockfile=project / "kernels.lock")
    finally:
        blob.chmod(0o644)


# -- 3. one module name per repo id ---------------------------------------------------------


def test_two_repo_ids_at_one_commit_get_their_own_modules(hub_env, tmp_path) -> None:
    # A fork keeps the commits: kernels-test/verified-fork and kernels-test/verified_fork
    # are one commit under two names whose readable slugs are the same.
    built = hub_env.add_repo(KernelRepo("kernels-test/verified-fork", (Release("1.0.0", variants=(CPU_VARIANT,)),)))
    shutil.copytree(built.path, built.path.with_name("verified_fork"), symlinks=True)
    project = tmp_path / "app"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        trust_table(TEST_PUBLISHERS)
        + '[tool.kernels.dependencies]\n"kernels-test/verified-fork" = ">=1"\n"kernels-test/verified_fork" = ">=1"\n'
    )
    lock = lock_project(project).lock
    assert lock.get("kernels-test/verified-fork").sha == lock.get("kernels-test/verified_fork").sha
    download_project(project)
    first = load_kernel("kernels-test/verified-fork", lockfile=project / "kernels.lock")
    first_layers = first.layers
    second = load_kernel("kernels-test/verified_fork", lockfile=project / "kernels.lock")
    assert first.__name__ != second.__name__
    assert sys.modules[first.__name__] is first and sys.modules[second.__name__] is second
    assert sys.modules[f"{first.__name__}.layers"] is first_layers is first.layers
    assert first.__kernel_origin__.path != second.__kernel_origin__.path


# -- 4. links out of the cache --------------------------------------------------------------


def test_a_link_out_of_the_cache_is_reported_and_refused_even_with_the_right_bytes(hub_env, tmp_path) -> None:
    folder, project = downloaded(hub_env, tmp_path, "outside")
    outside = tmp_path / "elsewhere" / "_ops.py"
    outside.parent.mkdir()
    outside.write_bytes((folder / "_ops.py").read_bytes())  # identical bytes
    (folder / "_ops.py").unlink()
    (folder / "_ops.py").symlink_to(outside)

    report = verify_project(project)
    assert [(p.kind, p.path) for p in report.problems] == [("outside-cache", "_ops.py")]
    (problem,) = report.problems
    assert (problem.repo_id, problem.variant, problem.got) == ("kernels-test/verified-outside", CPU_VARIANT, str(outside))
    with pytest.raises(KernelIntegrityError, match=rf"_ops\.py links outside the cache \(to {outside}\); run 'kernels download'"):
        load_kernel("kernels-test/verified-outside", lockfile=project / "kernels.lock")
    download_project(project)  # the advice works: the variant is placed again
    assert verify_project(project).ok


# -- 5. namespace packages ------------------------------------------------------------------

NAMESPACE_FILES = (
    # ops_ns/ and ops_ns/deeper/ have no __init__.py: PEP 420 namespace packages.
    ("ops_ns/impl.py", b"from .._ops import OPS_NAMESPACE\n\nVALUE = 'impl of ' + OPS_NAMESPACE\n"),
    ("ops_ns/deeper/leaf.py", b"from ..impl import VALUE\n\nLEAF = 'leaf beside ' + VALUE\n"),
    ("data_only/table.txt", b"a data file\n"),
)


def test_a_verified_module_in_a_folder_without_init_imports_as_python_would(hub_env, tmp_path) -> None:
    folder, project = downloaded(hub_env, tmp_path, "namespace", NAMESPACE_FILES, download=False)
    module = get_locked_kernel("kernels-test/verified-namespace", lockfile=project / "kernels.lock")
    namespace: dict[str, object] = {}
    exec(f"import {module.__name__}.ops_ns.impl\nimport {module.__name__}.ops_ns.deeper.leaf as leaf", namespace)
    impl = sys.modules[f"{module.__name__}.ops_ns.impl"]
    assert impl.VALUE == f"impl of {module.OPS_NAMESPACE}"  # its code ran, its relative import too
    assert namespace["leaf"].LEAF == f"leaf beside impl of {module.OPS_NAMESPACE}"
    assert impl.__file__ == str(folder / "ops_ns" / "impl.py")
    package = sys.modules[f"{module.__name__}.ops_ns"]
    assert package.__file__ is None and list(package.__path__) == []  # a namespace package, nothing to scan
    assert importlib.import_module(f"{module.__name__}.data_only").__spec__.name == f"{module.__name__}.data_only"
    assert load_kernel("kernels-test/verified-namespace", lockfile=project / "kernels.lock") is module


@pytest.mark.parametrize(
    "planted", ["planted_ns/evil.py", "ops_ns/evil.py", "pyc_only/evil.pyc", "pyc_only/__pycache__/evil.cpython-3.pyc"]
)
def test_a_folder_or_file_planted_without_init_is_still_not_importable(hub_env, tmp_path, planted) -> None:
    folder, project = downloaded(hub_env, tmp_path, "namespace-planted", NAMESPACE_FILES)
    module = load_kernel("kernels-test/verified-namespace-planted", lockfile=project / "kernels.lock")
    marker = tmp_path / "ran"
    target = folder / planted
    target.parent.mkdir(parents=True, exist_ok=True)
    if planted.endswith(".pyc"):
        plant_pyc(target, marker_code(marker), tmp_path)
    else:
        target.write_text(marker_code(marker))
    package = planted.split("/")[0]
    if package != "ops_ns":  # a folder holding nothing verified is not a namespace package
        assert importlib.util.find_spec(f"{module.__name__}.{package}") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"{module.__name__}.{package}.evil")
    assert importlib.util.find_spec(f"{module.__name__}.ops_ns.evil") is None
    assert not marker.exists()
    assert importlib.import_module(f"{module.__name__}.ops_ns.impl").VALUE.startswith("impl of ")


TWIN_C = b"""
#include <Python.h>
static struct PyModuleDef twin = {PyModuleDef_HEAD_INIT, "twin", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_twin(void) {
    PyObject *module = PyModule_Create(&twin);
    if (module != NULL && PyModule_AddStringConstant(module, "KIND", "extension") < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
"""


def compiled_twin(tmp_path: Path) -> bytes:
    """A real extension module ``twin`` (``twin.KIND == "extension"``), built with the C compiler."""
    source, library = tmp_path / "twin.c", tmp_path / "twin.abi3.so"
    source.write_bytes(TWIN_C)
    include = sysconfig.get_paths()["include"]
    subprocess.run(["cc", "-shared", "-fPIC", f"-I{include}", str(source), "-o", str(library)], check=True)
    return library.read_bytes()


def test_a_module_both_compiled_and_in_source_imports_the_extension_as_python_would(hub_env, tmp_path) -> None:
    files = (("twin.py", b"KIND = 'source'\n"), ("twin.abi3.so", compiled_twin(tmp_path)))
    # Python's own path finder, on a plain folder of the same two files, takes the extension.
    plain = tmp_path / "plain"
    plain.mkdir()
    for rel, data in files:
        (plain / rel).write_bytes(data)
    assert importlib.machinery.PathFinder.find_spec("twin", [str(plain)]).origin == str(plain / "twin.abi3.so")

    folder, project = downloaded(hub_env, tmp_path, "twin", LAZY_FILES + files)
    module = load_kernel("kernels-test/verified-twin", lockfile=project / "kernels.lock")
    twin = module.late("twin")
    assert twin.KIND == "extension"
    assert twin.__file__ == str(folder / "twin.abi3.so")

"""The loader enforces the lock: only locked kernels, only verified bytes, this machine's variant."""

from __future__ import annotations

import sys

import pytest

from kernel_deps import get_kernel, get_locked_kernel, load_kernel
from kernel_deps.cache import store as cache
from kernel_deps.commands.download import download_project
from kernel_deps.core.errors import LockfileError
from kernel_deps.loader.api import (
    KernelImportError,
    KernelIntegrityError,
    KernelNotCachedError,
    KernelNotLockedError,
    LockNotFoundError,
    StaleLockWarning,
    calling_module,
    find_lock,
)
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release
from tests.fixtures.cached_project import REPO_ID as STARTUP_REPO_ID
from tests.fixtures.cached_project import write_cached_project
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project


def unique_repo(hub_env, name: str, *releases: Release) -> str:
    repo_id = f"kernels-test/loader-{name}"
    hub_env.add_repo(KernelRepo(repo_id, releases or (Release("1.0.0"),)))
    return repo_id


def test_locked_load_imports_this_machines_variant(hub_env, tmp_path) -> None:
    repo_id = unique_repo(hub_env, "basic", Release("1.0.0"), Release("1.1.0"))
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1,<2"', locked=True)
    download_project(project)
    module = load_kernel(repo_id, lockfile=project / "kernels.lock")
    assert module.__version__ == "1.1.0"
    assert module.VARIANT == CPU_VARIANT
    assert module.describe() == f"{repo_id} 1.1.0 {CPU_VARIANT}"
    origin = module.__kernel_origin__
    assert (origin.commit, origin.variant, origin.lock_origin) == (hub_env.repos[repo_id].commits["1.1.0"], CPU_VARIANT, "argument")
    assert load_kernel(repo_id, lockfile=project / "kernels.lock") is module
    # Imported from the verified files only: no bytecode written next to them.
    assert not list(origin.path.rglob("__pycache__"))


def test_lock_is_found_beside_pyproject_and_through_the_environment(hub_env, tmp_path, monkeypatch) -> None:
    repo_id = unique_repo(hub_env, "discovery")
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"', locked=True)
    (project / "src" / "pkg").mkdir(parents=True)
    monkeypatch.chdir(project / "src" / "pkg")
    found = find_lock()
    assert (found.origin, found.path) == ("project", str(project / "kernels.lock"))
    module = get_locked_kernel(repo_id)
    assert module.__kernel_origin__.lock_origin == "project"

    monkeypatch.chdir(tmp_path)
    with pytest.raises(LockNotFoundError, match="no kernels.lock found \\(called from tests.functional.loader.test_loader\\)"):
        find_lock()
    monkeypatch.setenv("KERNELS_LOCKFILE", str(project / "kernels.lock"))
    assert find_lock().origin == "KERNELS_LOCKFILE"


def test_lock_discovery_stops_at_the_first_pyproject_even_without_a_lock(tmp_path, monkeypatch) -> None:
    # A project inside another project's folder (a monorepo member, a vendored tool) is a
    # project of its own: it never takes the lock of the project around it.
    monkeypatch.delenv("KERNELS_LOCKFILE", raising=False)
    monkeypatch.setenv("KERNELS_CACHE", str(tmp_path / "cache"))
    outer = write_cached_project(tmp_path / "outer", tmp_path / "cache")
    inner = write_project(outer / "tools" / "inner", {})
    (inner / "src").mkdir()
    monkeypatch.chdir(inner / "src")
    message = (
        f"the project {inner} has no kernels.lock beside its pyproject.toml (called from tests.functional.loader.test_loader): "
        f"run 'kernels lock' in {inner}, or pass lockfile= or set KERNELS_LOCKFILE"
    )
    with pytest.raises(LockNotFoundError) as info:
        find_lock()
    assert str(info.value) == message
    with pytest.raises(LockNotFoundError) as info:
        load_kernel(STARTUP_REPO_ID)
    assert str(info.value) == message
    monkeypatch.chdir(outer / "tools")  # no pyproject here: the walk reaches the outer project
    assert find_lock().path == str(outer / "kernels.lock")
    assert load_kernel(STARTUP_REPO_ID).answer() == 42


def test_a_kernels_lock_that_is_a_folder_is_named_not_taken_for_a_missing_lock(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("KERNELS_LOCKFILE", raising=False)
    project = write_project(tmp_path / "app", {})
    (project / "kernels.lock").mkdir()
    monkeypatch.chdir(project)
    with pytest.raises(LockfileError) as info:
        load_kernel(STARTUP_REPO_ID)
    lock = project / "kernels.lock"
    assert str(info.value) == f"{lock}: cannot read (Is a directory); check that it is a readable file"
    result = run_kernels("verify", str(project))  # the CLI says the same, as bad input
    assert (result.returncode, result.stderr.splitlines()) == (2, [f"error: {info.value}"])


def test_the_caller_is_the_first_frame_outside_kernel_deps() -> None:
    assert calling_module() == "tests.functional.loader.test_loader"


def test_unlocked_repo_is_refused(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/flash" = 1', locked=True)
    with pytest.raises(KernelNotLockedError) as info:
        load_kernel("kernels-test/rotary", lockfile=project / "kernels.lock")
    assert str(info.value) == (
        f"kernels-test/rotary is not locked in {project / 'kernels.lock'}; "
        "add it to [tool.kernels.dependencies] and run kernels lock"
    )


def test_a_kernel_declared_but_not_locked_is_told_to_run_lock_not_to_add_it(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/flash" = 1', locked=True)
    write_project(project, '"kernels-test/flash" = 1\n"kernels-test/rotary" = ">=1"')  # added by hand, not locked
    with pytest.warns(UserWarning, match="does not agree with pyproject.toml"):  # the lock is stale
        with pytest.raises(KernelNotLockedError) as info:
            load_kernel("kernels-test/rotary", lockfile=project / "kernels.lock")
    assert str(info.value) == (
        f"kernels-test/rotary is in [tool.kernels.dependencies] but not locked in {project / 'kernels.lock'}; "
        "run 'kernels lock' (or 'kernels sync')"
    )


def test_tampered_byte_is_refused_and_named(hub_env, tmp_path) -> None:
    repo_id = unique_repo(hub_env, "tampered")
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"', locked=True)
    download_project(project)
    kernel_dir = cache.variant_dir(cache.find_repo_dir(repo_id), hub_env.repos[repo_id].commits["1.0.0"], CPU_VARIANT)
    target = (kernel_dir / "_ops.py").resolve()
    target.write_bytes(target.read_bytes().replace(b"OPS", b"OPZ"))
    with pytest.raises(KernelIntegrityError, match=r"refusing to load .*: _ops\.py modified \(expected [0-9a-f]{40}, got [0-9a-f]{40}\)"):
        load_kernel(repo_id, lockfile=project / "kernels.lock")
    assert not [m for m in sys.modules if "loader_tampered" in m]


def test_extra_file_is_refused_and_named(hub_env, tmp_path) -> None:
    repo_id = unique_repo(hub_env, "extra")
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"', locked=True)
    download_project(project)
    kernel_dir = cache.variant_dir(cache.find_repo_dir(repo_id), hub_env.repos[repo_id].commits["1.0.0"], CPU_VARIANT)
    (kernel_dir / "sitecustomize.py").write_text("print('owned')\n")
    with pytest.raises(KernelIntegrityError, match=r"sitecustomize\.py extra"):
        load_kernel(repo_id, lockfile=project / "kernels.lock")


def test_offline_load_with_nothing_cached_fails_clearly(hub_env, tmp_path, monkeypatch) -> None:
    repo_id = unique_repo(hub_env, "offline")
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"', locked=True)
    with pytest.raises(KernelNotCachedError, match=r"is not in the cache .*; run 'kernels download' for this project first"):
        load_kernel(repo_id, lockfile=project / "kernels.lock")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(KernelNotCachedError):
        get_locked_kernel(repo_id, lockfile=project / "kernels.lock")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert get_locked_kernel(repo_id, lockfile=project / "kernels.lock").__version__ == "1.0.0"


def test_two_versions_live_side_by_side(hub_env, tmp_path) -> None:
    repo_id = unique_repo(hub_env, "two-versions", Release("1.0.0"), Release("2.0.0"))
    old = write_project(tmp_path / "old", f'"{repo_id}" = "<2"', locked=True)
    new = write_project(tmp_path / "new", f'"{repo_id}" = ">=2"', locked=True)
    first = get_locked_kernel(repo_id, lockfile=old / "kernels.lock")
    second = get_locked_kernel(repo_id, lockfile=new / "kernels.lock")
    assert (first.__version__, second.__version__) == ("1.0.0", "2.0.0")
    assert first.__name__ != second.__name__
    assert sys.modules[first.__name__] is first and sys.modules[second.__name__] is second
    assert first.layers.describe() != second.layers.describe()


def test_failed_import_leaves_nothing_in_sys_modules(hub_env, tmp_path) -> None:
    broken = Release("1.0.0", extra_files=(("__init__.py", b"from . import layers\nraise RuntimeError('boom')\n"),))
    repo_id = unique_repo(hub_env, "broken", broken)
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"', locked=True)
    with pytest.raises(KernelImportError, match="failed to import: RuntimeError: boom"):
        get_locked_kernel(repo_id, lockfile=project / "kernels.lock")
    assert not [m for m in sys.modules if "loader_broken" in m]


def test_get_kernel_resolves_without_a_lock(hub_env) -> None:
    module = get_kernel("kernels-test/rotary", version=">=1,<2", trust_remote_code=True)
    assert module.__version__ == "1.1.0"
    assert module.__kernel_origin__.lock_origin == "get_kernel"
    assert get_kernel("kernels-test/rotary", revision="v1.0.0", trust_remote_code=True).__version__ == "1.0.0"


def test_caller_run_with_python_m_is_its_module_name(tmp_path) -> None:
    import subprocess

    (tmp_path / "pkgx").mkdir()
    (tmp_path / "pkgx" / "__init__.py").write_text("")
    (tmp_path / "pkgx" / "tool.py").write_text("from kernel_deps.loader.api import calling_module\nprint(calling_module())\n")
    result = subprocess.run([sys.executable, "-m", "pkgx.tool"], cwd=tmp_path, capture_output=True, text=True)
    assert result.stdout.strip() == "pkgx.tool", result.stderr


def test_a_kernel_with_dependencies_downloads_and_loads_on_a_cold_cache(hub_env, tmp_path) -> None:
    """Downloading one entry must not cut it out of its lock (its dependencies' entries)."""
    project = write_project(tmp_path / "app", '"kernels-test/layer-norm" = ">=0.1"', locked=True)
    assert find_lock(project / "kernels.lock").lock.get("kernels-test/layer-norm").dependencies
    module = get_locked_kernel("kernels-test/layer-norm", lockfile=project / "kernels.lock")
    assert module.__version__ == "0.2.0" and module.VARIANT == CPU_VARIANT
    # Only the asked-for kernel was fetched: its dependency is loaded on its own request
    # (its folder holds at most the metadata.json blobs the lock read, no snapshot).
    activation = cache.find_repo_dir("kernels-test/activation")
    assert activation is None or not (activation / "snapshots").exists()
    assert get_kernel("kernels-test/layer-norm", version=">=0.1", trust_remote_code=True).__version__ == "0.2.0"


def test_a_lock_replaced_with_the_same_size_and_time_is_read_again(hub_env, tmp_path) -> None:
    # A long-lived process loads from a lock; the file is then replaced by another lock of the
    # same size, its modification time put back (as `cp -p` or `rsync -t` leave it). The next
    # load follows the lock as it is now, not the one this process read first.
    import os

    repo_id = unique_repo(hub_env, "replaced-lock", Release("1.0.0"), Release("1.1.0"))
    newer = write_project(tmp_path / "newer", f'"{repo_id}" = ">=1,<2.0"', locked=True)  # as long as <1.1
    older = write_project(tmp_path / "older", f'"{repo_id}" = ">=1,<1.1"', locked=True)
    for project in (newer, older):
        download_project(project)
    lock = newer / "kernels.lock"
    assert load_kernel(repo_id, lockfile=lock).__version__ == "1.1.0"
    replacement = (older / "kernels.lock").read_bytes()
    before = os.stat(lock)
    assert len(replacement) == before.st_size and replacement != lock.read_bytes()
    staged = lock.with_name("kernels.lock.new")
    staged.write_bytes(replacement)
    os.utime(staged, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(staged, lock)
    assert os.stat(lock).st_mtime_ns == before.st_mtime_ns
    # Judged as it is now, too: it was made for the other project's range.
    with pytest.warns(StaleLockWarning, match="does not agree with pyproject.toml"):
        assert load_kernel(repo_id, lockfile=lock).__version__ == "1.0.0"

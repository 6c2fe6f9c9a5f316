"""The loader's public functions as an application calls them, without relying on which
frame called them (so they run under mutation testing too): a kernel loaded once is
served from memory, get_locked_kernel on a cached lock, the lock shipped inside an
installed distribution, has_kernel and get_kernel's argument check, get_local_kernel."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernel_deps import get_kernel, get_local_kernel, get_locked_kernel, has_kernel, load_kernel
from kernel_deps.core.errors import UsageError
from kernel_deps.loader.api import LockNotFoundError, find_lock
from kernel_deps.loader.local import LocalKernelWarning
from tests.fixtures.builder import METAL_VARIANT, UNIVERSAL_VARIANT, KernelRepo, Release
from tests.fixtures.cached_project import REPO_ID, write_cached_project


@pytest.fixture
def cached(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """A project locked and cached without the Hub; (its kernels.lock, the cache root)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("KERNELS_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    monkeypatch.delenv("KERNELS_LOCKFILE", raising=False)
    project = write_cached_project(tmp_path / "app", root)
    return project / "kernels.lock", root


def test_a_kernel_loaded_once_is_served_from_memory_even_when_the_cache_goes_away(cached) -> None:
    lock, root = cached
    first = load_kernel(REPO_ID, lockfile=lock)
    assert first.answer() == 42
    shutil.rmtree(root)  # e.g. a cache cleanup while the application runs
    assert load_kernel(REPO_ID, lockfile=lock) is first


def test_get_locked_kernel_loads_a_cached_kernel_without_the_hub(cached) -> None:
    lock, _ = cached
    assert get_locked_kernel(REPO_ID, lockfile=lock).answer() == 42


def _install(site: Path, package: str, dist: str, lock_text: str | None) -> None:
    """A distribution installed in ``site``: its package and .dist-info, with or without a kernels.lock."""
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text("")
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "top_level.txt").write_text(f"{package}\n")
    if lock_text is not None:
        (info / "kernels.lock").write_text(lock_text)


def test_a_lock_shipped_in_the_callers_distribution_is_found(cached, tmp_path, monkeypatch) -> None:
    lock, _ = cached
    site = tmp_path / "site"
    _install(site, "shipsalock", "ships-a-lock", lock.read_text())
    _install(site, "shipsnolock", "ships-no-lock", None)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.chdir(tmp_path)  # no project around: only the distribution can answer

    found = find_lock(caller="shipsalock.tool")
    assert found.origin == "distribution ships-a-lock"
    assert found.path == "ships-a-lock 1.0 (installed distribution)"
    assert found.lock.get(REPO_ID) is not None
    with pytest.raises(LockNotFoundError, match=r"no kernels.lock found \(called from shipsnolock\.tool\)"):
        find_lock(caller="shipsnolock.tool")


def test_get_kernel_needs_exactly_one_of_version_and_revision(monkeypatch) -> None:
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    with pytest.raises(UsageError, match=r"^get_kernel\('kernels-test/rotary'\): pass exactly one of version="):
        get_kernel("kernels-test/rotary")
    with pytest.raises(UsageError, match=r"^has_kernel\('kernels-test/rotary'\): .*; both given$"):
        has_kernel("kernels-test/rotary", version=1, revision="v1")


def test_has_kernel_asks_the_hub_whether_this_machine_has_a_build(hub_env, monkeypatch) -> None:
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    metal_only = "kernels-test/loader-metal-only"
    if metal_only not in hub_env.repos:
        hub_env.add_repo(KernelRepo(metal_only, (Release("1.0.0", variants=(METAL_VARIANT,)),)))
    assert has_kernel("kernels-test/norm-universal", version=1, trust_remote_code=True) is True
    assert has_kernel(metal_only, version=1, trust_remote_code=True) is False


def test_get_local_kernel_imports_a_folder_given_as_text(tmp_path) -> None:
    build = tmp_path / "my-dev-kernel" / "build" / UNIVERSAL_VARIANT
    build.mkdir(parents=True)
    (build / "__init__.py").write_text("VALUE = 'from the folder'\n")
    with pytest.warns(LocalKernelWarning):
        module = get_local_kernel(str(tmp_path / "my-dev-kernel"))
    assert module.VALUE == "from the folder"

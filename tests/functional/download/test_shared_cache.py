"""KERNELS_CACHE_SHARED: read-only caches searched before the writable one. A variant found
there intact is loaded and counted as downloaded where it lies, and nothing is written
there; download fetches into the writable cache only what the shared ones lack; a load
works with the writable cache absent or read-only, and a download that needs it then
fails with one line. File modes are made to apply (tests/fixtures/unprivileged.py)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.commands.download import download_project
from kernel_deps.core.errors import FileWriteError
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT
from tests.fixtures.cli import run_kernels
from tests.fixtures.downloads import add_repos
from tests.fixtures.projects import write_project
from tests.fixtures.unprivileged import where_modes_apply


def _tree(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder``: its kind, size, mode and modification time."""
    out = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        out[path.relative_to(folder).as_posix()] = (stat.S_IFMT(info.st_mode), info.st_size, info.st_mode, info.st_mtime_ns)
    return out


def _read_only(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _writable(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


@pytest.fixture
def shared(hub_env, tmp_path, monkeypatch):
    """A project and a shared cache holding its CPU variants (built by download --into),
    made read-only; the writable cache absent; yields (project, shared folder)."""
    project = write_project(tmp_path / "app", add_repos(hub_env, f"shared-{tmp_path.name[-12:]}", kernels=1), locked=True)
    folder = tmp_path / "shared"
    result = run_kernels("download", str(project), "--variant", CPU_VARIANT, "--into", str(folder))
    assert result.returncode == 0, result.stderr
    _read_only(folder)
    local = tmp_path / "local-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(local))
    monkeypatch.setenv("KERNELS_CACHE_SHARED", os.pathsep.join([str(tmp_path / "not-mounted"), str(folder)]))
    yield project, folder
    _writable(folder)


def test_a_shared_variant_is_loaded_and_downloaded_where_it_lies_writing_nothing(shared, proxy, monkeypatch) -> None:
    project, folder = shared
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    before = _tree(folder)
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    kernel = lock.kernels[0]

    def use() -> tuple:
        from kernel_deps import get_locked_kernel

        module = get_locked_kernel(kernel.repo_id, lockfile=project / "kernels.lock")
        return module, download_project(project, variants=[CPU_VARIANT])

    module, report = where_modes_apply(use)
    assert module.layers.describe() == f"{kernel.repo_id} 1.0.0 {CPU_VARIANT}"
    assert Path(module.__file__).is_relative_to(folder)  # used where it lies, not copied
    assert len(report.already_cached) == 1 and report.fetched == []
    assert proxy.total_requests() == 0
    assert _tree(folder) == before  # no lock file, no partial, no ref, nothing touched
    assert not cache.cache_root().exists()  # nor anything in the writable cache


def test_download_fetches_into_the_writable_cache_only_what_the_shared_ones_lack(shared, proxy, monkeypatch) -> None:
    project, folder = shared
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    before = _tree(folder)
    report = where_modes_apply(download_project, project, variants=[CPU_VARIANT, CUDA_VARIANT])
    assert [t.variant for t in report.already_cached] == [CPU_VARIANT]
    assert [t.variant for t in report.fetched] == [CUDA_VARIANT]
    assert all(f"build/{CUDA_VARIANT}/" in path for (_, path) in proxy.counts if "/resolve/" in path)
    assert _tree(folder) == before
    local = cache.cache_root()
    assert list(local.glob(f"*/snapshots/*/build/{CUDA_VARIANT}"))
    assert not list(local.glob(f"*/snapshots/*/build/{CPU_VARIANT}"))  # not copied


def test_with_the_writable_cache_read_only_loads_work_and_a_download_fails_in_one_line(shared, proxy, monkeypatch) -> None:
    project, folder = shared
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    local = cache.cache_root()
    local.mkdir()
    local.chmod(0o555)
    kernel = read_lock(project / "kernels.lock", purpose="use").lock.kernels[0]
    try:
        def load():
            from kernel_deps import load_kernel

            return load_kernel(kernel.repo_id, lockfile=project / "kernels.lock")

        assert where_modes_apply(load).VARIANT == CPU_VARIANT
        with pytest.raises(FileWriteError) as info:
            where_modes_apply(download_project, project, variants=[CUDA_VARIANT])
    finally:
        local.chmod(0o755)
    message = str(info.value)
    assert f"{kernel.repo_id} {CUDA_VARIANT}: cannot write" in message and "\n" not in message
    assert list(local.iterdir()) == []


def test_a_shared_variant_that_differs_from_the_lock_is_passed_over_and_left_alone(shared, proxy, monkeypatch) -> None:
    project, folder = shared
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    kernel = read_lock(project / "kernels.lock", purpose="use").lock.kernels[0]
    variant = cache.variant_dir(cache.find_repo_dir(kernel.repo_id, folder), kernel.sha, CPU_VARIANT)
    target = variant / "_ops.py"
    blob = target.resolve()
    _writable(folder)
    blob.write_text("OPS_NAMESPACE = 'tampered'\n")
    _read_only(folder)
    before = _tree(folder)
    report = where_modes_apply(download_project, project, variants=[CPU_VARIANT])
    assert [t.variant for t in report.fetched] == [CPU_VARIANT]  # fetched into the writable cache instead
    assert _tree(folder) == before
    assert cache.check_variant(kernel.repo_id, kernel.sha, CPU_VARIANT, kernel.variants[CPU_VARIANT].hash).ok


@pytest.mark.parametrize("value", ["relative/cache", f"/ok{os.pathsep}~nobody-here/x"])
def test_a_shared_cache_that_is_not_an_absolute_path_is_one_line_naming_the_variable(cached, value, monkeypatch) -> None:
    project, _ = cached
    monkeypatch.setenv("KERNELS_CACHE_SHARED", value)
    result = run_kernels("download", str(project))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "KERNELS_CACHE_SHARED: " in lines[0] and "is not an absolute path" in lines[0], lines


def test_verify_and_sync_count_a_shared_variant_as_cached(shared, proxy, monkeypatch) -> None:
    project, folder = shared
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    before = _tree(folder)
    verified = where_modes_apply(run_kernels, "verify", str(project))
    assert verified.returncode == 0, verified.stderr + verified.stdout
    synced = where_modes_apply(run_kernels, "sync", str(project))
    assert synced.returncode == 0, synced.stderr + synced.stdout
    assert proxy.requests_matching("/resolve/") == 0
    assert _tree(folder) == before


def test_verify_says_which_tier_each_variant_came_from(shared, proxy, monkeypatch) -> None:
    project, folder = shared
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    where_modes_apply(download_project, project, variants=[CPU_VARIANT, CUDA_VARIANT])  # CUDA into the writable cache
    kernel = read_lock(project / "kernels.lock", purpose="use").lock.kernels[0]
    local = cache.cache_root()

    as_json = where_modes_apply(run_kernels, "verify", "--json", str(project))
    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    document = json.loads(as_json.stdout)
    assert document["schema_version"] == 4
    tiers = {entry["variant"]: (entry["tier"], entry["tier_root"]) for entry in document["verified"]}
    assert tiers == {CPU_VARIANT: ("shared", str(folder)), CUDA_VARIANT: ("writable", str(local))}
    assert all(Path(e["path"]).is_relative_to(e["tier_root"]) for e in document["verified"])

    text = where_modes_apply(run_kernels, "verify", str(project))
    assert text.returncode == 0, text.stdout + text.stderr
    assert f"  {kernel.repo_id} {CPU_VARIANT}: shared cache {folder}\n" in text.stdout
    assert f"  {kernel.repo_id} {CUDA_VARIANT}: writable cache {local}\n" in text.stdout
    assert "cache" not in where_modes_apply(run_kernels, "verify", "-q", str(project)).stdout


def test_sync_into_a_folder_checks_that_folder_not_a_shared_cache_holding_the_variants(shared, proxy, tmp_path,
                                                                                     monkeypatch) -> None:  # fmt: skip
    project, folder = shared
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    assert run_kernels("download", str(project), "--variant", CPU_VARIANT, env={"KERNELS_CACHE_SHARED": None}).returncode == 0
    into = tmp_path / "image-layer"  # built from the writable cache, which holds the variant too
    result = where_modes_apply(run_kernels, "sync", str(project), "--json", "--target", CPU_VARIANT, "--into", str(into))
    document = json.loads(result.stdout)
    assert result.returncode == 0, document
    verified = document["into_verify"]["verified"]
    assert verified and {(e["tier"], e["tier_root"]) for e in verified} == {("writable", str(into))}
    assert all(Path(e["path"]).is_relative_to(into) for e in verified)

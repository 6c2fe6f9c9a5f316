"""KERNELS_CACHE_SHARED: read-only caches searched before the writable one. A variant found
there intact is loaded and counted as downloaded where it lies, and nothing is written
there; download fetches into the writable cache only what the shared ones lack; a load
works with the writable cache absent or read-only, and a download that needs it then
fails with one line. File modes are made to apply (tests/fixtures/unprivileged.py); the
commands also run as processes of their own in which the folders are read-only mounts
(a private mount namespace), or, where mounting is refused, without the capabilities
that let root write past a file's mode."""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
import sys
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


# -- in processes where the folders are read-only for real --------------------------------

_MOUNT_READ_ONLY = 'n=$1; shift; while [ "$n" -gt 0 ]; do mount --bind -o ro "$1" "$1" || exit 97; shift; n=$((n-1)); done; exec "$@"'
_KERNELS = "import sys; from kernel_deps.cli import main; main(sys.argv[1:], prog_name='kernels')"
_LOAD = ("import sys; from kernel_deps import get_locked_kernel; "
         "m = get_locked_kernel(sys.argv[1], lockfile=sys.argv[2]); print(m.VARIANT, m.__file__)")  # fmt: skip


@functools.cache
def _read_only_by() -> str:
    """How a process gets folders it cannot write: "mount" (a read-only bind mount in a
    mount namespace of its own), "capabilities" (root without CAP_DAC_OVERRIDE, the folders'
    modes read-only) or "modes" (not root: the modes apply anyway)."""
    if os.geteuid() != 0:
        return "modes"
    probe = Path(os.environ.get("TMPDIR", "/tmp")) / f"kernel-deps-ro-probe-{os.getpid()}"
    probe.mkdir(exist_ok=True)
    try:
        if shutil.which("unshare") and shutil.which("mount"):
            tried = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", _MOUNT_READ_ONLY, "sh",
                                    "1", str(probe), "sh", "-c", 'touch "$0/x"', str(probe)],
                                   capture_output=True, timeout=30)  # fmt: skip
            if tried.returncode not in (0, 97) and not (probe / "x").exists():
                return "mount"
        return "capabilities"
    finally:
        shutil.rmtree(probe)


def _read_only_run(args: list[str], read_only: list[Path]) -> subprocess.CompletedProcess:
    """``args`` in a process of its own for which every folder of ``read_only`` is read-only."""
    how = _read_only_by()
    if how == "mount":
        args = ["unshare", "--mount", "--propagation", "private", "sh", "-c", _MOUNT_READ_ONLY, "sh",
                str(len(read_only)), *map(str, read_only), *args]  # fmt: skip
    modes = {folder: stat.S_IMODE(folder.stat().st_mode) for folder in read_only if how != "mount" and folder.exists()}
    for folder, mode in modes.items():
        folder.chmod(mode & ~0o222)  # the shared folder's entries are read-only already (the fixture)
    if how == "capabilities":
        args = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-all", *args]
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=240)
    finally:
        for folder, mode in modes.items():
            folder.chmod(mode)


def _kernels(*args: str) -> list[str]:
    return [sys.executable, "-c", _KERNELS, *args]


def _load(project: Path) -> list[str]:
    kernel = read_lock(project / "kernels.lock", purpose="use").lock.kernels[0]
    return [sys.executable, "-c", _LOAD, kernel.repo_id, str(project / "kernels.lock")]


def _listing(folder: Path) -> dict[str, tuple]:
    """:func:`_tree` with the folder itself (its mtime changes when an entry is made in it)."""
    info = folder.lstat()
    return {".": (info.st_mode, info.st_mtime_ns), **_tree(folder)}


def test_processes_with_the_shared_cache_mounted_read_only_load_verify_and_download_writing_nothing_there(
    shared, proxy, monkeypatch
) -> None:
    project, folder = shared
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    before = _listing(folder)
    loaded = _read_only_run(_load(project), [folder])
    assert loaded.returncode == 0, loaded.stderr
    variant, module_file = loaded.stdout.split()
    assert variant == CPU_VARIANT and Path(module_file).is_relative_to(folder)
    for args in (["download", str(project), "--variant", CPU_VARIANT, "--variant", CUDA_VARIANT],
                 ["verify", str(project), "--require-cached"], ["sync", str(project)]):  # fmt: skip
        result = _read_only_run(_kernels(*args), [folder])
        assert result.returncode == 0, (args, result.stdout, result.stderr)
    assert _listing(folder) == before  # no lock file, no .part, no ref, no folder made or touched
    local = cache.cache_root()
    assert list(local.glob(f"*/snapshots/*/build/{CUDA_VARIANT}"))  # what the shared cache lacks, fetched here
    assert not list(local.glob(f"*/snapshots/*/build/{CPU_VARIANT}"))
    assert proxy.requests_matching(f"build/{CPU_VARIANT}/") == 0


@pytest.mark.parametrize("writable", ["absent", "read-only"])
def test_with_the_writable_cache_unwritable_too_processes_load_and_a_download_fails_in_one_line(
    shared, proxy, monkeypatch, writable
) -> None:
    project, folder = shared
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    local = cache.cache_root()
    if writable == "read-only":
        local.mkdir()
    else:
        local.parent.mkdir(exist_ok=True)
    # Absent: it cannot be made either, its parent being read-only.
    unwritable = [folder, local if writable == "read-only" else local.parent]
    before = _listing(folder), _listing(unwritable[1])
    loaded = _read_only_run(_load(project), unwritable)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split()[0] == CPU_VARIANT
    verified = _read_only_run(_kernels("verify", str(project), "--require-cached"), unwritable)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    failed = _read_only_run(_kernels("download", str(project), "--variant", CUDA_VARIANT), unwritable)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    kernel = read_lock(project / "kernels.lock", purpose="use").lock.kernels[0]
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{kernel.repo_id} {CUDA_VARIANT}: cannot write" in lines[0], lines
    assert (_listing(folder), _listing(unwritable[1])) == before

"""A cache on a file system without working flock (some NFS, Lustre without -o flock):
downloads lock by creating lock files naming the holder's host and pid, say so once, and
break a lock file left behind by a holder that is gone."""

from __future__ import annotations

import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.core.filelocks import HELD_SUFFIX
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT
from tests.fixtures.cli import run_kernels
from tests.fixtures.downloads import add_repos, all_verified
from tests.fixtures.flockless import flockless_env, refusing_flock
from tests.fixtures.processes import KERNELS
from tests.fixtures.projects import write_project

NOTE = "this file system does not support flock (ENOLCK); locking by creating *.held files"


def _held_files(root) -> list:
    return sorted(root.rglob(f"*{HELD_SUFFIX}*"))


def test_four_downloads_at_once_share_a_cache_without_flock(hub_env, proxy, tmp_path) -> None:
    project = write_project(tmp_path / "app", add_repos(hub_env, "noflock", lfs_size=1 << 20), locked=True)
    root = cache.cache_root()
    root.mkdir(parents=True, exist_ok=True)
    proxy.latency = 0.02
    env = flockless_env(root, tmp_path / "site", {**os.environ, "HF_ENDPOINT": proxy.url})
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    files = sum(
        1 for k in lock.kernels for p in hub_env.repos[k.repo_id].files["1.0.0"]
        if "__pycache__" not in p and not p.endswith("/metadata.json")
    )  # fmt: skip

    def one(_: int) -> subprocess.CompletedProcess:
        command = [KERNELS, "download", "--all-variants", str(project)]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(one, range(4)))
    assert [r.returncode for r in results] == [0] * 4, [r.stderr for r in results if r.returncode]
    assert all_verified(project)
    assert files <= proxy.requests_matching("/resolve/") <= files + 2
    told = [r.stderr.count(NOTE) for r in results]
    assert max(told) == 1 and sum(told) >= 1, [r.stderr for r in results]  # said, and once per process
    assert _held_files(root) == []  # every lock let go


def _project(hub_env, tmp_path, name):
    project = write_project(tmp_path / "app", add_repos(hub_env, name, kernels=1), locked=True)
    kernel = read_lock(project / "kernels.lock", purpose="use").lock.kernels[0]
    marker = cache.variant_lock_path(cache.repo_dir(kernel.repo_id), kernel.sha, CPU_VARIANT).with_name(
        cache.variant_lock_path(cache.repo_dir(kernel.repo_id), kernel.sha, CPU_VARIANT).name + HELD_SUFFIX
    )
    marker.parent.mkdir(parents=True, exist_ok=True)
    return project, kernel, marker


def test_a_lock_file_left_by_a_process_of_this_host_that_died_is_broken_at_once(hub_env, tmp_path) -> None:
    project, kernel, marker = _project(hub_env, tmp_path, "noflock-dead")
    gone = subprocess.Popen(["true"])
    gone.wait()
    marker.write_text(f"{os.uname().nodename} {gone.pid} {time.time():.0f}\n")
    with refusing_flock(cache.cache_root()):
        start = time.monotonic()
        result = run_kernels("download", str(project), "--variant", CPU_VARIANT)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - start < 30
    assert cache.check_variant(kernel.repo_id, kernel.sha, CPU_VARIANT, kernel.variants[CPU_VARIANT].hash).ok
    assert not marker.exists()


def test_a_lock_file_of_another_host_is_waited_for_then_named_and_broken_once_older_than_the_budget(
    hub_env, tmp_path, monkeypatch
) -> None:
    project, kernel, marker = _project(hub_env, tmp_path, "noflock-other")
    marker.write_text(f"node-17 4242 {time.time():.0f}\n")
    monkeypatch.setenv("KERNELS_HUB_BUDGET", "3")
    with refusing_flock(cache.cache_root()):
        result = run_kernels("download", str(project), "--variant", CPU_VARIANT)
        assert result.returncode == 1
        lock_file = str(marker)[: -len(HELD_SUFFIX)]
        assert (
            f"{kernel.repo_id} {CPU_VARIANT}: another kernels download (pid 4242 on host node-17) held {lock_file} "
            "until the 3 s budget was spent"
        ) in result.stderr
        assert marker.read_text().startswith("node-17 4242 ")  # a live holder's lock is not broken
        old = time.time() - 7
        os.utime(marker, (old, old))  # older than twice the budget: longer than any command holds a lock
        result = run_kernels("download", str(project), "--variant", CPU_VARIANT)
    assert result.returncode == 0, result.stderr
    assert cache.check_variant(kernel.repo_id, kernel.sha, CPU_VARIANT, kernel.variants[CPU_VARIANT].hash).ok
    assert _held_files(cache.cache_root()) == []


def test_an_error_of_flock_other_than_its_absence_is_not_taken_for_it(hub_env, tmp_path, monkeypatch) -> None:
    import errno
    import fcntl

    project, _, marker = _project(hub_env, tmp_path, "noflock-eio")

    def broken(fd, operation):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(fcntl, "flock", broken)
    result = run_kernels("download", str(project), "--variant", CPU_VARIANT)
    assert result.returncode != 0
    assert "Input/output error" in result.stderr and "\n" not in result.stderr.strip()
    assert not marker.exists()

"""A cache on a file system without working flock (some NFS, Lustre without -o flock):
downloads lock by creating lock files naming the holder's host and pid, say so once, and
break a lock file left behind by a holder that is gone; `kernels cache prune` and a
project's edit lock take the same lock there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.core.filelocks import HELD_SUFFIX
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release, RepoFileContent
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


# -- every lock of the cache and the project is the same one ----------------------------

_HOLD = ("import sys; from kernel_deps.core.filelocks import HostLock; lock = HostLock(sys.argv[1], stale_after=600); "
         "assert lock.acquire(30); print('held', flush=True); sys.stdin.read(); lock.release()")  # fmt: skip


@contextmanager
def _held_elsewhere(lock_file, under, tmp_path) -> Iterator[subprocess.Popen]:
    """``lock_file`` held by another process whose flock fails under ``under``, until the block ends."""
    env = flockless_env(under, tmp_path / "holder-site", dict(os.environ))
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(lock_file)], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        assert os.path.exists(f"{lock_file}{HELD_SUFFIX}")  # taken without flock
        yield holder
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_prune_without_flock_skips_the_variant_a_download_holds_then_prunes_it(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/noflock-prune"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("1.1.0"))))
    app = write_project(tmp_path / "app", {repo_id: ">=1.0,<1.1"})
    old = write_project(tmp_path / "old", {repo_id: ">=1.1"})
    assert run_kernels("sync", str(app)).returncode == 0 and run_kernels("sync", str(old)).returncode == 0
    root, repo, unpinned = cache.cache_root(), cache.find_repo_dir(repo_id), hub_env.repos[repo_id].commits["1.1.0"]
    lock = cache.variant_lock_path(repo, unpinned, CPU_VARIANT)
    with _held_elsewhere(lock, root, tmp_path), refusing_flock(root):
        lock.unlink()  # the lock is its .held file alone, as where the folder was known to lack flock
        result = run_kernels("cache", "prune", "--json", str(app))
        assert result.returncode == 0, result.stderr
        skipped = {s["path"]: s["reason"] for s in json.loads(result.stdout)["skipped"]}
        assert skipped[str(repo / "snapshots" / unpinned)] == (
            f"a download of {unpinned[:12]} {CPU_VARIANT} is running (it holds {lock})"
        )
        assert (repo / "snapshots" / unpinned / "build" / CPU_VARIANT).is_dir()
    with refusing_flock(root):
        result = run_kernels("cache", "prune", "--json", str(app))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["skipped"] == []
    assert not (repo / "snapshots" / unpinned).exists()
    assert _held_files(root) == []
    assert run_kernels("verify", "--require-cached", str(app), env={"HF_HUB_OFFLINE": "1"}).returncode == 0


def test_a_project_edit_without_flock_waits_names_the_holder_and_then_edits(hub_env, tmp_path, monkeypatch) -> None:
    project = write_project(tmp_path / "app", add_repos(hub_env, "noflock-edit", kernels=1))
    lock_file = project / ".kernels-edit.lock"
    monkeypatch.setenv("KERNELS_HUB_BUDGET", "2")
    with _held_elsewhere(lock_file, project, tmp_path) as holder, refusing_flock(project):
        busy = run_kernels("lock", str(project))
        assert busy.returncode != 0
        host = os.uname().nodename
        assert f"another kernels command (pid {holder.pid} on host {host}) held {lock_file} until the 2 s budget" in busy.stderr
        assert not (project / "kernels.lock").exists()
    with refusing_flock(project):
        done = run_kernels("lock", str(project))
    assert done.returncode == 0, done.stderr
    assert (project / "kernels.lock").is_file()
    assert sorted(p.name for p in project.iterdir() if p.name.startswith(".kernels-edit")) == []  # nothing left


def test_a_build_failing_its_digest_is_removed_under_the_variants_lock_without_flock(hub_env, tmp_path) -> None:
    from tests.fixtures.cached_project import place_by_hand

    def change_python(variant: str, files: dict) -> dict:
        return {**files, "_ops.py": RepoFileContent(b"import os; os.system('true')\n", lfs=False)}

    repo_id = "kernels-test/noflock-digest"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CPU_VARIANT,), digest="sha256", tamper=change_python),)))
    project = write_project(tmp_path / "app", {repo_id: ">=1"})
    assert run_kernels("lock", str(project)).returncode == 0
    folder = place_by_hand(hub_env.repos[repo_id], "1.0.0", CPU_VARIANT)  # the locked bytes, failing their digest
    root = cache.cache_root()
    with refusing_flock(root):
        result = run_kernels("download", "--variant", CPU_VARIANT, str(project), env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 1
    assert result.stderr.startswith("error: removed from the cache: 1 build does not match its digest: "), result.stderr
    assert not folder.exists()
    assert _held_files(root) == []

"""Downloads through a faulty network, killed mid-way, and eight at once on one cache."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.commands.download import download_project
from kernel_deps.core.errors import HubUnavailableError
from kernel_deps.hub.client import HubClient
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, METAL_VARIANT
from tests.fixtures.cli import run_kernels
from tests.fixtures.downloads import add_repos, all_verified, snapshot_entries
from tests.fixtures.projects import write_project
from tests.fixtures.processes import KERNELS


def test_download_survives_5xx_resets_cut_bodies_and_stalls(hub_env, proxy, tmp_path) -> None:
    project = write_project(tmp_path / "app", add_repos(hub_env, "flaky"), locked=True)
    proxy.error_rate = 0.3
    proxy.reset_rate = 0.1
    proxy.truncate_rate = 0.1
    proxy.stall = 2.0
    proxy.only_paths = "/resolve/"  # stalls and cut bodies hit file downloads; 5xx hit them too
    hub = HubClient(endpoint=proxy.url, backoff=0.05, retries=12, budget=120)
    start = time.monotonic()
    report = download_project(project, all_variants=True, hub=hub)
    elapsed = time.monotonic() - start
    assert len(report.fetched) == 6
    assert all_verified(project)
    kinds = {kind for kind, _ in proxy.faults}
    assert {"error", "reset", "truncate", "stall"} <= kinds, proxy.faults
    assert elapsed < 120


def test_total_failure_fails_clearly_in_bounded_time(hub_env, proxy, tmp_path) -> None:
    project = write_project(tmp_path / "app", add_repos(hub_env, "down", kernels=1), locked=True)
    proxy.only_paths = "/resolve/"
    proxy.fail_all()
    hub = HubClient(endpoint=proxy.url, backoff=0.2, retries=100, budget=4)
    start = time.monotonic()
    with pytest.raises(HubUnavailableError) as info:
        download_project(project, hub=hub)
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert message.startswith(f"kernels-test/faults-down-0 build/{CPU_VARIANT}/")
    assert "HTTP 503" in message and "the 4 s budget is spent" in message and "KERNELS_HUB_BUDGET" in message
    assert elapsed < 15
    root = cache.cache_root()
    assert snapshot_entries(root) == []
    assert not [p for p in root.rglob("*.part")]


def kill_download_at(project: Path, env: dict, delay: float) -> int:
    process = subprocess.Popen(
        [KERNELS, "download", "--all-variants", "--quiet", str(project)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    time.sleep(delay)
    os.killpg(process.pid, signal.SIGKILL)
    return process.wait()


def test_sigkill_at_twenty_moments_loses_nothing(hub_env, proxy, tmp_path) -> None:
    project = write_project(tmp_path / "app", add_repos(hub_env, "killed", lfs_size=2 << 20, kernels=2), locked=True)
    proxy.latency = 0.05
    env = {**os.environ, "HF_ENDPOINT": proxy.url}
    root = cache.cache_root()
    # Spread the kills over the whole download: start-up, listing, mid-file, placing.
    moments = [0.3 + 0.15 * i for i in range(20)]
    for i, delay in enumerate(moments):
        if i % 4 == 0:  # now and then start from an empty cache again
            subprocess.run(["rm", "-rf", str(root)], check=True)
        kill_download_at(project, env, delay)
        verify = run_kernels("verify", str(project), env={"HF_ENDPOINT": proxy.url})
        assert verify.returncode == 0, f"after a kill at {delay:.2f}s:\n{verify.stdout}{verify.stderr}"
        for folder in snapshot_entries(root):
            assert folder.name in {CPU_VARIANT, CUDA_VARIANT, METAL_VARIANT}
    rerun = run_kernels("download", "--all-variants", str(project), env={"HF_ENDPOINT": proxy.url})
    assert rerun.returncode == 0, rerun.stderr
    assert all_verified(project)
    final = run_kernels("verify", "--require-cached", str(project), env={"HF_ENDPOINT": proxy.url})
    assert final.returncode == 0, final.stdout


def test_eight_concurrent_downloads_share_one_cache(hub_env, proxy, tmp_path) -> None:
    project = write_project(tmp_path / "app", add_repos(hub_env, "crowd", lfs_size=1 << 20, kernels=2), locked=True)
    proxy.latency = 0.02
    env = {**os.environ, "HF_ENDPOINT": proxy.url}
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    # Locking kept each metadata.json it read as a blob, so no download fetches those again.
    files = sum(
        1
        for k in lock.kernels
        for p in hub_env.repos[k.repo_id].files["1.0.0"]
        if "__pycache__" not in p and not p.endswith("/metadata.json")
    )

    def one(_: int) -> subprocess.CompletedProcess:
        return subprocess.run([KERNELS, "download", "--all-variants", str(project)], env=env, capture_output=True, text=True)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(one, range(8)))
    assert [r.returncode for r in results] == [0] * 8, [r.stderr for r in results if r.returncode]
    assert all_verified(project)
    fetched = proxy.requests_matching("/resolve/")
    assert files <= fetched <= files + 2, (files, fetched)

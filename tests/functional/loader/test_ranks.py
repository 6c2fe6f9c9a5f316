"""The ranks of one job loading one lock into one empty cache at once, as real processes:
the first to take a variant's lock asks the Hub and places it, the others wait on that lock
before asking the Hub anything, then find it placed; a wait that outlasts the budget names
who holds the lock."""

from __future__ import annotations

import os
import subprocess
import sys

from kernel_deps.cache import store as cache
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release
from tests.fixtures.faultproxy import by_kind
from tests.fixtures.projects import write_project
from tests.fixtures.ranks import run_ranks

REPO_ID = "kernels-test/ranks"


def _project(hub_env, tmp_path):
    if REPO_ID not in hub_env.repos:
        hub_env.add_repo(KernelRepo(REPO_ID, (Release("1.0.0", variants=(CPU_VARIANT,), lfs_size=1 << 20),)))
    return write_project(tmp_path / "app", {REPO_ID: ">=1"}, locked=True)


def test_eight_ranks_ask_the_hub_what_one_process_asks(hub_env, proxy, tmp_path) -> None:
    project = _project(hub_env, tmp_path)
    proxy.latency = 0.05  # a distant Hub: the ranks overlap while the first one downloads
    env = {**os.environ, "HF_ENDPOINT": proxy.url, "HF_HUB_CACHE": str(tmp_path / "one")}
    _, [alone] = run_ranks(1, REPO_ID, project / "kernels.lock", env)
    assert alone.returncode == 0, alone.stderr
    one = proxy.total_requests()
    proxy.reset_counts()

    env["HF_HUB_CACHE"] = str(tmp_path / "shared")
    _, results = run_ranks(8, REPO_ID, project / "kernels.lock", env)
    assert [r.returncode for r in results] == [0] * 8, [r.stderr for r in results if r.returncode]
    assert {r.stdout.strip() for r in results} == {f"{REPO_ID} 1.0.0 {CPU_VARIANT}"}
    assert proxy.total_requests() <= 1.5 * one + 2, (one, proxy.counts)
    assert by_kind(proxy)["refs"] == 1  # not one per rank
    assert all(n == 1 for (_, path), n in proxy.counts.items() if "/resolve/" in path), proxy.counts


def test_a_rank_waiting_past_the_budget_names_the_holder_and_asks_the_hub_nothing(hub_env, proxy, tmp_path) -> None:
    project = _project(hub_env, tmp_path)
    kernel = read_lock(project / "kernels.lock", purpose="use").lock.kernels[0]
    lock_file = cache.variant_lock_path(cache.repo_dir(REPO_ID), kernel.sha, CPU_VARIANT)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom kernel_deps.core.filelocks import HostLock\n"
         f"lock = HostLock({str(lock_file)!r}, stale_after=60)\nassert lock.try_acquire()\n"
         "print('held', flush=True)\nsys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        env = {**os.environ, "HF_ENDPOINT": proxy.url, "KERNELS_HUB_BUDGET": "3"}
        _, [rank] = run_ranks(1, REPO_ID, project / "kernels.lock", env)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert rank.returncode != 0
    host = os.uname().nodename
    assert (
        f"another kernels download (pid {holder.pid} on host {host}) held {lock_file} until the 3 s budget was spent"
    ) in rank.stderr
    assert proxy.total_requests() == 0


def test_ranks_loading_a_legacy_model_repo_share_its_download_too(hub_env, proxy, tmp_path) -> None:
    project = write_project(tmp_path / "app", {"kernels-test/legacy-gelu": ">=0.1"}, locked=True)
    proxy.latency = 0.05
    env = {**os.environ, "HF_ENDPOINT": proxy.url, "HF_HUB_CACHE": str(tmp_path / "shared")}
    _, results = run_ranks(4, "kernels-test/legacy-gelu", project / "kernels.lock", env)
    assert [r.returncode for r in results] == [0] * 4, [r.stderr for r in results if r.returncode]
    assert by_kind(proxy)["refs"] == 2  # the kernel repo asked once, then the model repo, by the first rank only
    assert all(n == 1 for (_, path), n in proxy.counts.items() if "/resolve/" in path), proxy.counts
    placed = list((tmp_path / "shared").glob("models--kernels-test--legacy-gelu/snapshots/*/build/*"))
    assert len(placed) == 1

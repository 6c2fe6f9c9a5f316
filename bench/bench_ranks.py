"""Many ranks at once: Hub requests and time of N simultaneous `get_locked_kernel` calls on one empty cache.

Serves a sample kernel (a CPU variant with one LFS shared object, --mb MiB) with olah, behind the request-counting fault proxy (--latency seconds added to
every request, as a distant Hub has), locks the project, then for each rank count starts
that many processes at the same moment, each calling `get_locked_kernel` on a fresh, empty
shared cache (what the ranks of one job on one node do at start-up), and reports per rank
count: whether every rank succeeded, the Hub requests (refs, tree listings, files) and
the wall time, each against the one-rank run of the same invocation. Every rank is a
fresh Python process with bytecode allowed, as a job's ranks run.

    .venv/bin/python -m bench.bench_ranks [--ranks 1 8 32] [--mb 16] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from kernel_deps.commands.lock import lock_project
from kernel_deps.hub.client import HubClient
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release, build_repo
from tests.fixtures.faultproxy import FaultProxy, by_kind
from tests.fixtures.localhub import LocalHub
from tests.fixtures.ranks import run_ranks

KERNEL = "bench/ranks"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--mb", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base_env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")  # kernel-deps' per-user state (the lock below): never the real home
        size = args.mb << 20
        build_repo(root / "mirrors", KernelRepo(KERNEL, (Release("1.0.0", variants=(CPU_VARIANT,), lfs_size=size),)))
        project = root / "app"
        project.mkdir()
        (project / "pyproject.toml").write_text(
            f'[tool.kernels.dependencies]\n"{KERNEL}" = ">=1"\n\n[tool.kernels.trust]\npublishers = ["bench"]\n'
        )
        with LocalHub(root / "mirrors", root / "olah") as hub, FaultProxy(hub.url) as proxy:
            lock_project(project, hub=HubClient(endpoint=hub.url))
            proxy.latency = args.latency
            rows = []
            for count in args.ranks:
                cache = root / f"cache-{count}"
                env = {**base_env, "HF_ENDPOINT": proxy.url, "HF_HUB_CACHE": str(cache), "XDG_STATE_HOME": str(root / "state")}
                env.pop("KERNELS_CACHE", None)
                proxy.reset_counts()
                seconds, results = run_ranks(count, KERNEL, project / "kernels.lock", env)
                failed = [r.stderr.strip().splitlines()[-1:] for r in results if r.returncode]
                kinds = by_kind(proxy)
                files = proxy.counts
                fetched_twice = sum(1 for (_, path), n in files.items() if "/resolve/" in path and n > 1)
                rows.append((count, len(results) - len(failed), proxy.total_requests(), kinds, fetched_twice, seconds))
                if failed:
                    print(f"{count} ranks: {len(failed)} failed: {failed[:3]}")
    one = rows[0]
    print(f"{args.mb} MiB per shared object, {args.latency * 1000:.0f} ms per request added, {os.cpu_count()} cores")
    print("| ranks | succeeded | Hub requests (refs / tree / files) | against 1 rank | files fetched twice | time | against 1 rank |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for count, ok, total, kinds, twice, seconds in rows:
        split = f"{kinds['refs']} / {kinds['tree'] + kinds['slash']} / {kinds['file']}"
        print(f"| {count} | {ok} of {count} | {total} ({split}) | {total / one[2]:.2f}x | {twice} | "
              f"{seconds:.2f} s | {seconds / one[5]:.2f}x |")  # fmt: skip


if __name__ == "__main__":
    main()

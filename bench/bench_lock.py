"""How locking scales with the number of kernels, on a Hub with round-trip latency.

Builds N independent sample kernels (each with a dependency), serves them with olah
behind the fault-injecting proxy adding a fixed latency to every request, and times
`lock_project` for 1 kernel and for N kernels in the same process. With concurrent
fetching, N kernels should cost about as many round trips (wall time) as one.

    .venv/bin/python -m bench.bench_lock [--kernels 8] [--latency 0.1]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from kernel_deps.commands.lock import lock_project
from kernel_deps.hub.client import HubClient
from tests.fixtures.builder import KernelRepo, Release, build_repo
from tests.fixtures.faultproxy import FaultProxy
from tests.fixtures.localhub import LocalHub


def _project(root: Path, name: str, repos: list[str], targets: list[str] | None = None) -> Path:
    project = root / name
    project.mkdir()
    table = "" if targets is None else f"[tool.kernels]\ntargets = {json.dumps(targets)}\n\n"
    deps = "\n".join(f'"{r}" = ">=1,<2"' for r in repos)
    # The local Hub has no organizations API: the project trusts the sample kernels' publisher.
    trust = '[tool.kernels.trust]\npublishers = ["bench"]\n\n'
    (project / "pyproject.toml").write_text(f"{table}{trust}[tool.kernels.dependencies]\n{deps}\n")
    return project


def _timed_lock(project: Path, endpoint: str, proxy: FaultProxy) -> tuple[float, int, list[str]]:
    """Seconds and requests of locking ``project`` from scratch, and the lock's notes."""
    # A cache of its own per project: a lock keeps the metadata.json it reads in the
    # cache, which would spare later locks those requests.
    os.environ["HF_HUB_CACHE"] = str(project.parent / f"cache-{project.name}")
    proxy.reset_counts()
    start = time.perf_counter()
    outcome = lock_project(project, hub=HubClient(endpoint=endpoint))
    return time.perf_counter() - start, proxy.total_requests(), outcome.notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.1, help="seconds added to every request")
    args = parser.parse_args()
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")  # kernel-deps' per-user state: never the real home
        mirrors = root / "mirrors"
        names = [f"bench/kernel-{i}" for i in range(args.kernels)]
        for i, name in enumerate(names):
            dep = f"bench/dep-{i}"
            build_repo(mirrors, KernelRepo(dep, (Release("1.0.0"), Release("1.1.0"))))
            build_repo(mirrors, KernelRepo(name, (Release("1.0.0", depends=((dep, ">=1"),)), Release("1.1.0", depends=((dep, ">=1"),)))))
        with LocalHub(mirrors, root / "olah") as hub, FaultProxy(hub.url) as proxy:
            proxy.latency = args.latency
            _timed_lock(_project(root, "warmup", names[:1]), proxy.url, proxy)
            one, one_requests, _ = _timed_lock(_project(root, "one", names[:1]), proxy.url, proxy)
            many, many_requests, _ = _timed_lock(_project(root, "many", names), proxy.url, proxy)

    print(f"latency per request: {args.latency * 1000:.0f} ms")
    print(f"lock 1 kernel (+1 dependency):   {one:6.2f} s  {one_requests:4d} requests")
    print(f"lock {args.kernels} kernels (+{args.kernels} dependencies): {many:6.2f} s  {many_requests:4d} requests")
    print(f"wall-time ratio N/1: {many / one:.2f}  (sequential fetching would be about {many_requests / one_requests:.1f})")


if __name__ == "__main__":
    main()

"""What deployment targets cost when locking, on a Hub with round-trip latency.

Builds N sample kernels, each depending on a kernel whose newest release dropped its
CUDA 12.8 build, serves them with olah behind the fault-injecting proxy adding a fixed
latency to every request, and times `lock_project` for the N kernels without targets,
with a target every newest release serves, and with one that holds every dependency
back a release (each passed-over release costs a tree listing).

    .venv/bin/python -m bench.bench_targets [--kernels 8] [--latency 0.1]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from kernel_deps.hub import HubClient
from kernel_deps.locking import lock_project
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, KernelRepo, Release, build_repo
from tests.fixtures.faultproxy import FaultProxy
from tests.fixtures.localhub import LocalHub

CU130_VARIANT = "torch213-cxx11-cu130-x86_64-linux"


def _project(root: Path, name: str, repos: list[str], targets: list[str] | None) -> Path:
    project = root / name
    project.mkdir()
    table = "" if targets is None else f"[tool.kernels]\ntargets = {json.dumps(targets)}\n\n"
    deps = "\n".join(f'"{r}" = ">=1,<2"' for r in repos)
    (project / "pyproject.toml").write_text(f"{table}[tool.kernels.dependencies]\n{deps}\n")
    return project


def _timed_lock(project: Path, endpoint: str, proxy: FaultProxy) -> tuple[float, int, list[str]]:
    # A cache of its own per case: a lock keeps the metadata.json it reads in the cache,
    # which would spare the later cases those requests.
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

    with tempfile.TemporaryDirectory(prefix="bench-targets-") as tmp:
        root = Path(tmp)
        mirrors = root / "mirrors"
        names = [f"bench/kernel-{i}" for i in range(args.kernels)]
        for i, name in enumerate(names):
            dep = f"bench/dep-{i}"
            dropped = Release("1.1.0", variants=(CPU_VARIANT, CU130_VARIANT))
            build_repo(mirrors, KernelRepo(dep, (Release("1.0.0"), dropped)))
            build_repo(mirrors, KernelRepo(name, (Release("1.0.0", variants=(CPU_VARIANT, CUDA_VARIANT, CU130_VARIANT),
                                                          depends=((dep, ">=1"),)),)))  # fmt: skip
        with LocalHub(mirrors, root / "olah") as hub, FaultProxy(hub.url) as proxy:
            proxy.latency = args.latency
            _timed_lock(_project(root, "warmup", names[:1], None), proxy.url, proxy)
            rows = [
                ("no targets", *_timed_lock(_project(root, "none", names, None), proxy.url, proxy)),
                ("served by the newest", *_timed_lock(_project(root, "served", names, [CPU_VARIANT]), proxy.url, proxy)),
                ("holds each dep back", *_timed_lock(_project(root, "held", names, [CUDA_VARIANT]), proxy.url, proxy)),
            ]

    print(f"latency per request: {args.latency * 1000:.0f} ms; {args.kernels} kernels (+{args.kernels} dependencies)")
    for label, seconds, requests, notes in rows:
        print(f"{label:22s} {seconds:6.2f} s  {requests:4d} requests  {len(notes)} held-back notes")


if __name__ == "__main__":
    main()

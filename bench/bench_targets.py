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
import os
import tempfile
from pathlib import Path

from bench.bench_lock import _project, _timed_lock
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, KernelRepo, Release, build_repo
from tests.fixtures.faultproxy import FaultProxy
from tests.fixtures.localhub import LocalHub

CU130_VARIANT = "torch213-cxx11-cu130-x86_64-linux"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.1, help="seconds added to every request")
    args = parser.parse_args()
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

    with tempfile.TemporaryDirectory(prefix="bench-targets-") as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")  # kernel-deps' per-user state: never the real home
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

"""Download (cold and warm) and verify throughput, against hashlib's SHA-256 as the ceiling.

Builds one sample kernel whose variants carry large LFS shared objects (a few hundred MB
in all), serves it with olah, locks it, then in one process measures:

- hashlib.sha256 over the same bytes in memory (the ceiling for any verified path);
- a cold `download_lock` of every variant (Hub -> temp file -> hash -> blob -> snapshot);
- a warm `download_lock` (everything cached: a full re-hash, zero requests);
- `check_variant` over every variant (what `kernels verify` does per variant).

    .venv/bin/python -m bench.bench_download [--mb-per-variant 64] [--variants 4]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from pathlib import Path

from kernel_deps.cache import store as cache
from kernel_deps.fetch.run import download_lock
from kernel_deps.commands.lock import lock_project
from kernel_deps.hub.client import HubClient
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, METAL_VARIANT, STABLE_ABI_VARIANT, KernelRepo, Release, build_repo
from tests.fixtures.localhub import LocalHub

VARIANTS = (CPU_VARIANT, CUDA_VARIANT, METAL_VARIANT, STABLE_ABI_VARIANT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb-per-variant", type=int, default=64)
    parser.add_argument("--variants", type=int, default=4, choices=range(1, len(VARIANTS) + 1))
    args = parser.parse_args()
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    variants = VARIANTS[: args.variants]

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")  # kernel-deps' per-user state: never the real home
        spec = KernelRepo("bench/big", (Release("1.0.0", variants=variants, lfs_size=args.mb_per_variant << 20),))
        built = build_repo(root / "mirrors", spec)
        total = sum(len(c.data) for c in built.files["1.0.0"].values())
        blobs = [c.data for c in built.files["1.0.0"].values()]

        start = time.perf_counter()
        for data in blobs:
            hashlib.sha256(data).hexdigest()
        ceiling = time.perf_counter() - start

        project = root / "app"
        project.mkdir()
        (project / "pyproject.toml").write_text('[tool.kernels.dependencies]\n"bench/big" = ">=1"\n')
        cache_dir = root / "cache"
        with LocalHub(root / "mirrors", root / "olah") as hub:
            client = HubClient(endpoint=hub.url)
            lock = lock_project(project, hub=client).lock
            every = lambda kernel: sorted(kernel.variants)  # noqa: E731

            start = time.perf_counter()
            download_lock(lock, variants_for=every, hub=client, root=cache_dir)
            cold = time.perf_counter() - start

            start = time.perf_counter()
            download_lock(lock, variants_for=every, hub=client, root=cache_dir)
            warm = time.perf_counter() - start

        kernel = lock.kernels[0]
        start = time.perf_counter()
        for variant, locked in kernel.variants.items():
            assert cache.check_variant(kernel.repo_id, kernel.sha, variant, locked.hash, root=cache_dir).ok
        verify = time.perf_counter() - start

    mb = total / (1 << 20)
    rows = [("hashlib sha256 (ceiling)", ceiling), ("download, cold", cold), ("download, warm", warm), ("verify", verify)]
    print(f"{len(variants)} variants, {mb:.0f} MB in all")
    for name, seconds in rows:
        print(f"{name:26s} {seconds:7.2f} s  {mb / seconds:8.0f} MB/s  {ceiling / seconds:6.2f} x ceiling")


if __name__ == "__main__":
    main()

"""Hashing throughput where users wait (`kernels verify`, the loader's check), against hashlib.

Writes N files of M MB (default 4 x 64 MB) as LFS blobs of one cached variant, laid out
as ``kernels download`` leaves them (blobs, symlinks, manifest), then in one process
measures the best of R runs of:

- hashlib.sha256 on one core over the same bytes: already in memory, in one call and
  in 1 MiB slices, and read from the files by ``hashlib.file_digest``; the fastest of
  the three is the baseline, so a ratio never flatters kernel-deps;
- `cache.check_variant` with one hashing thread (the serial path);
- `cache.check_variant` with the default threads (one per usable core, capped).

Ratios are throughput against the one-core baseline: 1.00x hashes as fast as hashlib on
one core; above 1 uses more than one core.

    .venv/bin/python -m bench.bench_hashing [--files 4] [--mb 64] [--repeat 5]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kernel_deps.cache import store as cache
from kernel_deps.core.hashing import variant_hash
from kernel_deps.core.settings import HASH_THREADS_ENV, hash_threads

REPO_ID = "bench/hashing"
COMMIT = "0" * 40
VARIANT = "torch-cpu"


def best_of(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


@dataclass(frozen=True)
class HashingResult:
    """Seconds per row (best of the runs), and the ratios against the one-core baseline."""

    megabytes: int
    threads: int
    hashlib_rows: list[tuple[str, float]]
    serial: float
    parallel: float

    @property
    def baseline(self) -> float:
        return min(seconds for _, seconds in self.hashlib_rows)

    @property
    def baseline_mb_s(self) -> float:
        return self.megabytes / self.baseline

    @property
    def serial_ratio(self) -> float:
        return self.baseline / self.serial

    @property
    def parallel_ratio(self) -> float:
        return self.baseline / self.parallel


def measure_hashing(files: int, mb: int, repeat: int) -> HashingResult:
    """Lay out ``files`` blobs of ``mb`` MB as one cached variant and time every row."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = cache.repo_dir(REPO_ID, root=root)
        blobs = [os.urandom(mb << 20) for _ in range(files)]
        names = {}
        for index, data in enumerate(blobs):
            name = hashlib.sha256(data).hexdigest()
            (repo / "blobs").mkdir(parents=True, exist_ok=True)
            (repo / "blobs" / name).write_bytes(data)
            names[f"_ops_{index}.so"] = name
        cache.place_variant(repo, COMMIT, VARIANT, names)
        expected = variant_hash(names.items())

        def check() -> None:
            assert cache.check_variant(REPO_ID, COMMIT, VARIANT, expected, root=root).ok

        def with_threads(value: str | None) -> Callable[[], None]:
            def run() -> None:
                saved = os.environ.pop(HASH_THREADS_ENV, None)
                if value is not None:
                    os.environ[HASH_THREADS_ENV] = value
                try:
                    check()
                finally:
                    os.environ.pop(HASH_THREADS_ENV, None)
                    if saved is not None:
                        os.environ[HASH_THREADS_ENV] = saved
            return run

        def in_memory() -> None:
            for data in blobs:
                hashlib.sha256(data).hexdigest()

        def in_slices() -> None:
            for data in blobs:
                digest, view = hashlib.sha256(), memoryview(data)
                for start in range(0, len(view), 1 << 20):
                    digest.update(view[start : start + (1 << 20)])
                digest.hexdigest()

        paths = [repo / "blobs" / name for name in names.values()]

        def file_digest() -> None:
            for path in paths:
                with open(path, "rb") as file:
                    hashlib.file_digest(file, "sha256").hexdigest()

        threads = hash_threads() if HASH_THREADS_ENV not in os.environ else int(os.environ[HASH_THREADS_ENV])
        check()  # the files are in the page cache, as after a download
        hashlib_rows = [
            ("hashlib sha256, in memory, one call", best_of(repeat, in_memory)),
            ("hashlib sha256, in memory, 1 MiB slices", best_of(repeat, in_slices)),
            ("hashlib.file_digest sha256 of the files", best_of(repeat, file_digest)),
        ]
        serial = best_of(repeat, with_threads("1"))
        parallel = best_of(repeat, with_threads(str(threads)))
    return HashingResult(files * mb, threads, hashlib_rows, serial, parallel)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    result = measure_hashing(args.files, args.mb, args.repeat)
    rows = [
        *result.hashlib_rows,
        ("check_variant, 1 thread (serial)", result.serial),
        (f"check_variant, {result.threads} threads (parallel)", result.parallel),
    ]
    mb, base = result.megabytes, result.baseline
    print(f"{args.files} files x {args.mb} MB = {mb} MB; {os.cpu_count()} cores; best of {args.repeat}")
    print("ratios: throughput against the fastest one-core hashlib row (the baseline)")
    for name, seconds in rows:
        print(f"{name:40s} {seconds:7.3f} s  {mb / seconds:8.0f} MB/s  {base / seconds:5.2f}x")


if __name__ == "__main__":
    main()

"""What signature and digest checks add to locking N kernels and to a warm download.

Builds N sample kernels twice on one local Hub (olah behind the latency proxy): once
plain, once with kernel-builder's ``digest`` in every variant's ``metadata.json`` and a
Sigstore bundle beside it (signed by the tests' own Sigstore, whose trusted root the
signed project names). Then, for each set, from a fresh cache each time:

- ``kernels lock`` (in process, ``lock_project``): the signed set also reads each bundle
  and verifies it with sigstore-python, and holds each digest against the listing;
- the same lock again with that cache (``kernels.lock`` removed): every ``metadata.json``
  and bundle is a blob there, so no file is fetched and what remains is kernel-deps' own
  work, each bundle verified again;
- a warm ``kernels download`` as a user runs it (a ``kernels`` process: start-up,
  re-hash of every file, and for the signed set the digest check and each bundle
  verified again, which imports sigstore).

Each figure is the median of ``--runs`` runs.

    .venv/bin/python -m bench.bench_signatures [--kernels 20] [--latency 0.02] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernel_deps.commands.lock import lock_project
from kernel_deps.hub.client import HubClient
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, METAL_VARIANT, KernelRepo, Release, build_repo
from tests.fixtures.faultproxy import FaultProxy
from tests.fixtures.localhub import LocalHub
from tests.fixtures.sigstore_ca import Identity, LocalSigstore

VARIANTS = (CPU_VARIANT, CUDA_VARIANT, METAL_VARIANT)
KERNELS = Path(sys.executable).parent / "kernels"


def build_kernel_sets(mirrors: Path, sigstore: LocalSigstore, count: int) -> tuple[list[str], list[str]]:
    """``count`` plain and ``count`` signed kernels of the same shape (one release, three
    variants); the signed ones carry kernel-builder's digest and a Sigstore bundle per
    variant, signed by ``sigstore`` for their own repo. Their repo ids, plain then signed."""
    plain = [f"bench/plain-{i}" for i in range(count)]
    signed = [f"bench/signed-{i}" for i in range(count)]
    for name in plain:
        build_repo(mirrors, KernelRepo(name, (Release("1.0.0", variants=VARIANTS),)))
    for name in signed:
        sign = (lambda repo: lambda data, variant: sigstore.sign(data, Identity(repo)))(name)
        build_repo(mirrors, KernelRepo(name, (Release("1.0.0", variants=VARIANTS, digest="sha256", sign=sign),)))
    return plain, signed


def signature_project(root: Path, name: str, repos: list[str], trusted_root: Path | None) -> Path:
    """A project asking for ``repos`` (publisher ``bench`` trusted); with ``trusted_root``,
    it names that root and requires signatures."""
    project = root / name
    project.mkdir()
    trust = '[tool.kernels.trust]\npublishers = ["bench"]\n'
    if trusted_root is not None:
        trust += f'trusted-root = "{trusted_root}"\nrequire-signatures = true\n'
    deps = "\n".join(f'"{r}" = ">=1,<2"' for r in repos)
    (project / "pyproject.toml").write_text(f'[project]\nname = "{name}"\n\n{trust}\n[tool.kernels.dependencies]\n{deps}\n')
    return project


def _timed_lock(project: Path, proxy: FaultProxy, run: int) -> tuple[float, int]:
    """Seconds and requests of a lock from a fresh cache (nothing read before)."""
    os.environ["HF_HUB_CACHE"] = str(project.parent / f"cache-{project.name}-{run}")
    (project / "kernels.lock").unlink(missing_ok=True)
    proxy.reset_counts()
    start = time.perf_counter()
    lock_project(project, hub=HubClient(endpoint=proxy.url))
    return time.perf_counter() - start, proxy.total_requests()


def _timed_warm_download(project: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run([str(KERNELS), "download", "--all-variants", "-q", str(project)], env=env,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    elapsed = time.perf_counter() - start
    assert result.returncode == 0, result.stderr[-2000:]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds added to every request")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    sigstore = LocalSigstore("bench")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")  # kernel-deps' per-user state: never the real home
        mirrors = root / "mirrors"
        plain, signed = build_kernel_sets(mirrors, sigstore, args.kernels)
        trusted_root = sigstore.write_trusted_root(root / "trusted_root.json")
        results: dict[str, dict[str, float]] = {}
        with LocalHub(mirrors, root / "olah") as hub, FaultProxy(hub.url) as proxy:
            proxy.latency = args.latency
            for label, repos, trust in (("plain", plain, None), ("signed", signed, trusted_root)):
                project = signature_project(root, label, repos, trust)
                _timed_lock(project, proxy, -1)  # warm-up: imports, olah's first answers
                locks = [_timed_lock(project, proxy, run) for run in range(args.runs)]
                # A relock with the last lock's cache: nothing to fetch (bundles and metadata.json are
                # blobs there), so what is left is kernel-deps' own work, verification included.
                relocks = []
                for _ in range(args.runs):
                    (project / "kernels.lock").unlink()
                    start = time.perf_counter()
                    lock_project(project, hub=HubClient(endpoint=proxy.url))
                    relocks.append(time.perf_counter() - start)
                # The last lock's cache: download everything once, then time warm runs.
                env = {**os.environ, "HF_ENDPOINT": proxy.url}
                _timed_warm_download(project, env)
                warm = [_timed_warm_download(project, {**env, "HF_HUB_OFFLINE": "1"}) for _ in range(args.runs)]
                results[label] = {"lock": statistics.median(t for t, _ in locks), "requests": locks[-1][1],
                                  "relock": statistics.median(relocks), "warm": statistics.median(warm)}  # fmt: skip

    variants = args.kernels * len(VARIANTS)
    print(f"{args.kernels} kernels, {variants} variants, {args.latency * 1000:.0f} ms per request, median of {args.runs}")
    for what, key in (("lock (fresh cache)", "lock"), ("lock (files in the cache)", "relock"),
                      ("warm download (process)", "warm")):  # fmt: skip
        base, with_checks = results["plain"][key], results["signed"][key]
        added = (with_checks - base) / base * 100
        print(f"{what:26s} plain {base:6.3f} s   signed {with_checks:6.3f} s   added {added:+5.1f} %")
    print(f"lock requests: plain {results['plain']['requests']}, signed {results['signed']['requests']}")


if __name__ == "__main__":
    main()

"""Load overhead: first and repeated `load_kernel` against a plain import of the same module.

Serves sample kernels with olah, locks and downloads them, then in one process times:

- a plain `importlib` import of the variant's package from the cache (the baseline);
- the first `load_kernel` (find the lock, choose the variant, hash every file, import);
- a repeated `load_kernel` of the same kernel (served from the in-process registry).

Run for a small kernel (4 KiB shared object) and a large one (--mb, default 64 MiB), each
repeated over several fresh repos so every first load is a real first load.

    .venv/bin/python -m bench.bench_load [--mb 64] [--repeat 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kernel_deps import load_kernel
from kernel_deps.cache import store as cache
from kernel_deps.commands.download import download_project
from kernel_deps.commands.lock import lock_project
from kernel_deps.hub.client import HubClient
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release, build_repo
from tests.fixtures.localhub import LocalHub


def plain_import(name: str, folder: Path) -> None:
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py", submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    sys.dont_write_bytecode = True  # the baseline must not get a bytecode head start either

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")  # kernel-deps' per-user state: never the real home
        os.environ["HF_HUB_CACHE"] = str(root / "cache")
        sizes = {"4 KiB .so": 4096, f"{args.mb} MiB .so": args.mb << 20}
        repos = {label: [f"bench/{i}-{n}" for n in range(args.repeat)] for i, label in enumerate(sizes)}
        for label, ids in repos.items():
            for repo_id in ids:
                build_repo(root / "mirrors", KernelRepo(repo_id, (Release("1.0.0", variants=(CPU_VARIANT,), lfs_size=sizes[label]),)))
        project = root / "app"
        project.mkdir()
        deps = "\n".join(f'"{r}" = ">=1"' for ids in repos.values() for r in ids)
        (project / "pyproject.toml").write_text(f"[tool.kernels.dependencies]\n{deps}\n")
        with LocalHub(root / "mirrors", root / "olah") as hub:
            client = HubClient(endpoint=hub.url)
            lock = lock_project(project, hub=client).lock
            download_project(project, hub=client)

        lockfile = project / "kernels.lock"
        print(f"{'kernel':12s} {'plain import':>14s} {'first load':>14s} {'repeated load':>15s}  first/plain")
        for label, ids in repos.items():
            plain, first, again = [], [], []
            for n, repo_id in enumerate(ids):
                kernel = lock.get(repo_id)
                folder = cache.variant_dir(cache.find_repo_dir(repo_id), kernel.sha, CPU_VARIANT)
                start = time.perf_counter()
                plain_import(f"bench_plain_{label[0]}_{n}", folder)
                plain.append(time.perf_counter() - start)
                start = time.perf_counter()
                load_kernel(repo_id, lockfile=lockfile)
                first.append(time.perf_counter() - start)
                start = time.perf_counter()
                load_kernel(repo_id, lockfile=lockfile)
                again.append(time.perf_counter() - start)
            p, f, a = (statistics.median(x) * 1000 for x in (plain, first, again))
            print(f"{label:12s} {p:11.2f} ms {f:11.2f} ms {a:12.3f} ms  {f / p:8.1f}x")


if __name__ == "__main__":
    main()

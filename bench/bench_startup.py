"""Start-up: how long a command takes where a user waits for it, against `import click`.

Each command runs as a fresh process (as a user runs it), N times; the median is
printed with its ratio to the baseline, a Python that only imports click (the CLI's
one unavoidable dependency):

- `python -c "import click"` (the baseline);
- `kernels --help`;
- `kernels verify` (offline) of a small locked project whose variant is cached;
- `kernels verify --require-cached`, which also describes this machine (torch's build).

    .venv/bin/python -m bench.bench_startup [--runs 15] [--src PATH]

``--src`` times the kernel-deps sources in another checkout's ``src`` folder (put first
on ``PYTHONPATH``) with this environment's interpreter and packages, against the same
project and cache: ``git worktree add /tmp/old <commit>``, then ``--src /tmp/old/src``.
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

from tests.fixtures.cached_project import write_cached_project


def median_seconds(command: list[str], env: dict[str, str], runs: int) -> float:
    subprocess.run(command, env=env, check=True, capture_output=True)  # warm the file cache and bytecode
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--src", type=Path, help="a kernel-deps src folder to time instead of the installed one")
    args = parser.parse_args()
    kernels = str(Path(sys.executable).with_name("kernels"))
    python = sys.executable

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")  # kernel-deps' per-user state: never the real home
        project = write_cached_project(root / "app", root / "cache")
        env = {**os.environ, "KERNELS_CACHE": str(root / "cache"), "HF_HUB_DISABLE_TELEMETRY": "1"}
        if args.src:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(args.src.resolve()), env.get("PYTHONPATH")]))
        commands = {
            "import click (baseline)": [python, "-c", "import click"],
            "kernels --help": [kernels, "--help"],
            "kernels verify": [kernels, "verify", str(project)],
            "kernels verify --require-cached": [kernels, "verify", "--require-cached", str(project)],
        }
        results = {label: median_seconds(command, env, args.runs) for label, command in commands.items()}

    baseline = results["import click (baseline)"]
    source = args.src or Path(__file__).resolve().parent.parent / "src"
    print(f"kernel-deps from {source}: median of {args.runs} runs")
    for label, seconds in results.items():
        print(f"  {label:<34} {seconds * 1000:8.1f} ms  {seconds / baseline:5.2f}x")


if __name__ == "__main__":
    main()

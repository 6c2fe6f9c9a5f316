"""What the rows of bench/compare.py share: how a tool's CLI is run as a fresh process,
how a command is timed (median of N runs after one untimed run), and how a goal is
judged and printed."""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.fixtures.cachinghub import CachingHub
from tests.fixtures.faultproxy import FaultProxy

Goal = tuple[str, str, str]  # measure, this run's figure, goal and verdict


@dataclass(frozen=True)
class Sample:
    """The median wall time of one command and the requests it made (median per run)."""

    seconds: float
    requests: int | None = None
    hub_cpu: float | None = None  # median CPU seconds the local Hub (and its git processes) spent per run

    def show(self) -> str:
        extra = "" if self.requests is None else f", {self.requests} requests"
        return f"{self.seconds:.2f} s{extra}"


@dataclass(frozen=True)
class Tool:
    """How to run one tool's CLI, and the environment it runs in."""

    name: str
    slug: str
    argv: list[str]
    env: dict[str, str]

    def run(self, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [*self.argv, *args], env={**self.env, **(extra_env or {})}, capture_output=True, text=True, timeout=600
        )
        if result.returncode != 0:
            raise SystemExit(f"{self.name} {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
        return result


def cpu_seconds(pid: int | None) -> float | None:
    """CPU time of process ``pid`` and of its children it has waited for (Linux /proc); None
    where it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError, TypeError):
        return None
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def timed(run, *, runs: int, proxy: FaultProxy | None = None, before=None, hub_pid: int | None = None) -> Sample:
    """Median wall time of ``run()`` over ``runs`` runs (after one untimed run), the
    median number of requests the proxy saw per run, and the median CPU time of the
    local Hub's process ``hub_pid`` per run."""
    if before:
        before()
    run()  # warm the file cache, bytecode and the Hub's own caches
    seconds, counts, hub = [], [], []
    for _ in range(runs):
        if before:
            before()
        if proxy:
            proxy.reset_counts()
        hub_before = cpu_seconds(hub_pid)
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
        hub_after = cpu_seconds(hub_pid)
        if hub_before is not None and hub_after is not None:
            hub.append(hub_after - hub_before)
        if proxy:
            counts.append(proxy.total_requests())
    return Sample(statistics.median(seconds), round(statistics.median(counts)) if counts else None,
                  statistics.median(hub) if hub else None)  # fmt: skip



def goal(measure: str, value: float, limit: float, unit: str = "x") -> Goal:
    return measure, f"{value:.2f}{unit}", f"<= {limit:g}{unit}: {met(value <= limit)}"


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


@dataclass(frozen=True)
class Step:
    """One command of an interleaved measure: ``before()`` (untimed, every run) sets up,
    ``run()`` is timed, and ``proxy`` (if any) counts its requests."""

    run: Callable[[], object]
    before: Callable[[], object] | None = None
    proxy: FaultProxy | None = None


Served = tuple[int, int]  # answers the caching layer served from memory, and requests it forwarded to olah


def interleaved(steps: Sequence[Step], runs: int, layer: CachingHub | None = None) -> tuple[list[Sample], Served]:
    """Each of ``steps`` once untimed (which also primes ``layer``), then ``runs`` rounds of
    all of them in turn, so that what the machine does meanwhile weighs on each alike: their
    median wall times and requests, and how many requests ``layer`` served from memory and
    how many reached the Hub behind it, during the timed rounds and the set-ups between them."""
    for step in steps:
        if step.before:
            step.before()
        step.run()
    if layer:
        layer.reset_counts()
    seconds: list[list[float]] = [[] for _ in steps]
    counts: list[list[int]] = [[] for _ in steps]
    for _ in range(runs):
        for i, step in enumerate(steps):
            if step.before:
                step.before()
            if step.proxy:
                step.proxy.reset_counts()
            start = time.perf_counter()
            step.run()
            seconds[i].append(time.perf_counter() - start)
            if step.proxy:
                counts[i].append(step.proxy.total_requests())
    samples = [Sample(statistics.median(s), round(statistics.median(c)) if c else None) for s, c in zip(seconds, counts)]
    return samples, ((layer.hits, layer.misses) if layer else (0, 0))


def with_env(tool: Tool, slug: str, **env: str) -> Tool:
    """``tool`` under another slug with ``env`` laid over its environment."""
    return Tool(tool.name, slug, tool.argv, {**tool.env, **env})


def layer_note(*served: Served) -> str:
    """Whether the timed runs were served from the caching layer's memory (``served``: what
    :func:`interleaved` returned for each measure of a row)."""
    hits, misses = sum(h for h, _ in served), sum(m for _, m in served)
    if misses == 0:
        return f"every request through the caching layer during the timed runs served from its memory ({hits} answers)"
    return (f"WARNING: {misses} requests through the caching layer during the timed runs reached olah "
            f"({hits} from memory): those figures include olah's one-at-a-time serving")  # fmt: skip


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")

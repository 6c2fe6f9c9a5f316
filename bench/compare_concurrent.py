"""The rows of bench/compare.py measured through the concurrent caching layer.

olah serves one request after another; tests/fixtures/cachinghub.py, between the latency
proxy and olah (client -> fault proxy -> caching layer -> olah), serves every answer it
has seen from memory, many at once, as a real Hub serves them side by side. The proxy keeps
one connection to the layer per client connection (``FaultProxy(keep_upstream=True)``), so
the test servers, on the cores the client uses too, spend no connection and no thread of
the layer per request. The first,
untimed run of each command primes it; each row says whether every request of the timed
runs came from its memory. Commands are kernel-deps' own ``kernels`` script (the one
every row of bench/compare.py runs, with its environment), fresh processes, with a cache
and an ``XDG_STATE_HOME`` of their own in the run's temporary folder, both emptied (and
the lock file removed) before every run: a first lock.

- ``lock-layer``: a lock of ``--kernels`` (20) independent kernels against a lock of 3,
  ``--latency`` (50 ms) per request, through the layer (the goal, <= 1.3x) and, beside it
  in the same rounds, through the proxy straight to olah (what the ``lock`` rows measure).
- ``waves``: a lock of 3 kernels, one of them transitive (the project asks for A and B,
  A's ``metadata.json`` names C in ``kernel-depends``): its time with 100 ms per request
  less its time with none, over 100 ms, is the number of round trips it waits on (goal:
  3, the depth of its graph), the two interleaved; then one run's trace from the proxy's
  timeline, each request with its start and end, in waves: sorted by start, a request
  starts a new wave when it starts after the end of the earliest-ending request of the
  current wave (it could have waited on that answer), and the trace names, for each
  request, the last answer that had arrived when it was sent.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from bench.timing import Goal, Step, Tool, goal, interleaved, layer_note, met, with_env
from tests.fixtures.builder import KernelRepo, Release, build_repo
from tests.fixtures.cachinghub import CachingHub
from tests.fixtures.faultproxy import FaultProxy, waves
from tests.fixtures.projects import write_project

LOCK_SCALE_GOAL = 1.3
ROUND_TRIPS_GOAL = 3
WAVE_LATENCY = 0.1
WAVE_KERNELS = ("bench/wave-a", "bench/wave-b", "bench/wave-c")  # a depends on c


class Locker:
    """``kernels lock`` of one project with a cache and a state folder of its own, emptied
    (and the lock file removed) before every run."""

    def __init__(self, ours: Tool, root: Path, slug: str, endpoint: str, project: Path) -> None:
        self.cache, self.state, self.project = root / f"cache-{slug}", root / f"state-{slug}", project
        self.tool = with_env(ours, slug, HF_ENDPOINT=endpoint, HF_HOME=str(root / f"home-{slug}"),
                             HF_HUB_CACHE=str(self.cache), XDG_STATE_HOME=str(self.state))  # fmt: skip

    def empty(self) -> None:
        (self.project / "kernels.lock").unlink(missing_ok=True)
        shutil.rmtree(self.cache, ignore_errors=True)
        shutil.rmtree(self.state, ignore_errors=True)

    def lock(self) -> None:
        self.tool.run("lock", str(self.project))


def lock_layer_rows(ours: Tool, root: Path, projects: dict[int, Path], direct: FaultProxy, through: FaultProxy,
                    layer: CachingHub, runs: int, latency: float, goals: list[Goal]) -> tuple[list[tuple[str, ...]], str]:  # fmt: skip
    """Lock of N against lock of 3 kernels through the layer, and straight to olah beside it."""
    small, large = sorted(projects)
    steps = []
    for proxy, via in ((direct, "olah"), (through, "layer")):
        for count in (small, large):
            locker = Locker(ours, root, f"{via}-{count}", proxy.url, projects[count])
            steps.append(Step(locker.lock, locker.empty, proxy))
    direct.latency = through.latency = latency
    try:
        (olah_small, olah_large, layer_small, layer_large), served = interleaved(steps, runs, layer)
    finally:
        direct.latency = through.latency = 0.0
    ms = f"{latency * 1000:.0f} ms per request"
    value = layer_large.seconds / layer_small.seconds
    goals.append(goal(f"lock {large} independent kernels / lock {small} (empty cache, {ms}, concurrent layer)", value,
                      LOCK_SCALE_GOAL))  # fmt: skip
    straight = olah_large.seconds / olah_small.seconds
    rows = [
        (f"`kernels lock`, {ms}, empty cache, through the concurrent layer", layer_large.show(), layer_small.show(),
         f"{value:.2f}x", f"<= {LOCK_SCALE_GOAL}x: {met(value <= LOCK_SCALE_GOAL)}"),
        (f"the same, straight to olah (one request at a time), in the same rounds", olah_large.show(), olah_small.show(),
         f"{straight:.2f}x", "for comparison (the `lock` rows judge it)"),
    ]  # fmt: skip
    return rows, layer_note(served)


def build_wave_kernels(mirrors: Path) -> None:
    """A, B and C, two releases each; each release of A depends on C."""
    a, b, c = WAVE_KERNELS
    build_repo(mirrors, KernelRepo(c, (Release("1.0.0"), Release("1.1.0"))))
    build_repo(mirrors, KernelRepo(b, (Release("1.0.0"), Release("1.1.0"))))
    build_repo(mirrors, KernelRepo(a, (Release("1.0.0", depends=((c, ">=1"),)), Release("1.1.0", depends=((c, ">=1"),)))))


def waves_rows(ours: Tool, root: Path, proxy: FaultProxy, layer: CachingHub, runs: int,
               goals: list[Goal]) -> tuple[list[tuple[str, ...]], str, list[str]]:  # fmt: skip
    """The round trips a lock of A, B (and C through A) waits on; the layer note; the trace."""
    a, b, _ = WAVE_KERNELS
    project = write_project(root / "waves" / "project", f'"{a}" = ">=1,<2"\n"{b}" = ">=1,<2"', name="bench",
                            trusted=("bench",))  # fmt: skip
    locker = Locker(ours, root / "waves", "waves", proxy.url, project)

    def prepare(latency: float):
        def before() -> None:
            locker.empty()
            proxy.latency = latency
        return before

    try:
        steps = [Step(locker.lock, prepare(WAVE_LATENCY), proxy), Step(locker.lock, prepare(0.0), proxy)]
        (slow, fast), served = interleaved(steps, runs, layer)
        prepare(WAVE_LATENCY)()
        proxy.reset_counts()
        locker.lock()
        timeline = proxy.answered(proxy.total_requests())
        deepest = waves(proxy)
    finally:
        proxy.latency = 0.0
    trips = (slow.seconds - fast.seconds) / WAVE_LATENCY
    ms = f"{WAVE_LATENCY * 1000:.0f} ms"
    goals.append(goal(f"round trips a lock of 3 kernels (one transitive) waits on: (lock at {ms} - at 0 ms) / {ms}",
                      trips, ROUND_TRIPS_GOAL, unit=""))  # fmt: skip
    rows = [(f"`kernels lock` of A, B (and C through A), empty cache, through the concurrent layer", slow.show(),
             fast.show(), f"{trips:.2f}", f"<= {ROUND_TRIPS_GOAL}: {met(trips <= ROUND_TRIPS_GOAL)}")]  # fmt: skip
    trace = wave_trace(timeline)
    trace.append(f"deepest chain of requests each sent after an earlier one ended (faultproxy.waves): {deepest}")
    return rows, layer_note(served), trace


def _short(path: str) -> str:
    return re.sub(r"\b([0-9a-f]{8})[0-9a-f]{32}\b", r"\1", path)


def wave_trace(timeline: list[tuple[float, float, str]]) -> list[str]:
    """``timeline`` (start, end, path) as lines: request number, wave, start and end in ms
    from the first start, the last request whose answer had arrived when it started, path."""
    if not timeline:
        return ["(no requests)"]
    timeline = sorted(timeline)
    origin = timeline[0][0]
    lines = [f"{len(timeline)} requests; wave: a new one starts with a request sent after the earliest-ending "
             "request of the wave before it ended; after: the last answer that had arrived when it was sent"]  # fmt: skip
    wave, earliest_end = 1, timeline[0][1]
    for n, (start, end, path) in enumerate(timeline, 1):
        if n > 1 and start > earliest_end:
            wave, earliest_end = wave + 1, end
        else:
            earliest_end = min(earliest_end, end)
        arrived = [(e, i) for i, (_, e, _) in enumerate(timeline[: n - 1], 1) if e <= start]
        after = f"after #{max(arrived)[1]:<3d}" if arrived else "first     "
        lines.append(f"#{n:<3d} wave {wave}  {(start - origin) * 1000:7.1f} .. {(end - origin) * 1000:7.1f} ms  "
                     f"{after} {_short(path)}")  # fmt: skip
    lines.insert(1, f"waves: {wave}")
    return lines

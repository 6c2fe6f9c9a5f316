"""A download's progress as ``kernels download``, ``sync`` and ``to-wheel`` show it.

The run's total is what the Hub's listings of the missing variants say they weigh, less
what an interrupted run left to resume. On a terminal, one bar on stderr that redraws (tqdm,
imported only then): bytes, percent, rate and time left. Off a terminal (a pipe, a CI log),
a download lasting more than a few seconds prints a plain line on stderr every few seconds,
stalled or not, and one per file fetched from then on, then one line for the run. A line
per variant on stdout, unless stdout is the report (``--json``). ``-q`` shows none of it, ``--json`` only the messages (a wait for
another download), on stderr.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator, Sequence

import click

from kernel_deps.cli.group import counted
from kernel_deps.fetch.tasks import Progress

if TYPE_CHECKING:
    from kernel_deps.fetch.tasks import VariantTask

INTERVAL = 3.0  # seconds between plain lines while a download runs
WINDOW = 10.0  # seconds of arrivals the rate is taken over


def download_progress(quiet: bool, *, as_json: bool = False, lines: bool = True) -> Progress:
    """Progress for a download: the bar on a terminal, plain lines elsewhere, a line per
    variant on stdout when ``lines`` (and not ``as_json``); messages alone with ``as_json``,
    nothing with ``quiet``."""
    if quiet:
        return Progress()
    if as_json:
        return Messages()
    return (Bar if sys.stderr.isatty() else Plain)(variant_lines=lines)


def human_bytes(count: float) -> str:
    """``count`` bytes in decimal units, as a download speaks of them: 512 B, 12.3 MB."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(count) < 1000:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"


def human_seconds(seconds: float) -> str:
    """A duration as a person reads it: 6s, 4m05s, 1h02m."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Meter:
    """A run's bytes: how many its listings announce, how many arrived, how fast. Thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.total = self.done = self.files = 0
        self.unlisted: set[int] = set()  # the variants neither listed nor done: the total is not known yet
        self.expected: dict[int, int] = {}
        self.began = time.monotonic()
        self.arrivals: deque[tuple[float, int]] = deque([(self.began, 0)])

    def start(self, tasks: Sequence[VariantTask]) -> None:
        with self.lock:
            self.unlisted = {id(task) for task in tasks}

    def expect(self, task: VariantTask, size: int) -> None:
        with self.lock:
            if not self.expected and not self.done:  # the first listing: the clock starts here
                self.began = time.monotonic()
                self.arrivals = deque([(self.began, 0)])
            self.unlisted.discard(id(task))
            self.expected[id(task)] = self.expected.get(id(task), 0) + size
            self.total += size

    def add(self, count: int) -> None:
        with self.lock:
            self.done += count
            now = time.monotonic()
            if len(self.arrivals) > 1 and now - self.arrivals[-1][0] < 0.1:  # a tenth of a second is one sample
                self.arrivals.pop()
            self.arrivals.append((now, self.done))
            while len(self.arrivals) > 2 and self.arrivals[1][0] < now - WINDOW:
                self.arrivals.popleft()

    def file_done(self) -> None:
        with self.lock:
            self.files += 1

    def variant_done(self, task: VariantTask, cached: bool, size: int) -> None:
        """The variant is present: what it took counts in the total in place of what its listing said."""
        with self.lock:
            self.unlisted.discard(id(task))
            if not cached:
                self.total += size - self.expected.pop(id(task), 0)

    def rate(self) -> float:
        """Bytes a second over the last few seconds (falling towards 0 while nothing arrives)."""
        with self.lock:
            since, then = self.arrivals[0]
            spent = time.monotonic() - since
            return max(0.0, (self.done - then) / spent) if spent > 0 else 0.0

    def status(self) -> str:
        """The run so far: "12.3 MB of 40.0 MB (30%), 5.1 MB/s, 6s left"."""
        rate = self.rate()
        with self.lock:
            done, total, known = self.done, self.total, not self.unlisted
        if not known:
            return f"{human_bytes(done)} of at least {human_bytes(total)}, {human_bytes(rate)}/s"
        percent = min(100, 100 * done // total) if total else 100
        left = f", {human_seconds((total - done) / rate)} left" if rate > 0 and total > done else ""
        return f"{human_bytes(done)} of {human_bytes(total)} ({percent}%), {human_bytes(rate)}/s{left}"

    def summary(self) -> str | None:
        """The run once done: "downloaded 40.0 MB (12 files) in 8s, 5.0 MB/s"; None when nothing was fetched."""
        with self.lock:
            done, files = self.done, self.files
        if not files:
            return None
        spent = time.monotonic() - self.began
        rate = human_bytes(done / max(spent, 1e-3))
        return f"downloaded {human_bytes(done)} ({counted(files, 'file')}) in {human_seconds(spent)}, {rate}/s"


class Messages(Progress):
    """Messages only, on stderr (``--json``: stdout is the report)."""

    def message(self, text: str) -> None:
        click.echo(text, err=True)


class Shown(Messages):
    """What a person watching a download sees: a line per variant on stdout, the meter on stderr."""

    def __init__(self, variant_lines: bool) -> None:
        self.variant_lines = variant_lines
        self.meter = Meter()

    def start(self, tasks: Sequence[VariantTask]) -> None:
        self.meter.start(tasks)

    def expect(self, task: VariantTask, files: int, size: int) -> None:
        self.meter.expect(task, size)

    def add_bytes(self, count: int) -> None:
        self.meter.add(count)

    def file_done(self, task: VariantTask, path: str, size: int) -> None:
        self.meter.file_done()

    def variant_done(self, task: VariantTask, *, cached: bool, files: int, size: int) -> None:
        self.meter.variant_done(task, cached, size)
        if self.variant_lines:
            fetched = f"downloaded {counted(files, 'file')} ({counted(size, 'byte')}), verified"
            state = "already in the cache, verified" if cached else fetched
            click.echo(f"{task.label}: {state}")

    def finished(self) -> None:
        line = self.meter.summary()
        if line:
            click.echo(f"kernels: {line}", err=True)


class Plain(Shown):
    """Off a terminal: a download that lasts past :data:`INTERVAL` says how far it is every
    :data:`INTERVAL` seconds, stalled or not, then at each file it fetches, and once at the
    end; a shorter one prints nothing here (its variant lines say what it did)."""

    def __init__(self, variant_lines: bool) -> None:
        super().__init__(variant_lines)
        self.said = time.monotonic()
        self.talking = False  # once the download has lasted past INTERVAL
        self.writing = threading.Lock()

    def say(self, text: str) -> None:
        with self.writing:
            self.said, self.talking = time.monotonic(), True
            click.echo(f"kernels: {text}", err=True)

    @contextmanager
    def fetching(self) -> Iterator[None]:
        stop = threading.Event()
        self.said = time.monotonic()

        def tick() -> None:
            while not stop.wait(max(0.5, self.said + INTERVAL - time.monotonic())):
                if time.monotonic() - self.said >= INTERVAL and self.meter.total:
                    self.say(self.meter.status())

        ticker = threading.Thread(target=tick, name="kernel-deps-progress", daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()
        if self.talking:
            self.finished()

    def file_done(self, task: VariantTask, path: str, size: int) -> None:
        super().file_done(task, path, size)
        if self.talking:
            self.say(f"{self.meter.status()}; {task.label} {path} ({human_bytes(size)})")


class Bar(Shown):
    """On a terminal: one bar for the run, redrawn as bytes arrive, its total the listings'."""

    bar = None

    @contextmanager
    def fetching(self) -> Iterator[None]:
        from tqdm import tqdm

        self.bar = tqdm(total=self.meter.total, unit="B", unit_scale=True, desc="kernels", leave=False)
        try:
            yield
        finally:
            with self.meter.lock:
                self.bar.close()
                self.bar = None
        self.finished()

    def expect(self, task: VariantTask, files: int, size: int) -> None:
        super().expect(task, files, size)
        with self.meter.lock:
            if self.bar is not None:
                self.bar.total = self.meter.total
                self.bar.refresh()

    def add_bytes(self, count: int) -> None:
        super().add_bytes(count)
        with self.meter.lock:
            if self.bar is not None:
                self.bar.update(count)

    def variant_done(self, task: VariantTask, **kwargs) -> None:
        with self.meter.lock:
            if self.bar is not None:
                self.bar.clear()
        super().variant_done(task, **kwargs)
        with self.meter.lock:
            if self.bar is not None:
                self.bar.total = self.meter.total
                self.bar.refresh()

    def message(self, text: str) -> None:
        with self.meter.lock:
            if self.bar is not None:
                self.bar.clear()
        super().message(text)

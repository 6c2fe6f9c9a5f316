"""What a download works on and reports: a variant of a locked kernel, its outcome, the report, the progress."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from kernel_deps.core.records import Record, replaceable
from kernel_deps.lock.model import LockedKernel

if TYPE_CHECKING:
    from kernel_deps.cache.subset import SubsetReport, WantedVariant  # --into only


class VariantTask(Record):
    """One variant of one locked kernel to make present and verified."""

    __slots__ = ("kernel", "variant")
    kernel: LockedKernel
    variant: str

    def __init__(self, kernel: LockedKernel, variant: str) -> None:
        self._init(kernel, variant)

    @property
    def label(self) -> str:
        return f"{self.kernel.repo_id} {self.variant}"


class VariantOutcome(Record):
    """One variant a run made present: whether it was cached already, and what it fetched."""

    __slots__ = ("task", "cached", "files", "size")
    task: VariantTask
    cached: bool
    files: int
    size: int

    def __init__(self, task: VariantTask, cached: bool, files: int, size: int) -> None:
        self._init(task, cached, files, size)


SCHEMA_VERSION = 3  # of docs/schemas/download.schema.json; see docs/ci.md


@replaceable  # to-wheel and sync build on one
class DownloadReport(Record):
    """What a download run did: every variant it made present, and what it fetched."""

    __slots__ = (
        "already_cached", "fetched", "files_fetched", "bytes_fetched", "cache_root", "outcomes", "lockfile", "into",
        "warnings",
    )  # fmt: skip
    already_cached: list[VariantTask]
    fetched: list[VariantTask]
    files_fetched: int
    bytes_fetched: int
    cache_root: Path | None
    outcomes: list[VariantOutcome]  # every variant, in lock order
    lockfile: Path | None  # the lock downloaded from (None: a Lockfile given in memory)
    into: SubsetReport | None  # --into: the variants placed in a folder of their own
    warnings: list[str]  # the lock used as it is though it no longer agrees with pyproject.toml

    def __init__(
        self, already_cached: list[VariantTask] | None = None, fetched: list[VariantTask] | None = None,
        files_fetched: int = 0, bytes_fetched: int = 0, cache_root: Path | None = None,
        outcomes: list[VariantOutcome] | None = None, lockfile: Path | None = None, into: SubsetReport | None = None,
        warnings: list[str] | None = None,
    ) -> None:  # fmt: skip
        self._init([] if already_cached is None else already_cached, [] if fetched is None else fetched,
                   files_fetched, bytes_fetched, cache_root, [] if outcomes is None else outcomes, lockfile, into,
                   [] if warnings is None else warnings)  # fmt: skip

    def of_project(self, lockfile: Path, into: SubsetReport | None, warnings: list[str]) -> DownloadReport:
        """This report, of the lock at ``lockfile``, with what ``--into`` placed and the warnings
        about the project (``dataclasses.replace`` without importing it on every download)."""
        return DownloadReport(self.already_cached, self.fetched, self.files_fetched, self.bytes_fetched,
                              self.cache_root, self.outcomes, lockfile, into, warnings)  # fmt: skip

    def wanted(self) -> list[WantedVariant]:
        """Every variant the run made present, as ``--into`` places them."""
        from kernel_deps.cache.subset import WantedVariant

        return [WantedVariant(o.task.kernel.repo_id, o.task.kernel.sha, o.task.variant,
                              o.task.kernel.variants[o.task.variant].hash) for o in self.outcomes]  # fmt: skip

    @property
    def ok(self) -> bool:
        """True when the lock agrees with pyproject.toml and an ``--into`` folder checks out."""
        return not self.warnings and (self.into is None or self.into.ok)

    def to_json(self) -> dict:
        """The report as docs/schemas/download.schema.json describes it."""
        into = {"into": self.into.to_json()} if self.into is not None else {}  # --into only
        return {
            "schema_version": SCHEMA_VERSION,
            "ok": self.ok,
            "lockfile": str(self.lockfile),
            "cache": str(self.cache_root),
            "downloaded": len(self.fetched),
            "already_cached": len(self.already_cached),
            "files": self.files_fetched,
            "bytes": self.bytes_fetched,
            "warnings": list(self.warnings),
            "variants": [
                {
                    "repo_id": o.task.kernel.repo_id,
                    "commit": o.task.kernel.sha,
                    "variant": o.task.variant,
                    "hash": o.task.kernel.variants[o.task.variant].hash,
                    "state": "cached" if o.cached else "downloaded",
                    "files": o.files,
                    "bytes": o.size,
                }
                for o in self.outcomes
            ],
        } | into


class Progress:
    """Receives download events; the default does nothing.

    The events of one run: :meth:`start`, then :meth:`variant_done` for each variant found
    in the cache; then, for each missing one, inside :meth:`fetching`, :meth:`expect` once its
    listing is known, :meth:`add_bytes` as bytes arrive, :meth:`file_done` per file and
    :meth:`variant_done`. A run's total is the sum of what :meth:`expect` was told, and it is
    complete once every variant of :meth:`start` was expected or done. Events come from the
    download's threads at once.
    """

    def start(self, tasks: Sequence[VariantTask]) -> None:
        """Called once with every variant the run will make present."""

    def fetching(self) -> AbstractContextManager[None]:
        """Held while missing variants are fetched; left normally when all of them are present."""
        return nullcontext()

    def expect(self, task: VariantTask, files: int, size: int) -> None:
        """Called when a missing variant's listing is known: the files and bytes still to fetch
        (called again, adding to them, when the variant is fetched once more)."""

    def add_bytes(self, count: int) -> None:
        """Called as bytes arrive (negative when a restarted file takes bytes back)."""

    def file_done(self, task: VariantTask, path: str, size: int) -> None:
        """Called when a fetched file (``path`` inside the variant, ``size`` bytes) is verified in the cache."""

    def variant_done(self, task: VariantTask, *, cached: bool, files: int, size: int) -> None:
        """Called when a variant is present and verified."""

    def message(self, text: str) -> None:
        """Called with a line the user should see while waiting (e.g. for another download)."""

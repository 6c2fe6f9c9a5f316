"""`kernels sync` as a library function: from a checkout to a verified set of kernels in one call.

It is ``kernels lock`` (only when the lock is out of date, pins kept), ``kernels download``
and ``kernels verify`` in that order, through the engines those verbs compose (the lock run
of :mod:`kernel_deps.resolve.locking`, :mod:`kernel_deps.fetch`, :mod:`kernel_deps.checks`)
with the project read once (again only under the edit lock, when it relocks), and
optionally the locked variants copied into a folder of their own (``into``) for an image
to ship:

- by default the lock is judged as ``lock --check`` judges it (no request when every pin
  holds) and relocked only when it is out of date;
- ``locked``: an out-of-date lock is a finding (exit 1), and nothing is written or fetched;
- ``frozen``: the lock is used as it is; pyproject.toml is never read for changes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from kernel_deps.cache import store as cache
from kernel_deps.cache.subset import PlacedMismatch, SubsetReport, check_folder, place_subset
from kernel_deps.checks.verification import SYNC_KINDS, VerifyReport, verify_inputs, verify_lock
from kernel_deps.core.errors import UsageError
from kernel_deps.core.records import Record
from kernel_deps.core.settings import LOCK_NAME
from kernel_deps.fetch.project import VariantChoice, download_for_project
from kernel_deps.fetch.tasks import DownloadReport, Progress
from kernel_deps.project.record import Project, no_project_error, read_project_record
from kernel_deps.resolve.locking import LockMode, LockReport, lock_while_editing, relock

if TYPE_CHECKING:
    from kernel_deps.lock.freshness import Problem
    from kernel_deps.hub.client import HubClient

SCHEMA_VERSION = 2  # of docs/schemas/sync.schema.json; see docs/ci.md


class SyncReport(Record):
    """What a sync run did: the lock step, the download, the verification, and the folder written."""

    __slots__ = ("lockfile", "lock_state", "lock", "download", "verify", "into", "into_verify")
    lockfile: Path
    # "up-to-date", "updated" (relocked), "created" (there was none), "frozen" (used as it is),
    # or "out-of-date" (--locked: nothing written, nothing fetched).
    lock_state: str
    lock: LockReport | None  # None with --frozen: the lock was not judged
    download: DownloadReport | None  # None when --locked found the lock out of date
    verify: VerifyReport | None
    into: SubsetReport | None  # --into: what was placed in the folder, and removed from it
    into_verify: VerifyReport | None  # --into: ``kernels verify`` of that folder

    def __init__(
        self, lockfile: Path, lock_state: str, lock: LockReport | None, download: DownloadReport | None,
        verify: VerifyReport | None, into: SubsetReport | None = None, into_verify: VerifyReport | None = None,
    ) -> None:  # fmt: skip
        self._init(lockfile, lock_state, lock, download, verify, into, into_verify)

    @property
    def ok(self) -> bool:
        """True when the lock is usable and every check agrees."""
        if self.download is None or self.verify is None:
            return False
        into_ok = self.into is None or (self.into.ok and self.into_verify is not None and self.into_verify.ok)
        return self.verify.ok and into_ok

    @property
    def problems(self) -> tuple[Problem | PlacedMismatch, ...]:
        """Each thing that disagrees: the cache's verification, the folder's, what was placed."""
        found = [p for report in (self.verify, self.into_verify) if report is not None for p in report.problems]
        return (*found, *(self.into.problems if self.into is not None else ()))

    def to_json(self) -> dict:
        """The report as docs/schemas/sync.schema.json describes it."""
        return {
            "schema_version": SCHEMA_VERSION,
            "ok": self.ok,
            "lockfile": str(self.lockfile),
            "lock_state": self.lock_state,
            "lock": self.lock.to_json() if self.lock is not None else None,
            "download": self.download.to_json() if self.download is not None else None,
            "verify": self.verify.to_json() if self.verify is not None else None,
            "into": self.into.to_json() if self.into is not None else None,
            "into_verify": self.into_verify.to_json() if self.into_verify is not None else None,
        }


def sync_project(
    project_dir: Path,
    *,
    locked: bool = False,
    frozen: bool = False,
    targets: Sequence[str] = (),
    all_targets: bool = False,
    into: Path | None = None,
    hub: HubClient | None = None,
    progress: Progress | None = None,
    notice: Callable[[str], None] | None = None,
    on_locked: Callable[[LockReport], None] | None = None,
) -> SyncReport:
    """Lock (when out of date), download this machine's variants (or those serving ``targets``),
    verify; with ``into``, place exactly the locked variants there and verify that folder too.
    ``on_locked`` is given the relock's report as soon as it is written, before the download."""
    if locked and frozen:
        raise UsageError("--locked and --frozen exclude each other: --locked checks the lock, --frozen trusts it")
    if into is not None:
        check_folder(Path(into), cache.cache_root(), project=Path(project_dir))
    project_dir = Path(project_dir)
    path = project_dir / LOCK_NAME
    lock_report: LockReport | None = None
    # pyproject.toml read once; with --frozen the lock is used without it (a lock copied alone).
    project = read_project_record(project_dir, missing_ok=frozen)
    if frozen:
        state = "frozen"
        _refuse_newer_lock(path)  # verify would refuse it: before anything is downloaded
    else:
        assert project is not None
        # lock --check's judgement: no request while every pin holds. Without --locked a lock
        # that does not hold is relocked, so it is judged offline first and resolved once.
        lock_report = lock_while_editing(project, hub=hub, mode=LockMode.CHECK if locked else LockMode.JUDGE)
        if lock_report.up_to_date:
            state = "up-to-date"
        elif locked:
            return SyncReport(path, "out-of-date", lock_report, None, None)
        else:
            state = "updated" if lock_report.existed else "created"
            if hub is None:  # one session for the relock and the download: what it learnt is kept
                from kernel_deps.hub.client import HubClient

                hub = HubClient()
            # Read again under the project's edit lock: what the relock resolved is what follows.
            lock_report, project = relock(project_dir, hub=hub, notice=notice)
            if on_locked is not None:
                on_locked(lock_report)
    download = download_for_project(project_dir if project is None else project,
                                    VariantChoice(targets=targets, all_targets=all_targets), hub=hub,
                                    progress=progress)  # fmt: skip
    if project is None:
        raise no_project_error(project_dir)
    overrides = verify_inputs(online=False)
    verified = _verify(project, overrides, frozen=frozen, targets=targets, all_targets=all_targets)
    if into is None or not verified.ok:
        return SyncReport(path, state, lock_report, download, verified)
    placed = place_subset(download.wanted(), Path(into), root=download.cache_root, project=project_dir)
    # The folder as the cache it will be: pyproject, lock and the placed variants agree.
    again = _verify(project, overrides, frozen=frozen, targets=targets, all_targets=all_targets,
                    cache_root=Path(into), shared=False)  # fmt: skip
    return SyncReport(path, state, lock_report, download, verified, placed, again)


def _refuse_newer_lock(path: Path) -> None:
    """The refusal verify gives a lock a newer kernel-deps wrote, before a --frozen sync downloads."""
    from kernel_deps.lock.read import newer_lock_error, read_lock

    if path.is_file() and (found := read_lock(path, purpose="fetch")).unknown_keys:
        raise newer_lock_error(str(path), found.unknown_keys)


def _verify(
    project: Project, overrides: Mapping[str, Path], *, frozen: bool, targets: Sequence[str], all_targets: bool,
    cache_root: Path | None = None, shared: bool = True,
) -> VerifyReport:  # fmt: skip
    """``kernels verify`` of what was downloaded (this machine's variants unless targets are named);
    with ``frozen``, pyproject.toml's requirements are not held against the lock."""
    report = verify_lock(project, overrides=overrides, require_cached=not (targets or all_targets), targets=targets,
                         all_targets=all_targets, cache_root=cache_root, shared=shared)  # fmt: skip
    if not frozen:
        return report
    return replace(report, problems=[p for p in report.problems if p.kind not in SYNC_KINDS])

"""`kernels sync` as a library function: from a checkout to a verified set of kernels in one call.

It is ``kernels lock`` (only when the lock is out of date, pins kept), ``kernels download``
and ``kernels verify`` in that order, through their own functions, and optionally the
locked variants copied into a folder of their own (``into``) for an image to ship:

- by default the lock is judged as ``lock --check`` judges it (no request when every pin
  holds) and relocked only when it is out of date;
- ``locked``: an out-of-date lock is a finding (exit 1), and nothing is written or fetched;
- ``frozen``: the lock is used as it is; pyproject.toml is never read for changes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from kernel_deps.cache import store as cache
from kernel_deps.commands.download import DownloadReport, Progress, download_project
from kernel_deps.commands.lock import LockReport, lock_project
from kernel_deps.commands.verify import SYNC_KINDS, VerifyReport, verify_project
from kernel_deps.cache.subset import SubsetReport, check_folder, place_subset
from kernel_deps.core.errors import UsageError
from kernel_deps.core.settings import LOCK_NAME

if TYPE_CHECKING:
    from kernel_deps.hub.client import HubClient

SCHEMA_VERSION = 1  # of docs/schemas/sync.schema.json; see docs/ci.md


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What a sync run did: the lock step, the download, the verification, and the folder written."""

    lockfile: Path
    # "up-to-date", "updated" (relocked), "created" (there was none), "frozen" (used as it is),
    # or "out-of-date" (--locked: nothing written, nothing fetched).
    lock_state: str
    lock: LockReport | None  # None with --frozen: the lock was not judged
    download: DownloadReport | None  # None when --locked found the lock out of date
    verify: VerifyReport | None
    into: SubsetReport | None = None  # --into: what was placed in the folder, and removed from it
    into_verify: VerifyReport | None = None  # --into: ``kernels verify`` of that folder

    @property
    def ok(self) -> bool:
        """True when the lock is usable and every check agrees."""
        if self.download is None or self.verify is None:
            return False
        into_ok = self.into is None or (self.into.ok and self.into_verify is not None and self.into_verify.ok)
        return self.verify.ok and into_ok

    @property
    def messages(self) -> list[str]:
        """One line per thing that disagrees: the cache's verification, the folder's, what was placed."""
        found = [p.message for report in (self.verify, self.into_verify) if report is not None for p in report.problems]
        return found + (self.into.problems if self.into is not None else [])

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
) -> SyncReport:
    """Lock (when out of date), download this machine's variants (or those serving ``targets``),
    verify; with ``into``, place exactly the locked variants there and verify that folder too."""
    if locked and frozen:
        raise UsageError("--locked and --frozen exclude each other: --locked checks the lock, --frozen trusts it")
    if into is not None:
        check_folder(Path(into), cache.cache_root(), project=Path(project_dir))
    project_dir = Path(project_dir)
    path = project_dir / LOCK_NAME
    lock_report: LockReport | None = None
    if frozen:
        state = "frozen"
    else:
        # lock --check's judgement: no request while every pin holds. Without --locked a lock
        # that does not hold is relocked, so it is judged offline first and resolved once.
        lock_report = lock_project(project_dir, hub=hub, write=False, explain_offline=locked,
                                   resolve_stale=locked)
        if lock_report.up_to_date:
            state = "up-to-date"
        elif locked:
            return SyncReport(path, "out-of-date", lock_report, None, None)
        else:
            state = "updated" if lock_report.existed else "created"
            if hub is None:  # one session for the relock and the download: what it learnt is kept
                from kernel_deps.hub.client import HubClient

                hub = HubClient()
            lock_report = lock_project(project_dir, hub=hub, notice=notice)
    download = download_project(project_dir, targets=targets, all_targets=all_targets, hub=hub, progress=progress)
    verified = _verify(project_dir, frozen=frozen, targets=targets, all_targets=all_targets)
    report = SyncReport(path, state, lock_report, download, verified)
    if into is None or not verified.ok:
        return report
    placed = place_subset(download.wanted(), Path(into), root=download.cache_root, project=Path(project_dir))
    # The folder as the cache it will be: pyproject, lock and the placed variants agree.
    again = _verify(project_dir, frozen=frozen, targets=targets, all_targets=all_targets, cache_root=Path(into))
    return replace(report, into=placed, into_verify=again)


def _verify(
    project_dir: Path, *, frozen: bool, targets: Sequence[str], all_targets: bool, cache_root: Path | None = None
) -> VerifyReport:
    """``kernels verify`` of what was downloaded (this machine's variants unless targets are named);
    with ``frozen``, pyproject.toml's requirements are not held against the lock."""
    report = verify_project(project_dir, require_cached=not (targets or all_targets), targets=targets,
                            all_targets=all_targets, cache_root=cache_root)  # fmt: skip
    if not frozen:
        return report
    return replace(report, problems=[p for p in report.problems if p.kind not in SYNC_KINDS])

"""A lock run of one project: its record and prior lock, resolved only when needed, and what changed.

``kernels lock`` (and ``--check``, ``--dry-run``), ``kernels sync``'s judgement and relock, and
``kernels add`` / ``kernels remove``'s relock are one run (:func:`lock_while_editing`) in a
:class:`LockMode`; :func:`relock` is the run that writes, holding the project's edit lock from
before it reads the files until the lock is written (:func:`kernel_deps.project.edit.editing`).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from kernel_deps.core.boundedread import file_state
from kernel_deps.core.records import Record, replaceable
from kernel_deps.core.settings import PYPROJECT_NAME, is_offline
from kernel_deps.core.spec import KernelRequirement
from kernel_deps.core.targets import Target
from kernel_deps.lock.diff import LockChange, diff_locks
from kernel_deps.lock.freshness import Problem, check_signatures, check_sync, check_targets, check_trust
from kernel_deps.lock.model import Lockfile, lock_path, write_lockfile
from kernel_deps.lock.read import read_lock
from kernel_deps.trust.publishers import judge_publishers, refusal
from kernel_deps.project.edit import editing
from kernel_deps.project.record import Project, read_project_record
from kernel_deps.resolve.notes import LockNote
from kernel_deps.resolve.resolver import reject_unknown_upgrades
from kernel_deps.resolve.session import hub_trusts, resolve_in_memory

if TYPE_CHECKING:  # imported when locking: verify and outdated read locks without the Hub client
    from kernel_deps.hub.client import HubClient
    from kernel_deps.hub.index import KernelIndex


SCHEMA_VERSION = 4  # of docs/schemas/lock.schema.json; see docs/ci.md


class LockMode(Enum):
    """What a lock run may do: write the lock, or write nothing and how far to look."""

    WRITE = "write"  # resolve when out of date and write kernels.lock (`kernels lock`)
    # Write nothing; while HF_HUB_OFFLINE is set, a prior lock that breaks a rule it can be
    # judged by alone is out of date with its problems and no changes, not an OfflineError
    # (`lock --check`, `lock --dry-run`, `sync --locked`).
    CHECK = "check"
    RESOLVE = "resolve"  # write nothing; resolve what would change (an edit writes both files itself)
    # Write nothing and never ask the Hub: a prior lock that does not hold is out of date, with
    # no changes or new lock worked out (`kernels sync` relocks it then, resolving once).
    JUDGE = "judge"


@replaceable  # add and remove copy one with dataclasses.replace (written)
class LockReport(Record):
    """What a lock run found: the new lock, the old one, and what changed."""

    __slots__ = (
        "path", "lock", "previous", "changes", "up_to_date", "written", "notes", "uncovered", "targets",
        "converted_from", "problems", "existed",
    )  # fmt: skip
    path: Path
    lock: Lockfile
    previous: Lockfile | None
    changes: list[LockChange]
    up_to_date: bool
    written: bool
    # Why a kernel was held back for a deployment target, build folders skipped, redirects followed.
    notes: list[LockNote]
    # Declared targets the prior lock does not serve (the targets changed since it was made).
    uncovered: list[Problem]
    targets: tuple[Target, ...]
    # The other tool whose lock this run replaced with ours, keeping its pins (None: ours or none).
    converted_from: str | None
    # Why the prior lock is out of date, as ``lock --check`` and ``verify`` judge it without the Hub
    # (sync.check_sync): a requirement it does not meet, a dependency pin its parent does not accept.
    problems: list[Problem]
    # Whether there was a kernels.lock before the run (in any format).
    existed: bool

    def __init__(
        self, path: Path, lock: Lockfile, previous: Lockfile | None, changes: list[LockChange], up_to_date: bool,
        written: bool, notes: list[LockNote] | None = None, uncovered: list[Problem] | None = None,
        targets: tuple[Target, ...] = (), converted_from: str | None = None, problems: list[Problem] | None = None,
        existed: bool = True,
    ) -> None:  # fmt: skip
        self._init(path, lock, previous, changes, up_to_date, written, [] if notes is None else notes,
                   [] if uncovered is None else uncovered, targets, converted_from,
                   [] if problems is None else problems, existed)  # fmt: skip

    @property
    def ok(self) -> bool:
        """True when kernels.lock, after this run, says what pyproject.toml asks (it did, or was written)."""
        return self.up_to_date or self.written

    def to_json(self) -> dict:
        """The report as docs/schemas/lock.schema.json describes it."""
        return {
            "schema_version": SCHEMA_VERSION,
            "ok": self.ok,
            "lockfile": str(self.path),
            "up_to_date": self.up_to_date,
            "written": self.written,
            "changes": [change.to_json() for change in self.changes],
            "notes": [note.to_json() for note in self.notes],
            "targets": [t.name for t in self.targets],
            "uncovered_targets": [{"repo_id": p.repo_id, "target": p.expected} for p in self.uncovered],
            "converted_from": self.converted_from,
            "problems": [{"kind": p.kind, "repo_id": p.repo_id, "message": p.message} for p in self.problems],
            "kernels": [
                {"repo_id": k.repo_id, "version": k.version, "sha": k.sha, "variants": len(k.variants)}
                for k in self.lock.kernels
            ],
        }


def relock(
    project_dir: Path,
    *,
    hub: HubClient | None = None,
    requirements: Sequence[KernelRequirement] | None = None,
    targets: Sequence[Target] | None = None,
    upgrade: bool = False,
    upgrade_packages: Iterable[str] = (),
    notice: Callable[[str], None] | None = None,
) -> tuple[LockReport, Project]:
    """Resolve the project's kernels and write kernels.lock when it changes, under the
    project's edit lock (finishing a pending edit first) until the lock is written; ``notice``
    is told when it waits for another command. pyproject.toml is read once, before the Hub
    client's import, so that a project asking for signatures starts its verifier process
    then (:mod:`kernel_deps.trust.worker`); under the edit lock that reading stands only if
    the file is still the one read (the same file, size and times), else it is read again there.
    Returns the report and the project as it was read (what a caller that goes on, as
    ``kernels sync`` does, uses instead of reading it again)."""
    from kernel_deps.trust import worker

    with worker.enabled():
        early = _read_early(Path(project_dir))
        from kernel_deps.hub.client import HubClient

        hub = hub or HubClient()
        with hub.operation(), editing(Path(project_dir), hub=hub, notice=notice):
            same = early is not None and file_state(Path(project_dir) / PYPROJECT_NAME) == early[1]
            project = early[0] if same else None
            project = project or read_project_record(Path(project_dir))
            assert project is not None
            report = lock_while_editing(project, hub=hub, mode=LockMode.WRITE, requirements=requirements,
                                        targets=targets, upgrade=upgrade, upgrade_packages=upgrade_packages)  # fmt: skip
    return report, project


def _read_early(project_dir: Path) -> tuple[Project, tuple] | None:
    """The project read before the edit lock is taken, with the state of its pyproject.toml
    before and after that read (None when they differ, or on any problem: the read under the
    lock reports it); the verifier process started when its policy asks for signatures."""
    from kernel_deps.core.errors import KernelDepsError
    from kernel_deps.trust import worker

    try:
        before = file_state(project_dir / PYPROJECT_NAME)
        project = read_project_record(project_dir)
        policy = project.policy if project is not None else None
    except (KernelDepsError, OSError, ValueError):
        return None
    if policy is not None and (policy.require or policy.identities or policy.kernel_identities):
        worker.start(policy.trusted_root)
    unchanged = before is not None and file_state(project_dir / PYPROJECT_NAME) == before
    return (project, before) if project is not None and unchanged else None


def lock_while_editing(
    project: Project,
    *,
    hub: HubClient | None,
    mode: LockMode,
    requirements: Sequence[KernelRequirement] | None = None,
    targets: Sequence[Target] | None = None,
    upgrade: bool = False,
    upgrade_packages: Iterable[str] = (),
) -> LockReport:
    """A lock run of ``project`` (its record: pyproject.toml read once) in ``mode``; the caller
    holds the project's edit lock for :attr:`LockMode.WRITE` (:func:`relock` does, and
    ``kernels add`` and ``kernels remove`` around an edit and this). ``requirements`` and
    ``targets`` default to the project's; with targets, every locked kernel has a build for
    each of them, or nothing is written."""
    write = mode is LockMode.WRITE
    if requirements is None:
        requirements, declared = project.requirements, project.targets
        targets = declared if targets is None else targets
    elif targets is None:
        targets = project.targets
    targets = tuple(targets)
    publishers = project.publishers
    policy = project.policy
    path = lock_path(project.folder)
    prior = read_lock(path, purpose="lock")  # any tool's lock: its commits are kept, its layout replaced
    previous, raw, foreign = (prior.lock, prior.raw, prior.written_by) if prior else (None, None, None)
    pins = dict(prior.pins) if prior else {}
    uncovered = check_targets(targets, previous) if previous is not None else []
    upgrade_packages = list(upgrade_packages)
    reject_unknown_upgrades(upgrade_packages, {r.repo_id for r in requirements} | set(pins))
    if upgrade:
        pins = {}
    for repo_id in upgrade_packages:
        pins.pop(repo_id, None)

    # Allowances the prior lock relied on that pyproject.toml no longer lists (judged offline).
    withdrawn = check_trust(publishers, previous) if previous is not None and foreign is None else []
    # Signers the prior lock records that the signature policy no longer allows (judged offline).
    withdrawn += check_signatures(policy, previous) if previous is not None and foreign is None else []
    if (not write and not upgrade and not upgrade_packages and not uncovered and not withdrawn
            and _holds(previous, raw, requirements)):  # fmt: skip
        # Every requirement is met by its pin and every target served by it, so resolving
        # would keep every pin, and a pinned commit's variants and dependencies cannot
        # change: no Hub needed.
        return LockReport(path, previous, previous, [], True, False, targets=targets)
    # What the prior lock breaks, judged by what it records (a foreign lock records no requirements).
    problems = check_sync(requirements, previous) if previous is not None and foreign is None else []
    problems += withdrawn
    if mode is LockMode.JUDGE:  # judged without the Hub: out of date, what would change not worked out
        return LockReport(path, previous or Lockfile(kernels=()), previous, [], False, False, uncovered=uncovered,
                          targets=targets, converted_from=foreign, problems=problems, existed=raw is not None)  # fmt: skip
    if mode is LockMode.CHECK and (problems or uncovered) and is_offline():
        # Out of date whatever the Hub would answer; what would change is not known without it.
        return LockReport(path, previous, previous, [], False, False, uncovered=uncovered, targets=targets,
                          converted_from=foreign, problems=problems)  # fmt: skip
    from kernel_deps.hub.client import HubClient

    def judge(lock: Lockfile, index: KernelIndex) -> Lockfile:
        judged, untrusted = judge_publishers(lock, publishers, lambda org: hub_trusts(index, org))
        if untrusted:
            raise refusal(untrusted)
        return judged

    signed_before = previous is not None and any(k.signatures for k in previous.kernels)
    lock, notes = resolve_in_memory(hub or HubClient(), requirements, publishers=publishers, judge=judge,
                                    policy=policy, pins=pins, targets=targets, follow_redirects=True,
                                    expect_signed=signed_before)  # fmt: skip
    new_bytes = lock.to_text().encode()
    up_to_date = raw == new_bytes
    changes = diff_locks(previous, lock)
    if not up_to_date and not changes:
        changes = [LockChange("layout-changed", None, None, None)]
    written = write and not up_to_date and write_lockfile(path, lock)
    return LockReport(
        path, lock, previous, changes, up_to_date, written,
        notes=notes, uncovered=uncovered, targets=targets, converted_from=foreign, problems=problems,
        existed=raw is not None,
    )


def _holds(previous: Lockfile | None, raw: bytes | None, requirements: Sequence[KernelRequirement]) -> bool:
    """Whether the prior lock is exactly what resolving with its pins would write."""
    return previous is not None and raw == previous.to_text().encode() and not check_sync(requirements, previous)

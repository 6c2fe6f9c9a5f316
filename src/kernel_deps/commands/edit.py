"""`kernels add` and `kernels remove` as library functions: edit pyproject.toml and relock, as one change.

An edit runs under the project's edit lock (:func:`kernel_deps.project.edit.editing`), so
it sees what the last command wrote; its new requirements are resolved before anything is
written, and then pyproject.toml and kernels.lock are replaced together
(:func:`kernel_deps.core.atomicfile.write_together`). ``add`` without a range takes the newest
version that serves every declared target, looked up under the same time budget as the
relock.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from kernel_deps.core import atomicfile
from kernel_deps.core.errors import PyprojectError, ResolutionError
from kernel_deps.core.records import Record
from kernel_deps.core.settings import EDIT_JOURNAL_NAME, PYPROJECT_NAME
from kernel_deps.core.spec import parse_add_argument
from kernel_deps.project.edit import editing
from kernel_deps.project.pyproject import read_pyproject_text
from kernel_deps.project.toml_edit import add_requirement, has_requirement, remove_requirement
from kernel_deps.project.record import project_from_source
from kernel_deps.resolve.locking import LockMode, LockReport, lock_while_editing

if TYPE_CHECKING:
    from kernel_deps.hub.client import HubClient


class EditReport(Record):
    """What `kernels add` or `kernels remove` did: the entry changed, and the relock."""

    __slots__ = ("action", "repo_id", "requirement", "lock", "status")
    action: str  # "add" or "remove"
    repo_id: str
    # add: the value written to [tool.kernels.dependencies] (a range, a major, or a table
    # such as {revision = ...}); remove: None.
    requirement: str | int | dict | None
    lock: LockReport
    status: str | None  # add: "added", "updated" (the entry was there, another value) or "unchanged"; remove: None

    def __init__(self, action: str, repo_id: str, requirement: str | int | dict | None, lock: LockReport,
                 status: str | None = None) -> None:  # fmt: skip
        self._init(action, repo_id, requirement, lock, status)

    def to_json(self) -> dict:
        """The relock's report, as docs/schemas/lock.schema.json describes it."""
        return self.lock.to_json()


def add_kernel(
    project_dir: Path,
    requirement: str,
    *,
    hub: HubClient | None = None,
    notice: Callable[[str], None] | None = None,
) -> EditReport:
    """Add ``requirement`` (``ORG/NAME``, ``ORG/NAME>=1.2,<2``, ``ORG/NAME@REVISION``) to
    [tool.kernels.dependencies] of ``project_dir`` and relock; without a range, the newest
    release's major series is written (from the newest version serving every declared target).
    UsageError for a bad argument; nothing is written when the relock fails."""
    from kernel_deps.hub.client import HubClient
    from kernel_deps.resolve.newest import requirement_for_newest

    project_dir = Path(project_dir)
    repo_id, asked = parse_add_argument(requirement)
    source = str(project_dir / PYPROJECT_NAME)
    chosen: list = []
    hub = hub or HubClient()

    def edit(text: str) -> str:  # under the project's edit lock: the newest fit for the targets of this text
        value = asked
        if value is None:
            targets = project_from_source(text, project_dir).targets
            value = requirement_for_newest(repo_id, hub=hub, targets=targets)
        edited = add_requirement(text, repo_id, value, source=source)
        existed = edited == text or has_requirement(text, repo_id, source=source)
        chosen.append((value, "unchanged" if edited == text else "updated" if existed else "added"))
        return edited

    try:
        with hub.operation():  # one time budget for the look-up and the relock
            outcome = edit_and_relock(project_dir, edit, hub=hub, notice=notice)
    except ResolutionError as exc:
        raise _asked_on_the_command_line(exc, repo_id, requirement) from None
    value, status = chosen[-1]
    return EditReport("add", repo_id, value, outcome, status)


COMMAND_LINE = "command line"  # the requester of a conflict over what `kernels add` was given


def _asked_on_the_command_line(exc: ResolutionError, repo_id: str, argument: str) -> ResolutionError:
    """A conflict over the requirement ``kernels add`` was given, told as that: its cause is
    the command line, and the hint says to relax the argument (nothing was written), not a
    range of [tool.kernels.dependencies]; any other error as it is."""
    asked = [c for c in exc.causes if c.required_by is None]
    if not any(c.repo_id == repo_id for c in asked):
        return exc
    unchanged = "pyproject.toml and kernels.lock were not changed"
    if all(c.repo_id == repo_id for c in asked):
        hint = f"relax the range given to kernels add ('{argument}'); {unchanged}"
        return ResolutionError.conflict(exc.causes, exc.offered, requester=COMMAND_LINE, hint=hint)
    hint = (f"relax the range given to kernels add ('{argument}') or one of the others in "
            f"[tool.kernels.dependencies]; {unchanged}")  # fmt: skip
    return ResolutionError.conflict(exc.causes, exc.offered, requester=exc.requester, hint=hint)


def remove_kernel(
    project_dir: Path,
    repo_id: str,
    *,
    hub: HubClient | None = None,
    notice: Callable[[str], None] | None = None,
) -> EditReport:
    """Remove ``repo_id`` from [tool.kernels.dependencies] of ``project_dir`` and relock."""
    project_dir = Path(project_dir)
    source = str(project_dir / PYPROJECT_NAME)

    def edit(text: str) -> str:
        try:
            return remove_requirement(text, repo_id, source=source)
        except PyprojectError:
            parents = _pulled_in_by(project_dir, repo_id)
            if not parents:
                raise
            raise PyprojectError(
                f"{source}: {repo_id} is not in [tool.kernels.dependencies]: kernels.lock has it because "
                f"{', '.join(parents)} {'depends' if len(parents) == 1 else 'depend'} on it; remove "
                f"{'that kernel' if len(parents) == 1 else 'those kernels'} and it goes too"
            ) from None

    outcome = edit_and_relock(project_dir, edit, hub=hub, notice=notice)
    return EditReport("remove", repo_id, None, outcome)


def _pulled_in_by(project_dir: Path, repo_id: str) -> list[str]:
    """The locked kernels that depend on ``repo_id``, as the project's lock records them (none: [])."""
    from kernel_deps.lock.model import lock_path
    from kernel_deps.lock.read import read_lock

    found = read_lock(lock_path(project_dir), purpose="lock")
    lock = found.lock if found is not None else None
    return sorted(k.repo_id for k in lock.kernels if repo_id in k.dependencies) if lock is not None else []


def edit_and_relock(
    project_dir: Path,
    edit: Callable[[str], str],
    *,
    hub: HubClient | None = None,
    notice: Callable[[str], None] | None = None,
) -> LockReport:
    """Apply ``edit`` to pyproject.toml and relock, as one change.

    The project's edit lock is held throughout, so ``edit`` sees what the last command
    wrote and no other command writes before this one is done (``notice`` is told when it
    waits). The new requirements are resolved before anything is written; then
    pyproject.toml and kernels.lock are replaced together
    (:func:`atomicfile.write_together`), so a failure or a kill at any moment leaves both
    old or both new, never an edited pyproject.toml beside an old lock. Links are written
    through, at their target.
    """
    from kernel_deps.hub.client import HubClient
    from kernel_deps.trust import worker

    project_dir = Path(project_dir)
    pyproject = project_dir / PYPROJECT_NAME
    hub = hub or HubClient()
    # Signatures verified in a second process, as `kernels lock` does (trust/worker.py).
    with worker.enabled(), hub.operation(), editing(project_dir, hub=hub, notice=notice):
        original = read_pyproject_text(project_dir)
        updated = edit(original)
        if updated == original:
            return lock_while_editing(project_from_source(original, project_dir), hub=hub, mode=LockMode.WRITE)
        # The edited text, parsed once: its requirements, targets and policy are what the relock judges.
        edited = project_from_source(updated, project_dir)
        outcome = lock_while_editing(edited, hub=hub, mode=LockMode.RESOLVE)
        files = {pyproject: updated}
        if not outcome.up_to_date:
            files[outcome.path] = outcome.lock.to_text()
        atomicfile.write_together(files, journal=project_dir / EDIT_JOURNAL_NAME)
    return replace(outcome, written=not outcome.up_to_date)

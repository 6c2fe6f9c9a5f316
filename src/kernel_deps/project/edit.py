"""Editing a project's pyproject.toml and kernels.lock: one command at a time, journals checked.

A project's two files change only under :func:`editing`, which every command that writes
them runs inside (``kernels lock``, ``kernels add``, ``kernels remove``). It holds the
project's edit lock, ``.kernels-edit.lock`` beside the files (the file lock of the cache,
:class:`kernel_deps.core.filelocks.HostLock`, which works where ``flock`` does not, so
a second command waits for the first and then reads what the first wrote, instead of both
editing the same old texts and one losing), and finishes first an edit a kill interrupted
(:func:`kernel_deps.core.atomicfile.finish_pending`, which applies only a journal proving to be
such an edit of these very files). The lock file exists only while a command holds it:
the holder removes it before letting go, and a command that then gets the lock on a file
no longer there locks the file there now instead, so no two ever hold it.

Commands that only read the project never apply a journal: they call
:func:`refuse_pending_edit` where they read either file, which reports one as a problem
(:class:`PendingEditError`, exit 1), naming it and what to run.

This module imports the standard library and ``kernel_deps.core`` only, so the loader may use it.
"""

from __future__ import annotations

import os
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from kernel_deps.core import atomicfile
from kernel_deps.core.errors import FileWriteError, PendingEditError, ProjectBusyError, PyprojectError, UsageError
from kernel_deps.core.settings import (
    BUDGET_ENV,
    EDIT_JOURNAL_NAME,
    EDIT_LOCK_NAME,
    LOCK_NAME,
    PYPROJECT_NAME,
)

if TYPE_CHECKING:
    from kernel_deps.core.filelocks import HostLock
    from kernel_deps.hub.client import HubClient

__all__ = ["PROJECT_FILES", "editing", "refuse_pending_edit"]

# The only files an edit journal may name: those of the project it lies in.
PROJECT_FILES = (PYPROJECT_NAME, LOCK_NAME)


def refuse_pending_edit(path: Path) -> None:
    """PendingEditError when an edit journal lies beside ``path``, pyproject.toml or
    kernels.lock, which that edit would change; nothing to check for another file name.

    For commands that only read: they neither apply the journal (it may have come with a
    checkout) nor read the files as if the edit were done or undone.
    """
    path = Path(path)
    if path.name not in PROJECT_FILES:
        return
    journal = path.with_name(EDIT_JOURNAL_NAME)
    if os.path.lexists(journal):
        raise PendingEditError(
            f"an edit of {PYPROJECT_NAME} and {LOCK_NAME} is pending (an interrupted 'kernels "
            "add' or 'kernels remove' leaves one) and this command only reads, so it applies "
            "nothing",
            subject=journal,
            hint=(
                f"run 'kernels lock {path.parent}' to finish that edit, or delete the file if no "
                "kernels command was interrupted there"
            ),
        )


@contextmanager
def editing(project_dir: Path, *, hub: HubClient, notice: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the edit lock of ``project_dir``, with an interrupted edit finished; read the files inside.

    Waits for another command at most the time left in ``hub``'s operation (ProjectBusyError
    after it); a wait longer than a moment, and an interrupted edit finished, are told to
    ``notice``. EditJournalError for a journal that is not an interrupted edit. The lock
    file exists only while a command holds it.
    """
    project_dir = Path(project_dir)
    if not os.path.lexists(project_dir / PYPROJECT_NAME):  # not a project: leave nothing in the folder
        raise PyprojectError(f"no {PYPROJECT_NAME} in {project_dir}")
    lock_file = project_dir / EDIT_LOCK_NAME
    if os.path.islink(lock_file):  # never open a file a link planted there points at
        raise UsageError(
            "a symbolic link; kernel-deps locks a project with a plain file there: delete it",
            subject=lock_file,
        )
    try:
        lock = _acquire(lock_file, project_dir, hub, notice)
    except OSError as exc:
        raise FileWriteError(
            f"cannot create or lock ({exc.strerror or exc})",
            subject=lock_file,
            hint="check the folder's permissions",
        ) from None
    try:
        journal = project_dir / EDIT_JOURNAL_NAME
        if atomicfile.finish_pending(journal, names=PROJECT_FILES) and notice is not None:
            notice(f"finished an interrupted edit of {PYPROJECT_NAME} and {LOCK_NAME} recorded in {journal}")
        yield
    finally:
        # Removed while still held: a command waiting on this file then finds it gone and
        # locks the next one, so no edit leaves a file behind and no two hold the lock.
        with suppress(OSError):
            lock_file.unlink()
        lock.release()


def _acquire(lock_file: Path, project_dir: Path, hub: HubClient, notice: Callable[[str], None] | None) -> HostLock:
    """The edit lock, held on the file now at ``lock_file``; ProjectBusyError when the budget runs out."""
    # Imported by the commands that edit, not by those that only read (refuse_pending_edit).
    from kernel_deps.core.filelocks import HostLock, acquire_within, stale_after

    transport = hub.transport
    told = False

    def tell() -> None:
        nonlocal told
        if notice is not None and not told:
            notice(f"waiting for another kernels command editing {project_dir} (lock {lock_file}) ...")
        told = True

    while True:
        lock = HostLock(lock_file, stale_after=stale_after(transport.budget), on_note=notice)
        if not acquire_within(lock, transport.time_left, tell):
            holder = lock.holder()
            raise ProjectBusyError(
                f"another kernels command{f' ({holder})' if holder else ''} held {lock_file} until the "
                f"{transport.budget:g} s budget was spent",
                subject=project_dir,
                hint=(
                    f"run again once it is done (raise {BUDGET_ENV} to wait longer), or delete that "
                    "file if none is running"
                ),
            )
        if lock.holds_file_there():
            return lock
        lock.release()  # the command before removed that file as it finished: lock the one there now

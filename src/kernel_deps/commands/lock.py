"""`kernels lock` as a library function: pyproject + prior lock + Hub -> kernels.lock, and what changed.

The verb composes the lock run (:mod:`kernel_deps.resolve.locking`): the project read once
(:mod:`kernel_deps.project.record`), then judged, resolved and written as its mode says.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from kernel_deps.project.record import read_project_record
from kernel_deps.resolve.locking import LockMode, LockReport, lock_while_editing, relock

if TYPE_CHECKING:
    from kernel_deps.core.spec import KernelRequirement
    from kernel_deps.core.targets import Target
    from kernel_deps.hub.client import HubClient

__all__ = ["LockMode", "LockReport", "lock_project"]


def lock_project(
    project_dir: Path,
    *,
    hub: HubClient | None = None,
    requirements: Sequence[KernelRequirement] | None = None,
    targets: Sequence[Target] | None = None,
    upgrade: bool = False,
    upgrade_packages: Iterable[str] = (),
    mode: LockMode = LockMode.WRITE,
    notice: Callable[[str], None] | None = None,
) -> LockReport:
    """Resolve the project's kernels and, in :attr:`LockMode.WRITE`, write kernels.lock.

    ``requirements`` and ``targets`` default to the project's pyproject.toml; with targets
    declared, every locked kernel has a build for each of them, or nothing is written.
    Writing holds the project's edit lock from before the files are read until the lock
    is written (:func:`kernel_deps.project.edit.editing`, which tells ``notice`` when it
    waits for another command); in every other mode, a pending edit journal is a
    PendingEditError, never applied. :attr:`LockMode.CHECK` (``lock --check`` and
    ``--dry-run``) explains an out-of-date lock offline from its own records;
    :attr:`LockMode.JUDGE` never asks the Hub; :attr:`LockMode.RESOLVE` resolves what would
    change and writes nothing.
    """
    if mode is LockMode.WRITE:
        report, _ = relock(project_dir, hub=hub, requirements=requirements, targets=targets, upgrade=upgrade,
                           upgrade_packages=upgrade_packages, notice=notice)  # fmt: skip
        return report
    project = read_project_record(Path(project_dir))
    assert project is not None
    return lock_while_editing(project, hub=hub, mode=mode, requirements=requirements, targets=targets,
                              upgrade=upgrade, upgrade_packages=upgrade_packages)  # fmt: skip

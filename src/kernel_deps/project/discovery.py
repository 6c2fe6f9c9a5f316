"""Which folder is the project: the one rule every project command and the loader follow.

Starting from a folder (the working directory), the project is the nearest folder, that one
or one above it, holding a ``pyproject.toml`` or a ``kernels.lock`` (a lock copied alone,
as into an image). The walk stops at the first such folder, whether or not its
``pyproject.toml`` has a ``[tool.kernels]`` table (as uv takes the nearest
``pyproject.toml``), and never goes above a repository root (a folder holding ``.git``)
or the file-system root: a checkout is never handed the project of a folder around it.

:func:`search_project` says how the walk went (:class:`ProjectSearch`), and
:func:`no_project_found` is the one error of a walk that found nothing: the folders looked
in, from the first to the last, why it stopped there, and what to do.
"""

from __future__ import annotations

import os
from pathlib import Path

from kernel_deps.core.errors import PyprojectError
from kernel_deps.core.records import Record
from kernel_deps.core.settings import LOCK_NAME, PYPROJECT_NAME

# A folder holding one of these is a project; one holding the last is a repository root.
_PROJECT_MARKERS = (PYPROJECT_NAME, LOCK_NAME)
_REPOSITORY_MARKER = ".git"


class ProjectSearch(Record):
    """How a walk for the project went: the project found (None when none was), the folder
    it started in and the last one it looked in (both None when the working directory is
    gone), and why it stopped there."""

    __slots__ = ("folder", "start", "last", "stop")
    folder: Path | None
    start: Path | None
    last: Path | None
    stop: str  # one of the reasons below

    FOUND = "found"
    REPOSITORY_ROOT = "repository-root"
    FILE_SYSTEM_ROOT = "file-system-root"
    NO_WORKING_DIRECTORY = "no-working-directory"

    def __init__(self, folder: Path | None, start: Path | None, last: Path | None, stop: str) -> None:
        self._init(folder, start, last, stop)


def search_project(start: str | os.PathLike[str] | None = None) -> ProjectSearch:
    """The walk for the project folder around ``start`` (default: the working directory)."""
    try:
        here = Path(start).absolute() if start is not None else Path.cwd()
    except OSError:  # the working directory was removed
        return ProjectSearch(None, None, None, ProjectSearch.NO_WORKING_DIRECTORY)
    for folder in (here, *here.parents):
        if any(os.path.lexists(folder / name) for name in _PROJECT_MARKERS):
            return ProjectSearch(folder, here, folder, ProjectSearch.FOUND)
        if os.path.lexists(folder / _REPOSITORY_MARKER):
            return ProjectSearch(None, here, folder, ProjectSearch.REPOSITORY_ROOT)
    return ProjectSearch(None, here, Path(here.anchor), ProjectSearch.FILE_SYSTEM_ROOT)


def find_project(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The project folder around ``start`` (default: the working directory), as an absolute
    path; None when no folder up to the repository or file-system root is one (or the
    working directory is gone)."""
    return search_project(start).folder


def no_project_found(search: ProjectSearch) -> PyprojectError:
    """The error of a project command run where no project is found: one line naming the
    folders looked in and why the walk stopped, with what to do."""
    hint = "run the command in the project folder, or pass the folder as PROJECT_DIR"
    if search.start is None or search.last is None:
        return PyprojectError("the working directory no longer exists, so no project can be found", hint=hint)
    why = (f"it holds {_REPOSITORY_MARKER}, a repository root" if search.stop == ProjectSearch.REPOSITORY_ROOT
           else "the file-system root")  # fmt: skip
    looked = f"in {search.start}" if search.last == search.start else f"in {search.start} or above it up to {search.last}"
    return PyprojectError(f"no {PYPROJECT_NAME} or {LOCK_NAME} {looked} (the search stops there: {why})", hint=hint)

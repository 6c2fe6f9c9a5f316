"""Which folder is the project: the one rule every project command and the loader follow.

Starting from a folder (the working directory), the project is the nearest folder, that one
or one above it, holding a ``pyproject.toml`` or a ``kernels.lock`` (a lock copied alone,
as into an image). The walk stops at the first such folder, whether or not its
``pyproject.toml`` has a ``[tool.kernels]`` table (as uv takes the nearest
``pyproject.toml``), and never goes above a repository root (a folder holding ``.git``)
or the file-system root: a checkout is never handed the project of a folder around it.
"""

from __future__ import annotations

import os
from pathlib import Path

from kernel_deps.core.settings import LOCK_NAME, PYPROJECT_NAME

# A folder holding one of these is a project; one holding the last is a repository root.
_PROJECT_MARKERS = (PYPROJECT_NAME, LOCK_NAME)
_REPOSITORY_MARKER = ".git"


def find_project(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The project folder around ``start`` (default: the working directory), as an absolute
    path; None when no folder up to the repository or file-system root is one (or the
    working directory is gone)."""
    try:
        here = Path(start).absolute() if start is not None else Path.cwd()
    except OSError:  # the working directory was removed
        return None
    for folder in (here, *here.parents):
        if any(os.path.lexists(folder / name) for name in _PROJECT_MARKERS):
            return folder
        if os.path.lexists(folder / _REPOSITORY_MARKER):
            return None
    return None

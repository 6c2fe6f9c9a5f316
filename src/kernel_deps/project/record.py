"""The project as one record: ``pyproject.toml`` read and parsed once per command, passed down.

A command reads its project once (:func:`read_project_record`) and hands the record to every
engine it composes (the lock, the download, the checks), instead of each of them reading the
file again. The record keeps the text and its path, for the line numbers of an error, and the
parsed ``[tool.kernels]`` table; its requirements are judged when it is made (as every reader
has always judged them first), its targets, publishers and signature policy on first use, each
from the same parse, so a command that never asks for one is never refused over it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_deps.core.errors import PyprojectError
from kernel_deps.core.records import Record
from kernel_deps.core.settings import PYPROJECT_NAME
from kernel_deps.project.pyproject import (
    kernels_table_from_text,
    missing_table_error,
    read_kernels_source,
    signature_policy_from_table,
    targets_from_table,
    trust_from_table,
)

if TYPE_CHECKING:
    from kernel_deps.trust.signers import SignaturePolicy
    from kernel_deps.core.spec import KernelRequirement
    from kernel_deps.core.targets import Target


class Project(Record):
    """One project's ``pyproject.toml``, from one read and one parse."""

    __slots__ = ("folder", "text", "kernels_table", "declared", "_views")
    folder: Path  # the project folder
    text: str  # pyproject.toml exactly as read (the source of line numbers in errors)
    kernels_table: dict[str, Any] | None  # [tool.kernels] as plain data; None: no such table
    declared: list[KernelRequirement] | None  # [tool.kernels.dependencies]; None: no such table

    def __init__(self, folder: Path, text: str, kernels_table: dict[str, Any] | None,
                 declared: list[KernelRequirement] | None) -> None:  # fmt: skip
        self._init(Path(folder), text, kernels_table, declared, {})

    @property
    def path(self) -> Path:
        """The ``pyproject.toml`` file."""
        return self.folder / PYPROJECT_NAME

    @property
    def source(self) -> str:
        """The file as messages name it."""
        return str(self.path)

    @property
    def requirements(self) -> list[KernelRequirement]:
        """Every requirement of ``[tool.kernels.dependencies]``, sorted by repo id; PyprojectError
        when the project has no such table."""
        if self.declared is None:
            raise missing_table_error(self.source)
        return self.declared

    @property
    def targets(self) -> tuple[Target, ...]:
        """The deployment targets ``[tool.kernels] targets`` declares (empty: none)."""
        return self._view("targets", targets_from_table)

    @property
    def publishers(self) -> tuple[str, ...]:
        """The publishers ``[tool.kernels.trust] publishers`` allows, as written."""
        return self._view("publishers", trust_from_table)

    @property
    def policy(self) -> SignaturePolicy:
        """What ``[tool.kernels.trust]`` (and each kernel's own ``identities``) asks of signatures."""
        return self._view("policy", lambda table, text, source: signature_policy_from_table(table, text, source,
                                                                                            self.folder))  # fmt: skip

    def _view(self, name: str, judge: Any) -> Any:
        views = self._views
        if name not in views:
            views[name] = judge(self.kernels_table, self.text, self.source)
        return views[name]


def read_project_record(project_dir: Path, *, missing_ok: bool = False) -> Project | None:
    """``<project_dir>/pyproject.toml``, read and parsed once; None when there is none and
    ``missing_ok`` (a lock copied alone, as into an image), else PyprojectError."""
    text, table, declared = read_kernels_source(Path(project_dir), missing_ok=missing_ok)
    if text is None:
        return None
    return Project(Path(project_dir), text, table, declared)


def project_from_source(text: str, project_dir: Path) -> Project:
    """The record of pyproject.toml text not yet written to ``<project_dir>/pyproject.toml``
    (an edit's result), parsed once."""
    table, declared = kernels_table_from_text(text, source=str(Path(project_dir) / PYPROJECT_NAME))
    return Project(Path(project_dir), text, table, declared)


def no_project_error(project_dir: Path) -> PyprojectError:
    """The error of a command that needs a project where there is no pyproject.toml."""
    return PyprojectError(f"no pyproject.toml in {project_dir}")

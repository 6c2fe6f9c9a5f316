"""`kernels export` as a library function: kernels.lock written in another tool's lock format.

The formats themselves live beside their readers (:func:`kernel_deps.lock.formats.to_kernels017`,
:func:`kernel_deps.lock.formats.to_kernels016`); this module picks one by name, refuses a lock
that cannot be carried over whole, and writes the result where it is asked to, never over
one of the project's own files. ``pylock`` adds the kernel wheels ``kernels to-wheel`` wrote
to the project's own ``pylock.toml`` (:mod:`kernel_deps.lock.pylock`). No network.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from kernel_deps.core import ownedfs
from kernel_deps.core.errors import FileWriteError, LockfileError, UsageError
from kernel_deps.core.records import Record
from kernel_deps.core.settings import EDIT_JOURNAL_NAME, LOCK_NAME, PYPROJECT_NAME
from kernel_deps.lock.formats import to_kernels016, to_kernels017
from kernel_deps.lock.model import Lockfile, lock_path
from kernel_deps.lock.read import read_lock

# Formats ``kernels export`` writes: name -> writer; and the kernel wheels into a pylock.toml.
EXPORT_FORMATS = {"kernels-0.17": to_kernels017, "kernels-0.16": to_kernels016}
PYLOCK_FORMAT = "pylock"
SCHEMA_VERSION = 2  # of docs/schemas/export.schema.json; see docs/ci.md


class ExportReport(Record):
    """What `kernels export` made: the text in the asked format, and where it went."""

    __slots__ = ("lockfile", "format", "text", "kernels", "output", "warnings")
    lockfile: Path
    format: str
    text: str
    kernels: int  # kernels in the lock exported
    output: Path | None  # the file written; None: the caller shows ``text`` (stdout)
    warnings: tuple[str, ...]  # the lock exported as it is though it no longer agrees with pyproject.toml

    def to_json(self) -> dict:
        """The report as docs/schemas/export.schema.json describes it."""
        return {"schema_version": SCHEMA_VERSION, "ok": not self.warnings, "lockfile": str(self.lockfile),
                "format": self.format, "kernels": self.kernels,
                "output": str(self.output) if self.output is not None else None,
                "text": self.text if self.output is None else None, "warnings": list(self.warnings)}  # fmt: skip

    def __init__(self, lockfile: Path, format: str, text: str, kernels: int, output: Path | None,
                 warnings: tuple[str, ...] = ()) -> None:  # fmt: skip
        self._init(lockfile, format, text, kernels, output, tuple(warnings))


def export_project(project_dir: Path, format_name: str, *, output: Path | None = None,
                   wheels: Path | None = None) -> ExportReport:  # fmt: skip
    """The lock of ``project_dir`` in ``format_name``, written to ``output`` when given; for
    ``pylock``, the kernel wheels of ``wheels`` (the pylock.toml to-wheel wrote) merged into ``output``.

    UsageError for an unknown format or an ``output`` that is one of the project's own
    files; LockfileError for a lock that is missing, invalid, in kernels 0.17's format (which
    holds no hashes to carry over), or kernels <= 0.16's when exporting for kernels 0.17.
    """
    project_dir = Path(project_dir)
    if output is not None:
        _refuse_a_project_file(Path(output), project_dir)
    path = lock_path(project_dir)
    if format_name not in (*EXPORT_FORMATS, PYLOCK_FORMAT):
        export_lock(path, format_name)  # the error naming the formats
    from kernel_deps.lock.freshness import judge_project_lock

    if format_name == PYLOCK_FORMAT or wheels is not None:
        warning = judge_project_lock(project_dir, path, "refusing to export")  # a stale lock: said, not refused
        report = _export_pylock(path, format_name, wheels, output)
    else:
        text, lock = export_lock(path, format_name)  # bad input (a lock that cannot be converted) first
        warning = judge_project_lock(project_dir, path, "refusing to export")  # a stale lock: said, not refused
        if output is not None:
            _write_output(Path(output), text)
        report = ExportReport(path, format_name, text, len(lock.kernels), output)
    if warning:
        report = ExportReport(report.lockfile, report.format, report.text, report.kernels, report.output, (warning,))
    return report


def export_lock(path: Path, format_name: str) -> tuple[str, Lockfile]:
    """The lock at ``path`` (ours or kernels <= 0.16's) in ``format_name``, and the lock itself.

    UsageError for an unknown format; LockfileError for a lock that is missing, invalid, or
    in kernels 0.17's format (which holds no hashes to carry over).
    """
    writer = EXPORT_FORMATS.get(format_name)
    if writer is None:
        raise UsageError(f"unknown export format {format_name!r}; use one of "
                         f"{', '.join(sorted([*EXPORT_FORMATS, PYLOCK_FORMAT]))}")  # fmt: skip
    found = read_lock(path, purpose="use")
    if format_name == "kernels-0.17" and found.format == "kernels-0.16":
        raise LockfileError(_incomplete_for_kernels017(path, found.lock, found.written_by))
    return writer(found.lock), found.lock


def _export_pylock(path: Path, format_name: str, wheels: Path | None, output: Path | None) -> ExportReport:
    """The kernel wheels of ``wheels`` added to the pylock file ``output`` (made when missing)."""
    from kernel_deps.lock.pylock import pylock_export

    if format_name != PYLOCK_FORMAT or wheels is None or output is None:
        raise UsageError(f"--format {PYLOCK_FORMAT} takes --wheels PYLOCK (the pylock.toml kernels to-wheel wrote) "
                         "and --output FILE (the pylock.toml they are added to); other formats take no --wheels")
    if not re.fullmatch(r"pylock\.([^.]+\.)?toml", Path(output).name):
        raise UsageError(f"--output {output}: pip and uv read a lock file only by the name pylock.toml or "
                         "pylock.<name>.toml; name one of those")  # fmt: skip
    if os.path.islink(output):  # refused before it is read, as before it is written
        raise UsageError(f"--output {output} is a symbolic link, which export writes nothing through; "
                         "name the file itself")  # fmt: skip
    lock = read_lock(path, purpose="use").lock
    text, count = pylock_export(lock, path, Path(wheels), Path(output))
    _write_output(Path(output), text)
    return ExportReport(path, format_name, text, count, Path(output))


def _incomplete_for_kernels017(path: Path, lock: Lockfile, written_by: str) -> str:
    """Why a kernels <= 0.16 lock cannot be exported for kernels 0.17: it locks no transitive kernels."""
    names = [k.repo_id for k in lock.kernels]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (
        f"{path}: written by {written_by}, which locks no kernel a kernel depends on, so a kernels-0.17 export "
        f"would lack whatever {shown} depend on (kernels 0.17 then refuses to load those as not locked); "
        "run 'kernels lock' first (it converts the lock, keeping its pins, and adds the kernels they depend on), "
        "then export"
    )


def _refuse_a_project_file(output: Path, project_dir: Path) -> None:
    """UsageError when ``output`` is one of the files kernel-deps keeps in ``project_dir``, by
    whatever name: relative, through a symlink, or another hard link to the same file."""
    for name in (LOCK_NAME, PYPROJECT_NAME, EDIT_JOURNAL_NAME):
        own = project_dir / name
        if os.path.realpath(output) == os.path.realpath(own) or _same_existing_file(output, own):
            raise UsageError(
                f"--output {output} is the project's own {own}, which export would overwrite with another "
                "tool's format; name another file, or '-' for stdout"
            )


def _write_output(output: Path, text: str) -> None:
    """Replace ``output`` with ``text`` atomically, never through a link (one there is
    refused: a checkout could commit it, leading anywhere); FileWriteError."""
    if os.path.islink(output):
        raise UsageError(f"--output {output} is a symbolic link, which export writes nothing through; "
                         "name the file itself, or '-' for stdout")  # fmt: skip
    try:
        ownedfs.write_file(output.parent, output, text.encode("utf-8"))
    except OSError as exc:
        raise FileWriteError(f"{output}: cannot write ({exc.strerror or exc}); check the folder's permissions "
                             "and free space") from None  # fmt: skip


def _same_existing_file(one: Path, other: Path) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:  # one of them does not exist (yet): not the same file
        return False

"""The folder ``kernels to-wheel -o DIR`` writes into: which of its files are to-wheel's own.

A requirements or pylock file to-wheel writes starts with one header line
(:func:`header_line`); a later run replaces only a file that starts so, never a project's
own ``requirements.txt`` or ``pylock.toml``, and writes nothing through a link: a link
where a wheel or a requirements file goes is refused (:func:`check_output`,
:func:`check_wheel_path`) before anything is fetched, and a write (:func:`write_output`)
goes through :func:`kernel_deps.core.ownedfs.write_file`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from kernel_deps.core import ownedfs, pylock
from kernel_deps.core.errors import FileWriteError, LinkedPathError, UsageError

if TYPE_CHECKING:
    from kernel_deps.core.targets import Target

REQUIREMENTS_NAME = "requirements.txt"

# The first line of every requirements file to-wheel writes: a later run replaces only a
# file that starts so (one it wrote), never a project's own requirements.txt.
HEADER_START = "# Kernel wheels for "
HEADER_END = ", written by kernels to-wheel."


def header_line(target: str | None) -> str:
    """The first line of a requirements or pylock file to-wheel writes, for this machine or ``target``."""
    machine = f"the deployment target {target}" if target else "the machine they were written on"
    return f"{HEADER_START}{machine}{HEADER_END}"


def output_names(targets: Sequence[Target], all_variants: bool) -> list[str]:
    """The requirements and pylock files a run writes: none for every variant, one each per target with several."""
    if all_variants:
        return []
    if len(targets) > 1:
        return [name for t in targets for name in (f"requirements-{t.name}.txt", pylock.pylock_name(t.name))]
    return [REQUIREMENTS_NAME, pylock.PYLOCK_NAME]


def check_output(output: Path, requirements: Sequence[str]) -> None:
    """UsageError when ``-o DIR`` cannot be a folder of wheels, or holds a requirements file
    to-wheel did not write (or a link) where it writes one (before anything is fetched)."""
    if os.path.islink(output):
        raise UsageError(
            "is a symbolic link",
            subject=f"-o {output}",
            hint="pass the folder itself (to-wheel writes through no link)",
        )
    if output.exists() and not output.is_dir():
        raise UsageError("is not a folder", subject=f"-o {output}", hint="pass the folder the wheels go into")
    for name in requirements:
        path = output / name
        try:
            info = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        if stat.S_ISLNK(info.st_mode):
            raise UsageError(
                f"{path} is a symbolic link, which to-wheel did not create and writes nothing "
                "through",
                subject=f"-o {output}",
                hint="remove it, or pass another folder",
            )
        if not stat.S_ISREG(info.st_mode) or not written_by_to_wheel(path):
            what = "pylock file" if name.startswith("pylock.") else "requirements file"
            raise UsageError(
                f"{path} is not a {what} to-wheel wrote, and it is not replaced",
                subject=f"-o {output}",
                hint="pass another folder, or move that file",
            )


def written_by_to_wheel(path: Path) -> bool:
    """True when the file's first line is the header to-wheel writes."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as file:
            first = file.readline(4096).decode("utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError):
        return False
    return first.startswith(HEADER_START) and first.endswith(HEADER_END)


def check_wheel_path(output: Path, path: Path) -> None:
    """LinkedPathError for a link where a wheel is written; UsageError for a folder there."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise LinkedPathError(
            f"{path} is a symbolic link, which to-wheel did not create and writes nothing "
            "through",
            path=path,
            subject=f"-o {output}",
            hint="remove it, or pass another folder; no wheel was written",
        )
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(
            f"{path} is not a file",
            subject=f"-o {output}",
            hint="remove it, or pass another folder; no wheel was written",
        )


def write_output(output: Path, name: str, data: bytes) -> None:
    """Replace ``output/name`` with ``data`` atomically, never through a link; FileWriteError."""
    try:
        ownedfs.write_file(output, output / name, data)
    except LinkedPathError as exc:  # one made since the check: the same refusal
        raise LinkedPathError(exc.reason, subject=f"-o {output}: {exc.subject}", hint=exc.hint, path=exc.path) from exc
    except OSError as exc:
        raise FileWriteError(
            f"cannot write ({exc.strerror or exc})",
            subject=output / name,
            hint="check the folder's permissions and free space",
        ) from None

"""Reading a file kernel-deps did not write: a regular file only, and never more than a limit.

Every file a command reads whole into memory is input: in a checkout (``pyproject.toml``,
``kernels.lock``, the ``trusted-root`` file, the edit journal), in an installed
distribution (a lock embedded in a wheel, a kernel wheel's ``kernel_deps.json``) and in the
cache (a variant's manifest). A symbolic link there may lead to ``/dev/zero`` (read whole,
a ``MemoryError``) or to a FIFO (``open`` blocks until someone writes to it), and a
regular file may be gigabytes. :func:`read_bounded` is the one read of such a file:

- a link is followed (a project may keep ``pyproject.toml`` as a link to a shared file),
  but what it reaches must be a regular file: anything else is refused by ``stat`` before
  it is opened, so no device is ever opened and no FIFO waited on; the file opened is
  held to the same rule again by ``fstat`` (it may have been swapped in between), and it
  is opened non-blocking, so even a FIFO swapped in then cannot block;
- at most ``limit`` bytes are read: a file whose size is over the limit is refused before
  a byte is read, and one that grows past it while being read (or reports a wrong size,
  as ``/proc`` files do) after ``limit + 1`` bytes.

A refusal is a :class:`RefusedFileError`, an ``OSError`` whose ``strerror`` says why
("a FIFO, not a regular file", "larger than 16 MiB, the most kernel-deps reads of this
file"), so every caller's usual handling of an unreadable file turns it into its usual
one line naming the file (exit 2 for a project's files). A directory is an
``IsADirectoryError`` and a missing file a ``FileNotFoundError``, as ``open`` would raise.
Imports nothing of kernel-deps.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable

__all__ = ["JOURNAL_LIMIT", "PROJECT_FILE_LIMIT", "RECORD_LIMIT", "RefusedFileError", "read_bounded"]

MiB = 1 << 20
# pyproject.toml, kernels.lock (also one embedded in a distribution) and the trusted root.
# A lock of 100 kernels of 50 signed builds each is about 3 MiB; sigstore's public-good root is 6 KiB.
PROJECT_FILE_LIMIT = 16 * MiB
# The edit journal holds the new text of both pyproject.toml and kernels.lock, escaped as JSON.
JOURNAL_LIMIT = 64 * MiB
# A kernel wheel's kernel_deps.json and a cached variant's manifest: up to 100 000 files' paths and hashes.
RECORD_LIMIT = 64 * MiB

_FLAGS = os.O_RDONLY
for _flag in ("O_NONBLOCK", "O_NOCTTY", "O_CLOEXEC", "O_BINARY"):  # those this system has
    _FLAGS |= getattr(os, _flag, 0)
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)  # fmt: skip


class RefusedFileError(OSError):
    """A file refused before it was read whole: not a regular file, or larger than its limit."""


def file_state(path: str | os.PathLike[str]) -> tuple[int, ...] | None:
    """What tells that the file at ``path`` may have changed since it was read, without reading
    it again: its device, inode, size, modification and change times; None when it cannot be
    stat'ed. Replaced (another inode), written (times) or resized, it differs."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file at ``path`` (links followed), at most ``limit`` of them;
    :class:`RefusedFileError` for anything else, or the ``OSError`` opening it raises."""
    _check(os.stat(path), path, limit)  # before opening: a device or a FIFO is never opened
    fd = os.open(path, _FLAGS)
    try:
        info = os.fstat(fd)
        _check(info, path, limit)  # what was opened, had the path been swapped since the stat
        chunks = []
        left = limit + 1  # one more than allowed: a file that grew (or lied about its size) is caught
        want = min(info.st_size, limit) + 1
        while left > 0:
            chunk = os.read(fd, min(want, left))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
            want = MiB
    finally:
        os.close(fd)
    if left <= 0:
        raise _too_large(path, limit)
    return b"".join(chunks)


def _check(info: os.stat_result, path: str | os.PathLike[str], limit: int) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
        raise RefusedFileError(errno.EINVAL, f"{kind}, not a regular file", os.fspath(path))
    if info.st_size > limit:
        raise _too_large(path, limit)


def _too_large(path: str | os.PathLike[str], limit: int) -> RefusedFileError:
    size = f"{limit // MiB} MiB" if limit % MiB == 0 else f"{limit} bytes"
    return RefusedFileError(errno.EFBIG, f"larger than {size}, the most kernel-deps reads of this file",
                            os.fspath(path))  # fmt: skip


def join_within(chunks: Iterable[bytes], limit: int, too_large: Callable[[], Exception]) -> bytes:
    """The pieces of a body joined, read no further than ``limit`` bytes: ``too_large()`` is raised past it."""
    pieces, total = [], 0
    for piece in chunks:
        total += len(piece)
        if total > limit:
            raise too_large()
        pieces.append(piece)
    return b"".join(pieces)

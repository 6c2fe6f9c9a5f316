"""Replace a file atomically: every file kernel-deps writes goes through here.

kernels.lock, pyproject.toml (``kernels add`` / ``kernels remove``) and the cache's
manifests are written to a temporary file in the target's folder, synced, given the
target's permission bits and renamed over it, so a reader sees the old file or the new
one and never a mix; a failure leaves the old file and no temporary file behind. An
``OSError`` becomes one :class:`FileWriteError` naming the file and what to check.

This module imports only the standard library and ``errors``: the cache and the build
hooks may use it.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from kernel_deps.errors import FileWriteError

__all__ = ["write_text", "write_text_if_changed"]


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` atomically; FileWriteError when it cannot be written."""
    try:
        _replace(Path(path), text.encode("utf-8"))
    except OSError as exc:
        reason = exc.strerror or exc
        raise FileWriteError(f"{path}: cannot write ({reason}); check the folder's permissions and free space") from None


def write_text_if_changed(path: Path, text: str) -> bool:
    """:func:`write_text`, unless ``path`` already holds exactly ``text``; True when written."""
    try:
        if Path(path).read_bytes() == text.encode("utf-8"):
            return False
    except OSError:
        pass  # absent or unreadable: the write says what is wrong, if anything
    write_text(path, text)
    return True


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` to a synced temp file beside ``path`` and rename it over ``path`` (OSError)."""
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = None
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for any new file
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable, where the platform allows it
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass

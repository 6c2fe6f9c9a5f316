"""Replace a file atomically: every file kernel-deps writes goes through here.

kernels.lock, pyproject.toml (``kernels add`` / ``kernels remove``) and the cache's
manifests are written to a temporary file in the target's folder, synced, given the
target's permission bits and renamed over it, so a reader sees the old file or the new
one and never a mix; a failure leaves the old file and no temporary file behind. An
``OSError`` becomes one :class:`FileWriteError` naming the file and what to check.

Several files replaced as one change (``kernels add`` writes pyproject.toml and the lock)
go through :func:`write_together`: the new texts are first recorded in a journal file,
written atomically, which is the commit point; then each file is replaced and the journal
removed. A kill before the commit point changes nothing; after it, the next reader calls
:func:`finish_pending`, which applies the journal again (each step can be repeated). A
file reached through a symbolic link is written at its target; a file with other hard
links is rewritten in place so that every link sees the change.

This module imports only the standard library and ``errors``: the cache and the build
hooks may use it.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from kernel_deps.errors import FileWriteError

__all__ = ["finish_pending", "write_text", "write_text_if_changed", "write_together"]


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` atomically; FileWriteError when it cannot be written."""
    try:
        _replace(Path(os.path.realpath(path)), text.encode("utf-8"))  # through a symlink, at its target
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


def write_together(files: Mapping[Path, str], *, journal: Path) -> None:
    """Replace every file of ``files`` (path -> UTF-8 text) as one change; FileWriteError.

    The files must sit in the journal's folder: the journal names them by file name
    only, so a copied or moved project finishes its own change, and a journal can never
    name a file elsewhere.
    """
    for path in files:
        if Path(path).absolute().parent != Path(journal).absolute().parent:
            raise ValueError(f"{path}: not in the folder of {journal}")
    record = {"files": [{"name": Path(path).name, "text": text} for path, text in files.items()]}
    try:
        _replace(journal, json.dumps(record).encode("utf-8"))  # the commit point
    except OSError as exc:
        raise FileWriteError(f"{journal}: cannot write ({exc.strerror or exc}); check the folder's permissions "
                             "and free space; nothing was changed") from None  # fmt: skip
    finish_pending(journal)


def finish_pending(journal: Path) -> bool:
    """Apply a :func:`write_together` change a kill interrupted; True when there was one.

    A journal that cannot be read as one is left alone and reported as FileWriteError.
    """
    try:
        record = json.loads(Path(journal).read_bytes())
        files = [(_journal_name(entry["name"]), entry["text"].encode("utf-8")) for entry in record["files"]]
    except FileNotFoundError:
        return False
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise FileWriteError(
            f"{journal}: an unfinished edit of pyproject.toml and kernels.lock cannot be read ({exc}); "
            "check both files, then delete it"
        ) from None
    for name, data in files:
        path = Path(journal).parent / name
        try:
            _write_through(path, data)
        except OSError as exc:
            raise FileWriteError(f"{path}: cannot write ({exc.strerror or exc}); check the folder's permissions and "
                                 f"free space, then run the command again to finish the change in {journal}") from None  # fmt: skip
    Path(journal).unlink(missing_ok=True)
    _sync_folder(Path(journal).parent)
    return True


def _journal_name(name: object) -> str:
    """A file name from a journal: a plain name in the journal's folder, nothing else."""
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise ValueError(f"{name!r} is not a file name beside the journal")
    return name


def _write_through(path: Path, data: bytes) -> None:
    """Give ``path`` the content ``data``: at a symlink's target, in place for a hard-linked file."""
    target = Path(os.path.realpath(path))
    try:
        links = os.stat(target).st_nlink
    except FileNotFoundError:
        links = 1
    if links == 1:
        _replace(target, data)
        return
    with open(target, "r+b") as file:  # every name of the file must see the change
        file.write(data)
        file.truncate()
        file.flush()
        os.fsync(file.fileno())


def _sync_folder(folder: Path) -> None:
    """Make renames in ``folder`` durable, where the platform allows it."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


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
    _sync_folder(path.parent)

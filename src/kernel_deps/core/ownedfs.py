"""What a command may write or delete in a folder: never through a link it did not create.

Every output folder a command writes into (``kernels to-wheel -o DIR``, ``--into DIR``)
and every folder it deletes in (``kernels cache prune``) is named by a root the user
gave (the root itself is the user's path and is followed like any path they name).
Below the root, every folder on the way to what is written or removed is opened with
``O_NOFOLLOW`` from the folder above it, so a symbolic link planted there (a checkout can
commit ``wheels/requirements.txt -> ~/.bashrc``, a cache can hold ``blobs -> ~``) is
refused as one :class:`~kernel_deps.core.errors.LinkedPathError` naming it, never
followed, and the check cannot be raced by swapping a folder for a link afterwards:

- :func:`write_file` places bytes through a temporary in the verified folder, renamed
  over the target (or, ``exclusive``, linked to a name no file holds yet); a link at the
  target is refused, not replaced.
- :func:`place_file` makes a file a hard link to (else a copy of) another file, the same way.
- :func:`remove` deletes a file, a link (as a link) or a whole tree, never following a
  link inside it; :func:`remove_empty_folders` removes folders left empty, upwards.
- :func:`link_on_the_way` finds a link between a root and a path, for a caller that
  skips (prune) rather than refuses.
- :func:`read_record` / :func:`write_record` are the record a command keeps in an output
  folder of its own of what it placed there (``--into``): input like any file in the
  folder, so parsed strictly, every path relative, inside the folder, with no link part.

Where the platform has no ``dir_fd`` support (Windows), the same checks are made with
``os.lstat`` on each part before acting. Imports ``core.errors`` and ``core.jsondoc``.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from kernel_deps.core import jsondoc
from kernel_deps.core.errors import LinkedPathError

__all__ = [
    "is_within",
    "link_on_the_way",
    "place_file",
    "read_record",
    "remove",
    "remove_empty_folders",
    "write_file",
    "write_record",
]

_FD_OK = {os.open, os.mkdir, os.unlink, os.rmdir, os.stat, os.rename, os.link} <= os.supports_dir_fd and (
    os.scandir in os.supports_fd
)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def _linked(path: Path) -> LinkedPathError:
    return LinkedPathError(
        "is a symbolic link",
        path=path,
        subject=path,
        hint="kernel-deps writes and deletes nothing through a link it did not create: remove the link, or name "
        "another folder",
    )


def _parts(root: Path, path: Path) -> tuple[str, ...]:
    """The names from ``root`` down to ``path``; ValueError when ``path`` is not below it."""
    rel = Path(os.path.abspath(path)).relative_to(os.path.abspath(root))
    parts = rel.parts
    if not parts or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"{path}: not a path below {root}")
    return parts


@contextmanager
def _folder(root: Path, parts: Iterable[str], *, create: bool) -> Iterator[int | Path]:
    """The folder ``root/parts...`` opened without following a link below ``root`` (its fd,
    or its path where the platform has no dir_fd); missing folders made when ``create``.
    LinkedPathError for a link on the way, FileNotFoundError for a missing folder."""
    where = Path(root)
    if not _FD_OK:
        for part in parts:
            where = where / part
            if create and not os.path.lexists(where):
                os.mkdir(where)
            info = os.lstat(where)
            if stat.S_ISLNK(info.st_mode):
                raise _linked(where)
            if not stat.S_ISDIR(info.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(where))
        yield where
        return
    fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))  # the root is the user's path
    try:
        for part in parts:
            where = where / part
            if create:
                try:
                    os.mkdir(part, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and _is_link(part, fd):
                    raise _linked(where) from None
                raise type(exc)(exc.errno, exc.strerror, str(where)) from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _is_link(name: str, fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _lstat(folder: int | Path, name: str) -> os.stat_result | None:
    try:
        if isinstance(folder, int):
            return os.stat(name, dir_fd=folder, follow_symlinks=False)
        return os.lstat(folder / name)
    except FileNotFoundError:
        return None


def _at(folder: int | Path, name: str) -> dict:
    """Keyword arguments (and the path) that make an os call act on ``name`` in ``folder``."""
    return {"path": name, "dir_fd": folder} if isinstance(folder, int) else {"path": str(folder / name)}


def link_on_the_way(root: Path, path: Path) -> Path | None:
    """The first symbolic link from below ``root`` down to ``path`` itself, or None."""
    where = Path(root)
    for part in _parts(root, path):
        where = where / part
        try:
            if stat.S_ISLNK(os.lstat(where).st_mode):
                return where
        except FileNotFoundError:
            return None
    return None


def is_within(path: Path, folder: Path) -> bool:
    """True when ``path`` is ``folder`` or lies inside it, both with every link resolved."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))


def write_file(root: Path, path: Path, data: bytes, *, mode: int = 0o666, exclusive: bool = False) -> None:
    """Replace ``path`` (below ``root``) with ``data`` atomically, making its folders;
    LinkedPathError for a link at ``path`` or on the way, OSError for the rest. ``mode`` is
    the new file's permission bits (less the umask); with ``exclusive``, a file already at
    ``path`` is kept and FileExistsError raised, so that of writers racing, one wins and all
    then read the same file."""
    *folders, name = _parts(root, path)
    with _folder(root, folders, create=True) as folder:
        _check_target(folder, name, Path(path))
        temp = f".{name}.{os.urandom(6).hex()}.tmp"
        fd = os.open(**_at(folder, temp), flags=_NEW_FILE_FLAGS, mode=mode)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            if exclusive:
                _link_new(folder, temp, name)
                _unlink_quietly(folder, temp)
            else:
                _replace(folder, temp, name)
        except BaseException:
            _unlink_quietly(folder, temp)
            raise
        _sync(folder)


def place_file(root: Path, path: Path, source: Path) -> None:
    """Make ``path`` (below ``root``) hold the bytes of the file ``source``: a hard link to it
    where the file system allows, else a copy; atomically, never through a link."""
    *folders, name = _parts(root, path)
    with _folder(root, folders, create=True) as folder:
        _check_target(folder, name, Path(path))
        temp = f".{name}.incoming"  # one name, so that what a kill left is replaced next time
        _unlink_quietly(folder, temp)
        try:
            if isinstance(folder, int):
                os.link(source, temp, dst_dir_fd=folder)
            else:
                os.link(source, folder / temp)
        except OSError:
            fd = os.open(**_at(folder, temp), flags=_NEW_FILE_FLAGS, mode=0o666)
            try:
                with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
                    out.flush()
                    os.fsync(out.fileno())
            except BaseException:
                _unlink_quietly(folder, temp)
                raise
        try:
            _replace(folder, temp, name)
        except BaseException:
            _unlink_quietly(folder, temp)
            raise


def remove(root: Path, path: Path) -> bool:
    """Remove ``path`` below ``root``: a file or a link (as a link), or a folder and all it
    holds without following a link inside it; False when it was not there. LinkedPathError
    when a folder on the way is a link (nothing is removed)."""
    *folders, name = _parts(root, path)
    try:
        with _folder(root, folders, create=False) as folder:
            if _lstat(folder, name) is None:
                return False
            _remove_entry(folder, name)
    except FileNotFoundError:
        return False
    return True


def remove_empty_folders(root: Path, path: Path) -> None:
    """Remove ``path`` and each folder above it, up to ``root`` (kept), while they are empty."""
    parts = list(_parts(root, path))
    while parts:
        try:
            with _folder(root, parts[:-1], create=False) as folder:
                info = _lstat(folder, parts[-1])
                if info is None or not stat.S_ISDIR(info.st_mode):
                    return
                os.rmdir(**_at(folder, parts[-1]))
        except OSError:
            return  # not empty, a link on the way, or gone: nothing more to remove
        parts.pop()


def _remove_entry(folder: int | Path, name: str) -> None:
    info = _lstat(folder, name)
    if info is None:
        return
    if not stat.S_ISDIR(info.st_mode):  # a file or a link: the link itself goes
        os.unlink(**_at(folder, name))
        return
    if isinstance(folder, int):
        fd = os.open(name, _DIR_FLAGS, dir_fd=folder)
        try:
            if not os.path.samestat(info, os.fstat(fd)):
                raise OSError(errno.EAGAIN, "changed while it was removed", name)
            with os.scandir(fd) as entries:
                names = [entry.name for entry in entries]
            for child in names:
                _remove_entry(fd, child)
        finally:
            os.close(fd)
    else:
        with os.scandir(folder / name) as entries:
            names = [entry.name for entry in entries]
        for child in names:
            _remove_entry(folder / name, child)
    os.rmdir(**_at(folder, name))


def _check_target(folder: int | Path, name: str, path: Path) -> None:
    info = _lstat(folder, name)
    if info is not None and stat.S_ISLNK(info.st_mode):
        raise _linked(path)
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "a folder is in the way", str(path))


def _replace(folder: int | Path, source: str, target: str) -> None:
    if isinstance(folder, int):
        os.replace(source, target, src_dir_fd=folder, dst_dir_fd=folder)
    else:
        os.replace(folder / source, folder / target)


def _link_new(folder: int | Path, source: str, target: str) -> None:
    """``target`` made a second name of the complete file ``source``; FileExistsError when taken."""
    if isinstance(folder, int):
        os.link(source, target, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
    else:
        os.link(folder / source, folder / target, follow_symlinks=False)


def _unlink_quietly(folder: int | Path, name: str) -> None:
    try:
        os.unlink(**_at(folder, name))
    except OSError:
        pass


def _sync(folder: int | Path) -> None:
    if isinstance(folder, int):
        try:
            os.fsync(folder)
        except OSError:
            pass


# -- the record of what a command placed in a folder of its own -----------------------

RECORD_LIMIT = 16 << 20  # bytes; a record of every file of hundreds of variants stays far below


def read_record(folder: Path, name: str, key: str) -> list[str] | None:
    """The paths the record ``folder/name`` (``{key: 1, "placed": [...]}``) lists, or None
    when there is none; ValueError saying what is wrong with one that is there.

    The record is input (a checkout can hold one): it must be a plain file, parse strictly,
    and name each path once, relative, POSIX, inside the folder, without ``.`` or ``..``.
    """
    path = Path(folder) / name
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("not a plain file")
    with open(path, "rb") as file:
        data = file.read(RECORD_LIMIT + 1)
    if len(data) > RECORD_LIMIT:
        raise ValueError(f"larger than {RECORD_LIMIT} bytes")
    record = jsondoc.loads(data, no_duplicate_keys=True)
    if not isinstance(record, dict) or set(record) != {key, "placed"} or record[key] != 1:
        raise ValueError(f'not a record of this kernel-deps (expected {{"{key}": 1, "placed": [...]}})')
    placed = record["placed"]
    if not isinstance(placed, list) or not all(isinstance(p, str) for p in placed):
        raise ValueError('"placed" is not a list of paths')
    for entry in placed:
        parts = PurePosixPath(entry).parts
        if (not entry or entry.startswith("/") or "\\" in entry or "\0" in entry or any(p in (".", "..") for p in parts)
                or PurePosixPath(*parts).as_posix() != entry):  # fmt: skip
            raise ValueError(f"it lists {entry!r}, not a path inside the folder")
    if len(set(placed)) != len(placed):
        raise ValueError("it lists a path twice")
    return list(placed)


def write_record(folder: Path, name: str, key: str, placed: Iterable[str]) -> None:
    """Write the record ``folder/name`` of the paths placed there (atomically, no link followed)."""
    text = json.dumps({key: 1, "placed": sorted(set(placed))}, indent=1) + "\n"
    write_file(folder, Path(folder) / name, text.encode("utf-8"))

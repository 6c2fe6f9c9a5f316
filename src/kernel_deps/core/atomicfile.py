"""Replace a file atomically: every file kernel-deps writes goes through here.

kernels.lock, pyproject.toml (``kernels add`` / ``kernels remove``) and the cache's
manifests are written to a temporary file in the target's folder, synced, given the
target's permission bits and renamed over it, so a reader sees the old file or the new
one and never a mix; a failure leaves the old file and no temporary file behind. An
``OSError`` becomes one :class:`FileWriteError` naming the file and what to check.

Several files replaced as one change (``kernels add`` writes pyproject.toml and the lock)
go through :func:`write_together`: the new texts, and a SHA-256 of what each file held
before, are first recorded in a journal file, written atomically, which is the commit
point; then each file is replaced and the journal removed. A kill before the commit point
changes nothing; after it, the next command that writes the project calls
:func:`finish_pending`, which applies the journal again (each step can be repeated), but
only to the files it may name, each still as it was before the edit or already as after
it: a journal is input like any other file in a checkout, and anything else is refused
(:class:`EditJournalError`) and left in place. A file reached through a symbolic link is
written at its target (an interrupted edit is finished only in files without links); a file with
other hard links is rewritten in place so that every link sees the change.

This module imports only the standard library, ``jsondoc``, ``boundedread`` and ``errors``:
the cache and the build hooks may use it.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Collection, Mapping
from pathlib import Path

from kernel_deps.core import jsondoc
from kernel_deps.core.boundedread import JOURNAL_LIMIT, PROJECT_FILE_LIMIT, read_bounded
from kernel_deps.core.errors import EditJournalError, FileWriteError
from kernel_deps.core.hashing import sha256_hex

__all__ = ["finish_pending", "write_bytes", "write_text", "write_text_if_changed", "write_together"]


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` atomically; FileWriteError when it cannot be written."""
    try:
        _replace(Path(os.path.realpath(path)), text.encode("utf-8"))  # through a symlink, at its target
    except OSError as exc:
        reason = exc.strerror or exc
        raise FileWriteError(
            f"cannot write ({reason})",
            subject=path,
            hint="check the folder's permissions and free space",
        ) from None


def write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically; FileWriteError when it cannot be written."""
    try:
        _replace(Path(os.path.realpath(path)), data)
    except OSError as exc:
        reason = exc.strerror or exc
        raise FileWriteError(
            f"cannot write ({reason})",
            subject=path,
            hint="check the folder's permissions and free space",
        ) from None


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
    name a file elsewhere. The journal records what each file holds now (its SHA-256, or
    that it is absent) beside its new text: :func:`finish_pending` applies it only to
    files still in one of those two states.
    """
    for path in files:
        if Path(path).absolute().parent != Path(journal).absolute().parent:
            raise ValueError(f"{path}: not in the folder of {journal}")
    entries = [{"name": Path(path).name, "before": _state(Path(path)), "text": text} for path, text in files.items()]
    try:
        _replace(journal, json.dumps({_FORMAT_KEY: _FORMAT, "files": entries}).encode("utf-8"))  # the commit point
    except OSError as exc:
        raise FileWriteError(
            f"cannot write ({exc.strerror or exc})",
            subject=journal,
            hint="check the folder's permissions and free space; nothing was changed",
        ) from None
    _apply(journal, [(Path(path), text.encode("utf-8")) for path, text in files.items()])


def finish_pending(journal: Path, *, names: Collection[str]) -> bool:
    """Apply a :func:`write_together` change a kill interrupted; True when there was one.

    The journal is input like any file in the folder (it may have come with a checkout),
    so it is applied only when it proves to be an interrupted edit: it may name only the
    files ``names`` lists, each a file without a symbolic or hard link that still holds
    what the journal says it held before the edit, or already holds its new text. Anything
    else is refused with one :class:`EditJournalError` naming the journal, left in place.
    """
    try:
        info = os.lstat(journal)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _refused(journal, names, f"cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise _refused(journal, names, "not a plain file")
    try:
        record = jsondoc.loads(read_bounded(journal, JOURNAL_LIMIT), no_duplicate_keys=True)
        entries = _journal_entries(record, names)
    except OSError as exc:
        raise _refused(journal, names, f"cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSONDocumentError included
        raise _refused(journal, names, str(exc)) from None
    pending: list[tuple[Path, bytes]] = []
    for name, before, data in entries:
        path = Path(journal).parent / name
        try:
            info = os.lstat(path)
        except OSError:
            info = None  # absent (or unreadable: the read below says so)
        if info is not None and (stat.S_ISLNK(info.st_mode) or info.st_nlink > 1):
            raise _refused(journal, names, f"{name} is a link; an interrupted edit is finished only in plain files")
        try:
            current = read_bounded(path, PROJECT_FILE_LIMIT)  # a FIFO in its place is refused, never waited on
        except FileNotFoundError:
            current = None
        except OSError as exc:
            raise _refused(journal, names, f"{name} cannot be read: {exc.strerror or exc}") from None
        if current == data:
            continue  # replaced before the kill
        if _digest(current) != before:
            reason = f"{name} holds neither what it held before that edit nor what the edit writes"
            raise _refused(journal, names, reason)
        pending.append((path, data))
    _apply(journal, pending)
    return True


# The journal's own format: {"kernel-deps-edit": 1, "files": [{"name", "before", "text"}]}.
_FORMAT_KEY = "kernel-deps-edit"
_FORMAT = 1
_ENTRY_KEYS = {"name", "before", "text"}
_DIGEST = r"sha256:[0-9a-f]{64}"  # compiled when a journal is read (re's cache), not at import


def _journal_entries(record: object, names: Collection[str]) -> list[tuple[str, str | None, bytes]]:
    """(name, digest before or None, new bytes) of each file a journal names; ValueError saying what is wrong."""
    if not isinstance(record, dict) or record.get(_FORMAT_KEY) != _FORMAT or set(record) != {_FORMAT_KEY, "files"}:
        raise ValueError(f'not a journal of this kernel-deps (expected {{"{_FORMAT_KEY}": {_FORMAT}, "files": [...]}})')
    files = record["files"]
    if not isinstance(files, list) or not files:
        raise ValueError('"files" is not a list of the files the edit changes')
    entries: list[tuple[str, str | None, bytes]] = []
    for entry in files:
        if not isinstance(entry, dict) or set(entry) != _ENTRY_KEYS:
            raise ValueError(f'an entry of "files" is not an object with the keys {", ".join(sorted(_ENTRY_KEYS))}')
        name, before, text = entry["name"], entry["before"], entry["text"]
        if not isinstance(name, str) or name not in names:
            allowed = " and ".join(sorted(names))
            raise ValueError(f"it names {_show(name)}; an edit journal may name only {allowed}")
        if any(name == seen for seen, _, _ in entries):
            raise ValueError(f"it names {name} twice")
        if not (before is None or (isinstance(before, str) and re.fullmatch(_DIGEST, before))):
            raise ValueError(f'{name}: "before" is {_show(before)}, not null or "sha256:" and 64 hex digits')
        if not isinstance(text, str):
            raise ValueError(f'{name}: "text" is {_show(text)}, not a string')
        try:
            entries.append((name, before, text.encode("utf-8")))
        except UnicodeEncodeError:
            raise ValueError(f'{name}: "text" is not valid Unicode (a lone surrogate)') from None
    return entries


def _show(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _refused(journal: Path, names: Collection[str], reason: str) -> EditJournalError:
    files = " and ".join(sorted(names))
    return EditJournalError(
        f"refused, not an interrupted edit of {files} ({reason}); it was left in place: "
        f"check {files}, then delete it",
        subject=journal,
    )


def _state(path: Path) -> str | None:
    """The digest of what ``path`` holds now (through a link), None when absent; FileWriteError."""
    try:
        return _digest(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FileWriteError(f"cannot read ({exc.strerror or exc}); nothing was changed", subject=path) from None


def _digest(data: bytes | None) -> str | None:
    return None if data is None else "sha256:" + sha256_hex(data)


def _apply(journal: Path, files: list[tuple[Path, bytes]]) -> None:
    """Give each file its new bytes (each step can be repeated), then remove the journal."""
    for path, data in files:
        try:
            _write_through(path, data)
        except OSError as exc:
            raise FileWriteError(
                f"cannot write ({exc.strerror or exc})",
                subject=path,
                hint=(
                    "check the folder's permissions and free space, then run the command again to finish "
                    f"the change in {journal}"
                ),
            ) from None
    Path(journal).unlink(missing_ok=True)
    _sync_folder(Path(journal).parent)


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
    import secrets  # only a command that writes pays for it (random, hmac), not a read-only verify

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

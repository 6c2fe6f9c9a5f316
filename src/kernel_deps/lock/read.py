"""Reading a ``kernels.lock``: the one reader, which tells the file's format once.

Every command and the loader read a lock here, a file (:func:`read_lock`) or a text such as
the lock a wheel embeds (:func:`parse_lock`): the bytes are read and decoded once, the
JSON parsed once (``jsondoc``, through :func:`kernel_deps.lock.model.load_entries`), the
format decided once, and the entries checked as strictly as the tool that writes them
reads them. The result is a :class:`LockRead` record. The formats:

- ``kernel-deps``: ours (:mod:`kernel_deps.lock.model`);
- ``kernels-0.16``: the Hugging Face ``kernels`` library up to 0.16, whose entries are
  ours without ``version``, ``requirement`` and ``dependencies`` (told by an entry
  without ``dependencies``);
- ``kernels-0.17``: ``kernels`` 0.17, a list of ``{"dependency", "lock": {"commit"}}``
  (told by the first entry), which may pin one repo at several commits.

What a reader needs of a lock is its ``purpose``:

- ``use`` (``kernels tree``, ``outdated``, ``export``, ``to-wheel``): our lock or a
  kernels <= 0.16 lock as it is (it pins commits and variant hashes, all they need); a
  kernels 0.17 lock carries no hashes, so it is refused with how to convert it;
- ``fetch`` (``kernels download``, ``sync``, ``verify``): as ``use``, and a kernels 0.17 lock
  as its pins (``lock`` None), whose builds are hashed from the Hub's listing at each
  pinned commit before anything is fetched (:mod:`kernel_deps.resolve.pinned`);
- ``load`` (the loader): as ``fetch`` (the loader decides what it can do with a kernels 0.17
  lock's pins: :mod:`kernel_deps.loader.finding`); a process that loads many kernels parses
  a file again only when it changes (size or mtime);
- ``lock`` (``kernels lock``: the prior pins it keeps): any format, a missing file is None;
- ``embed`` (the build hooks: what a wheel carries): any format, as it is.

A lock of ours with keys this version does not know, in an entry or a variant (a newer
kernel-deps wrote it), is read-only here: for ``lock`` it is refused
(:func:`newer_lock_error`: rewriting it would drop them); for the other purposes it is
read without them, the keys recorded in ``unknown_keys`` for the consumer to say
(:func:`newer_lock_warning`). Keys deeper down, and a known key's bad value, are refused
as ever.

A file is never read while an edit journal lies beside it
(:func:`kernel_deps.project.edit.refuse_pending_edit`): a command that writes finishes the
journal under the edit lock before it reads, and every other reader is refused.

This module imports ``lockfile`` (the model, its parse), ``compat`` (the other tools'
entries), ``projectedit`` and ``errors``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, overload

from kernel_deps.core.boundedread import PROJECT_FILE_LIMIT, file_state, read_bounded
from kernel_deps.core.errors import LockfileError
from kernel_deps.core.records import Record
from kernel_deps.lock.entries import LockedKernel, LockedPin, VariantLock
from kernel_deps.lock.model import Lockfile, load_entries, parse_entries
from kernel_deps.project.edit import refuse_pending_edit

__all__ = [
    "FORMATS", "PURPOSES", "WRITTEN_BY", "LockFormat", "LockRead", "Purpose", "lock_format", "newer_lock_error",
    "newer_lock_warning", "parse_lock", "read_lock",
]  # fmt: skip

LockFormat = Literal["kernel-deps", "kernels-0.16", "kernels-0.17"]
Purpose = Literal["use", "fetch", "load", "lock", "embed"]

FORMATS: tuple[LockFormat, ...] = ("kernel-deps", "kernels-0.16", "kernels-0.17")
PURPOSES: tuple[Purpose, ...] = ("use", "fetch", "load", "lock", "embed")
# The tool that writes each format, as messages name it (None: kernel-deps itself).
WRITTEN_BY: Mapping[LockFormat, str | None] = {
    "kernel-deps": None,
    "kernels-0.16": "Hugging Face kernels <= 0.16",
    "kernels-0.17": "Hugging Face kernels 0.17",
}


class LockRead(Record):
    """One read of a lock: where it came from, its format, what it holds, and its text."""

    __slots__ = ("source", "format", "lock", "pins", "text", "unknown_keys")
    source: str  # the path, or where an embedded text came from, as messages name it
    format: LockFormat
    # The lock itself: ours, or a kernels <= 0.16 lock as it is (its entries depend on
    # nothing); None for a kernels 0.17 lock, which records no variant hashes.
    lock: Lockfile | None
    # Repo id -> locked commit (read-only); a repo that a kernels 0.17 lock pins at several commits has none.
    pins: Mapping[str, LockedPin]
    text: str
    # The keys of ours this version does not know, left unread ('signatures2', 'variants.*.size'): a newer kernel-deps wrote it.
    unknown_keys: tuple[str, ...]

    def __init__(self, *, source: str, format: LockFormat, lock: Lockfile | None, pins: Mapping[str, LockedPin],
                 text: str, unknown_keys: tuple[str, ...] = ()) -> None:  # fmt: skip
        self._init(source, format, lock, pins, text, unknown_keys)

    @property
    def raw(self) -> bytes:
        """The file's bytes (its text was read as UTF-8)."""
        return self.text.encode("utf-8")

    @property
    def written_by(self) -> str | None:
        """The other tool that wrote this lock, as messages name it; None for kernel-deps' own."""
        return WRITTEN_BY[self.format]


def lock_format(data: list[Any]) -> LockFormat:
    """The format of decoded lock entries: kernels 0.17's is told by the first entry; any
    entry without ``dependencies`` is kernels <= 0.16's; else ours (an empty list too)."""
    if data and isinstance(data[0], dict) and ("dependency" in data[0] or "lock" in data[0]):
        return "kernels-0.17"
    if any(isinstance(entry, dict) and "dependencies" not in entry for entry in data):
        return "kernels-0.16"
    return "kernel-deps"


@overload
def read_lock(path: Path, *, purpose: Literal["lock"]) -> LockRead | None: ...
@overload
def read_lock(path: Path, *, purpose: Literal["use", "fetch", "load", "embed"]) -> LockRead: ...
def read_lock(path: Path, *, purpose: Purpose) -> LockRead | None:
    """The lock at ``path``, read for ``purpose`` (see the module's docstring).

    LockfileError for a file that is missing (None for ``lock``), unreadable, not UTF-8,
    not JSON, invalid in its format, or, for ``use``, written by kernels 0.17;
    PendingEditError when an edit journal lies beside it.
    """
    path = Path(path)
    refuse_pending_edit(path)
    if purpose == "load":
        return _read_for_load(path)
    text = _read_text(path, missing_ok=purpose == "lock")
    if text is None:
        return None
    return parse_lock(text, source=str(path), purpose=purpose)


def parse_lock(text: str, *, source: str, purpose: Purpose) -> LockRead:
    """The lock ``text`` holds, read for ``purpose``; errors name ``source``, as :func:`read_lock`'s."""
    data = load_entries(text, source)  # each format below is read as strictly as its tool reads it
    found = lock_format(data)
    if found == "kernels-0.17":
        from kernel_deps.lock.formats import kernels017_named_pins  # another tool's reader, for its lock only

        named = kernels017_named_pins(data, source)  # an invalid file is refused first, for every purpose
        if purpose == "use":
            raise LockfileError(
                f"written by {WRITTEN_BY[found]}, which records commits but no variant hashes, so "
                "nothing could be verified against it",
                subject=source,
                hint="run 'kernels lock' to convert it (its pins are kept)",
            )
        pins = {repo_id: LockedPin(commit=commit, version=ref) for repo_id, (commit, ref) in named.items()}
        return LockRead(source=source, format=found, lock=None, pins=MappingProxyType(pins), text=text)
    if found == "kernels-0.16":
        from kernel_deps.lock.formats import from_kernels016

        lock = from_kernels016(data, source)
        unknown: tuple[str, ...] = ()
    else:
        data, unknown = _known_keys_only(data)
        if unknown and purpose == "lock":
            raise newer_lock_error(source, unknown)
        lock = parse_entries(data, source)
    pins = {k.repo_id: LockedPin.of(k) for k in lock.kernels}
    return LockRead(source=source, format=found, lock=lock, pins=MappingProxyType(pins), text=text,
                    unknown_keys=unknown)  # fmt: skip


_ENTRY_KEYS = frozenset(LockedKernel.__slots__)
_VARIANT_KEYS = frozenset(VariantLock.__slots__)


def _known_keys_only(data: list[Any]) -> tuple[list[Any], tuple[str, ...]]:
    """``data`` without the keys of an entry or of a variant that this version does not know,
    and those keys (``name``, ``variants.*.name``), sorted; ``data`` itself when it has none.
    An entry that is no object, or lacks a key this version needs, is left for the parse to refuse."""
    unknown: set[str] = set()
    for entry in data:
        if not isinstance(entry, dict) or not {"repo_id", "sha", "variants", "dependencies"} <= entry.keys():
            continue
        unknown |= {str(key) for key in entry if key not in _ENTRY_KEYS}
        variants = entry["variants"]
        for variant in variants.values() if isinstance(variants, dict) else ():
            if isinstance(variant, dict) and _VARIANT_KEYS <= variant.keys():
                unknown |= {f"variants.*.{key}" for key in variant if key not in _VARIANT_KEYS}
    if not unknown:
        return data, ()
    known = []
    for entry in data:
        if isinstance(entry, dict) and isinstance(entry.get("variants"), dict):
            variants = {name: {k: v for k, v in variant.items() if k in _VARIANT_KEYS}
                        if isinstance(variant, dict) and _VARIANT_KEYS <= variant.keys() else variant
                        for name, variant in entry["variants"].items()}  # fmt: skip
            entry = {**{k: v for k, v in entry.items() if k in _ENTRY_KEYS}, "variants": variants}
        known.append(entry)
    return known, tuple(sorted(unknown))


def _newer(keys: tuple[str, ...]) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("kernel-deps")
    except PackageNotFoundError:  # run from a checkout that is not installed
        ours = "(this version)"
    shown = ", ".join(repr(k) for k in keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
    # Our format records no writer's version; the keys are what tell a newer one.
    return f"written by a newer kernel-deps: it has keys kernel-deps {ours} does not know ({shown})"


def newer_lock_error(source: str, keys: tuple[str, ...]) -> LockfileError:
    """The refusal of a lock with ``keys`` this version does not know, by a command that would
    rewrite it (and drop them) or cannot be exact about it: one line naming the lock and the keys."""
    return LockfileError(
        f"{_newer(keys)}; it is read-only for this version, which leaves it as it is",
        subject=source,
        hint="upgrade kernel-deps (pip install -U kernel-deps)",
    )


def newer_lock_warning(found: LockRead) -> str | None:
    """The one warning of a consumer that uses a lock with keys this version does not know:
    the lock, the keys, that what they record is not checked, and to upgrade; None otherwise."""
    if not found.unknown_keys:
        return None
    return (f"{found.source} was {_newer(found.unknown_keys)}; using it without them, so what they record "
            "is not checked; upgrade kernel-deps")  # fmt: skip


# Path -> (its file_state when read, the read): the loader's reads, one parse per change of the file.
_loaded: dict[Path, tuple[tuple[int, ...], LockRead]] = {}


def _read_for_load(path: Path) -> LockRead:
    """:func:`read_lock` for the loader: parsed again only when the file changes (replaced,
    written or resized: :func:`~kernel_deps.core.boundedread.file_state`)."""
    key = file_state(path)
    if key is None:  # read anyway: it raises the usual, clear error
        return parse_lock(_read_text(path), source=str(path), purpose="load")
    cached = _loaded.get(path)
    if cached is None or cached[0] != key:
        cached = _loaded[path] = (key, parse_lock(_read_text(path), source=str(path), purpose="load"))
    return cached[1]


def _read_text(path: Path, *, missing_ok: bool = False) -> str | None:
    """The text of the lock at ``path`` (None when absent and ``missing_ok``); LockfileError otherwise."""
    try:
        raw = read_bounded(path, PROJECT_FILE_LIMIT)  # a regular file of at most the limit, never a FIFO's wait
    except FileNotFoundError:
        if missing_ok:
            return None
        raise LockfileError("not found", subject=path, hint="run 'kernels lock' to create it") from None
    except OSError as exc:
        raise LockfileError(
            f"cannot read ({exc.strerror or exc})",
            subject=path,
            hint="check that it is a readable file",
        ) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LockfileError(
            f"not UTF-8 text (bad byte at offset {exc.start})",
            subject=path,
            hint="rerun 'kernels lock'",
        ) from None

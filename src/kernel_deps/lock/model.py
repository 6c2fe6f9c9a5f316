"""The ``kernels.lock`` model: the whole lock, its strict parse, and writing the file.

The format (docs/locking.md) is a JSON list sorted by ``repo_id``; each entry is a
:class:`kernel_deps.lock.entries.LockedKernel`, which owns the rules about its values.
:class:`Lockfile` owns the rules between entries: one entry per kernel, no dangling
dependency, a redirect that is not a kernel's own entry too. The parse owns what only JSON
can get wrong (an entry that is not an object, unknown or missing keys, ``null`` for an
absent key, duplicate keys, the text itself): every error gets the path of its key
(``'[1].variants.x.hash'``), and :meth:`Lockfile.from_json` turns each into one
:class:`LockfileError` line naming the file, the entry and the key.

A file is read (in whichever format) by :mod:`kernel_deps.lock.read`, and other tools'
entries by :mod:`kernel_deps.lock.formats`, through the helpers below; files are written
through :mod:`kernel_deps.core.atomicfile`. The entries' records (``LockedKernel``,
``VariantLock``, ``VariantSigner``, ``LockedPin``) are this module's public surface too,
importable from here as docs/locking.md says; the entries' helpers are imported from
:mod:`kernel_deps.lock.entries`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernel_deps.core import atomicfile, jsondoc
from kernel_deps.core.errors import LockfileError
from kernel_deps.core.fields import FieldError, brief
from kernel_deps.core.records import FrozenMap, Record, replaceable
from kernel_deps.core.settings import LOCK_NAME
from kernel_deps.lock.entries import (  # the entries' records: importable from here too (docs/locking.md)
    LockedKernel,
    LockedPin,
    VariantLock,
    VariantSigner,
    repo_id_problem,
)

__all__ = ["LockedKernel", "LockedPin", "Lockfile", "VariantLock", "VariantSigner", "lock_path", "write_lockfile"]

_FIX = "fix the entry or rerun 'kernels lock'"


class MissingEntryError(ValueError):
    """Entry ``entry`` (``repo_id``) depends on ``dependency``, which has no entry of its own."""

    def __init__(self, entry: int, repo_id: str, dependency: str, position: int) -> None:
        self.entry, self.repo_id, self.dependency = entry, repo_id, dependency
        super().__init__(self.describe(position))

    def describe(self, position: int) -> str:
        """The message, naming the dependency as item ``position`` of the entry's list."""
        where = f"'[{self.entry}].dependencies[{position}]' ({self.repo_id})"
        return f"dependency {self.dependency!r} in {where} has no entry of its own in the lock"


class RedirectClashError(FieldError):
    """Entry ``entry`` (``repo_id``) lists ``source`` in redirected_from, which has an entry of its own."""

    def __init__(self, entry: int, repo_id: str, source: str, position: int) -> None:
        self.entry, self.repo_id, self.source = entry, repo_id, source
        detail = f"{source!r} has an entry of its own and also redirects to {repo_id!r}"
        super().__init__(f"[{entry}].redirected_from[{position}]", detail, "expected one or the other")


@replaceable  # a dataclass as before, of one field
class Lockfile(Record):
    """A whole lock: one entry per kernel, sorted by repo id, closed under dependencies.

    Equal, hashed, shown and pickled by its ``kernels``; ``_index`` (each kernel by its repo
    id and by the ids redirecting to it) follows from them."""

    __slots__ = ("kernels", "_index")
    kernels: tuple[LockedKernel, ...]

    def __init__(self, *, kernels: tuple[LockedKernel, ...]) -> None:
        # Positions in messages are those of ``kernels`` as given: a file's entries, in order.
        first: dict[str, int] = {}
        for i, kernel in enumerate(kernels):
            if kernel.repo_id in first:
                where = f"'[{first[kernel.repo_id]}].repo_id' and '[{i}].repo_id'"
                detail = f"duplicate repo_id {kernel.repo_id!r}"
                raise FieldError(f"[{i}].repo_id", detail, "expected one entry per kernel", where=where)
            first[kernel.repo_id] = i
        for i, kernel in enumerate(kernels):
            for position, dep in enumerate(kernel.dependencies):
                if dep not in first:
                    raise MissingEntryError(i, kernel.repo_id, dep, position)
        for i, kernel in enumerate(kernels):
            for position, source in enumerate(kernel.redirected_from):
                if source in first:
                    raise RedirectClashError(i, kernel.repo_id, source, position)
                first[source] = i
        kernels = tuple(sorted(kernels, key=lambda k: k.repo_id))
        # A repo that redirects is found under its own id too, as the entry of its destination.
        aliases = [(source, k) for k in kernels for source in k.redirected_from]
        self._init(kernels, FrozenMap([*((k.repo_id, k) for k in kernels), *aliases]))

    def _values(self) -> tuple[Any, ...]:
        return (self.kernels,)

    def __repr__(self) -> str:
        return f"{self.__class__.__qualname__}(kernels={self.kernels!r})"

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.__init__(kernels=state[0])  # type: ignore[misc]

    @property
    def repo_ids(self) -> tuple[str, ...]:
        """The locked repo ids, sorted."""
        return tuple(k.repo_id for k in self.kernels)

    def get(self, repo_id: str) -> LockedKernel | None:
        """The entry for ``repo_id`` (the destination's, for a repo that redirects), or None when it is not locked."""
        return self._index.get(repo_id)

    def to_text(self) -> str:
        """The lock as written to disk, JSON text: sorted, 2-space indent, trailing newline."""
        return json.dumps([k.to_dict() for k in self.kernels], indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, *, source: str = "kernels.lock") -> Lockfile:
        """Parse and strictly validate a lock; every problem is one LockfileError line."""
        return parse_entries(load_entries(text, source), source)


# -- the file -----------------------------------------------------------------------------------


def lock_path(project_dir: Path) -> Path:
    """Where a project's lock lives."""
    return Path(project_dir) / LOCK_NAME


def write_lockfile(path: Path, lock: Lockfile) -> bool:
    """Atomically write ``lock`` to ``path``; False (and nothing written) when unchanged."""
    return atomicfile.write_text_if_changed(Path(path), lock.to_text())


# -- the parse: JSON's own rules, and where in the file each problem is ------------------------


def load_entries(text: str, source: str) -> list[Any]:
    """Decode JSON (rejecting duplicate keys) and require a list at the top level."""
    hint = "fix the file or rerun 'kernels lock'"
    try:
        data = jsondoc.loads(text, no_duplicate_keys=True)
    except jsondoc.JSONDocumentError as exc:
        raise LockfileError(f"{source}: {exc}; {hint}") from None
    if not isinstance(data, list):
        raise LockfileError(f"{source}: invalid top level {brief.repr(data)}; expected a JSON list of entries; {hint}")
    return data


def parse_entries(data: list[Any], source: str) -> Lockfile:
    """The lock that the decoded entries ``data`` of ``source`` hold; one LockfileError otherwise."""
    kernels: list[LockedKernel] = []
    for i, entry in enumerate(data):
        try:
            kernels.append(LockedKernel.from_dict(entry))
        except FieldError as exc:
            repo_id = entry.get("repo_id") if isinstance(entry, dict) else None
            context = "" if repo_id_problem(repo_id) else f" ({repo_id})"
            where = f"'{exc.within(f'[{i}]').key}'{context}"
            raise LockfileError(f"{source}: {exc.detail} in {where}; {exc.expected}; {_FIX}") from None
    try:
        return Lockfile(kernels=tuple(kernels))
    except MissingEntryError as exc:  # name the dependency where the file lists it, not sorted
        position = data[exc.entry]["dependencies"].index(exc.dependency)
        raise LockfileError(f"{source}: {exc.describe(position)}; {_FIX}") from None
    except RedirectClashError as exc:  # likewise the redirect, which the entry keeps sorted
        position = data[exc.entry]["redirected_from"].index(exc.source)
        clash = RedirectClashError(exc.entry, exc.repo_id, exc.source, position)
        raise LockfileError(f"{source}: {clash}; {_FIX}") from None
    except FieldError as exc:
        raise LockfileError(f"{source}: {exc}; {_FIX}") from None

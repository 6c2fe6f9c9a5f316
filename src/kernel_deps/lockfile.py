"""The ``kernels.lock`` model: frozen records, strict parse with path-naming errors, write, diff.

The format (docs/locking.md) is a JSON list sorted by ``repo_id``; ``kernels`` <= 0.16 reads the
``repo_id``, ``sha`` and ``variants`` of each entry. Records validate themselves when built
(a ``ValueError`` naming the key); :meth:`Lockfile.from_json` turns every problem in a file
into one :class:`LockfileError` line naming the file, the entry and the key.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel_deps import atomicfile
from kernel_deps.errors import InvalidRepoIdError, LockfileError
from kernel_deps.hashing import HASH_TYPE
from kernel_deps.spec import validate_repo_id

_SHA = re.compile(r"[0-9a-f]{40}")
_HASH = re.compile(r"sha256-[0-9a-f]{64}")
_VARIANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_ENTRY_KEYS = ("repo_id", "sha", "variants", "version", "requirement", "dependencies")
_VARIANT_KEYS = ("hash", "hash_type")
_FIX = "fix the entry or rerun 'kernels lock'"
_show = reprlib.Repr()  # quotes bad values briefly, whatever their size or depth
_show.maxstring = _show.maxother = 80
_show.maxlist = _show.maxdict = 4
_show.maxlevel = 2


class _FrozenMap(Mapping[str, Any]):
    """A read-only, hashable, picklable mapping (``MappingProxyType`` is neither)."""

    __slots__ = ("_data",)

    def __init__(self, items: Iterable[tuple[str, Any]]) -> None:
        self._data = dict(items)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(tuple(self._data.items()))

    def __repr__(self) -> str:
        return repr(self._data)


class _FieldError(ValueError):
    """A record is invalid; ``key`` is the dotted path inside it (``.variants.x.hash``)."""

    def __init__(self, key: str, detail: str, expected: str) -> None:
        where = f"'{key.lstrip('.')}'" if key else "the record"
        super().__init__(f"{detail} in {where}; {expected}")
        self.key, self.detail, self.expected = key, detail, expected


def _invalid(key: str, what: str, value: object, expected: str) -> _FieldError:
    return _FieldError(key, f"invalid {what} {_show.repr(value)}", expected)


def _step(name: str) -> str:
    """One step of a dotted path: ``.name``, or ``['odd name']`` quoted when not plain."""
    return f".{name}" if _VARIANT.fullmatch(name) and len(name) <= 80 else f"[{_show.repr(name)}]"


@dataclass(frozen=True, kw_only=True, slots=True)
class VariantLock:
    """The locked content hash of one build variant."""

    hash: str
    hash_type: str = HASH_TYPE

    def __post_init__(self) -> None:
        if not isinstance(self.hash, str) or not _HASH.fullmatch(self.hash):
            raise _invalid(".hash", "variant hash", self.hash, "expected 'sha256-' and 64 lowercase hex characters")
        if self.hash_type != HASH_TYPE:
            raise _invalid(".hash_type", "hash type", self.hash_type, f"expected {HASH_TYPE!r}")

    @classmethod
    def from_dict(cls, raw: Any) -> VariantLock:
        """Build from a lock's JSON object; ValueError naming the bad key."""
        _check_object(raw, "", _VARIANT_KEYS, _VARIANT_KEYS)
        return cls(hash=raw["hash"], hash_type=raw["hash_type"])


@dataclass(frozen=True, kw_only=True, slots=True)
class LockedKernel:
    """One locked kernel: its commit, variant hashes, resolved version, spec and dependencies."""

    repo_id: str
    sha: str
    variants: Mapping[str, VariantLock]
    version: str | None = None
    requirement: str | None = None
    dependencies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if reason := _repo_id_problem(self.repo_id):
            raise _invalid(".repo_id", "repo id", self.repo_id, reason)
        if not isinstance(self.sha, str) or not _SHA.fullmatch(self.sha):
            raise _invalid(".sha", "commit", self.sha, "expected 40 lowercase hex characters (a full commit SHA)")
        if not isinstance(self.variants, Mapping):
            raise _invalid(".variants", "variants", self.variants, "expected a map of variant name -> hash")
        for name, lock in self.variants.items():
            if not isinstance(name, str) or not _VARIANT.fullmatch(name):
                raise _invalid(f".variants{_step(name)}", "variant name", name, "expected a build variant folder name")
            if not isinstance(lock, VariantLock):
                raise _invalid(f".variants{_step(name)}", "variant lock", lock, "expected a VariantLock")
        for key in ("version", "requirement"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise _invalid(f".{key}", key, value, "expected a non-empty string, or no key at all")
        if not isinstance(self.dependencies, (list, tuple, set, frozenset)):
            raise _invalid(".dependencies", "dependencies", self.dependencies, "expected a list of repo ids")
        dependencies = tuple(self.dependencies)
        for index, dep in enumerate(dependencies):
            key = f".dependencies[{index}]"
            if reason := _repo_id_problem(dep):
                raise _invalid(key, "repo id", dep, reason)
            if dep == self.repo_id or dep in dependencies[:index]:
                raise _invalid(key, "dependency", dep, "expected each other kernel once, not the kernel itself")
        object.__setattr__(self, "variants", _FrozenMap(sorted(self.variants.items())))
        object.__setattr__(self, "dependencies", tuple(sorted(dependencies)))

    @classmethod
    def from_dict(cls, raw: Any, *, require_dependencies: bool = True) -> LockedKernel:
        """Build from a lock entry's JSON object; ValueError naming the bad key."""
        required = _ENTRY_KEYS[:3] + (("dependencies",) if require_dependencies else ())
        _check_object(raw, "", _ENTRY_KEYS, required)
        for key in ("version", "requirement"):
            if key in raw and not isinstance(raw[key], str):
                raise _invalid(f".{key}", key, raw[key], "expected a string, or no key at all")
        dependencies = raw.get("dependencies", [])
        if not isinstance(dependencies, list):
            raise _invalid(".dependencies", "dependencies", dependencies, "expected a list of repo ids")
        if not isinstance(raw["variants"], dict):
            raise _invalid(".variants", "variants", raw["variants"], "expected an object of variant name -> hash")
        variants = {}
        for name, variant in raw["variants"].items():
            try:
                variants[name] = VariantLock.from_dict(variant)
            except _FieldError as exc:
                raise _FieldError(f".variants{_step(name)}{exc.key}", exc.detail, exc.expected) from None
        return cls(
            repo_id=raw["repo_id"],
            sha=raw["sha"],
            variants=variants,
            version=raw.get("version"),
            requirement=raw.get("requirement"),
            dependencies=tuple(dependencies),
        )

    def to_dict(self) -> dict[str, Any]:
        """The entry's JSON object, keys in the lock's order."""
        entry: dict[str, Any] = {"repo_id": self.repo_id, "sha": self.sha}
        entry["variants"] = {name: {"hash": v.hash, "hash_type": v.hash_type} for name, v in self.variants.items()}
        if self.version is not None:
            entry["version"] = self.version
        if self.requirement is not None:
            entry["requirement"] = self.requirement
        entry["dependencies"] = list(self.dependencies)
        return entry


@dataclass(frozen=True, kw_only=True, slots=True)
class Lockfile:
    """A whole lock: one entry per kernel, sorted by repo id, closed under dependencies."""

    kernels: tuple[LockedKernel, ...]
    _index: Mapping[str, LockedKernel] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        kernels = tuple(sorted(self.kernels, key=lambda k: k.repo_id))
        index = {k.repo_id: k for k in kernels}
        if len(index) != len(kernels):
            raise ValueError("duplicate repo_id in the lock; expected one entry per kernel")
        for kernel in kernels:
            for dep in kernel.dependencies:
                if dep not in index:
                    raise ValueError(f"{kernel.repo_id} depends on {dep!r}, which has no entry in the lock")
        object.__setattr__(self, "kernels", kernels)
        object.__setattr__(self, "_index", _FrozenMap(index.items()))

    @property
    def repo_ids(self) -> tuple[str, ...]:
        """The locked repo ids, sorted."""
        return tuple(self._index)

    def get(self, repo_id: str) -> LockedKernel | None:
        """The entry for ``repo_id``, or None when it is not locked."""
        return self._index.get(repo_id)

    def to_json(self) -> str:
        """The lock as written to disk: sorted, 2-space indent, trailing newline."""
        return json.dumps([k.to_dict() for k in self.kernels], indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, *, source: str = "kernels.lock") -> Lockfile:
        """Parse and strictly validate a lock; every problem is one LockfileError line."""
        return _parse_lock(_load_list(text, source), source, require_dependencies=True)


def read_prior_pins(text: str, *, source: str) -> dict[str, str]:
    """Repo id -> locked commit, from our lock, a kernels <= 0.16 lock or a kernels 0.17 lock.

    A kernels 0.17 lock may pin one repo at several commits (one per version asked for);
    such a repo gets no pin, so the resolver chooses afresh.
    """
    data = _load_list(text, source)
    if data and isinstance(data[0], dict) and ("dependency" in data[0] or "lock" in data[0]):
        return _parse_kernels017(data, source)
    return {k.repo_id: k.sha for k in _parse_lock(data, source, require_dependencies=False).kernels}


def read_lock_text(path: Path, *, missing_ok: bool = False) -> str | None:
    """The text of the lock at ``path`` (None when absent and ``missing_ok``); LockfileError otherwise."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise LockfileError(f"{path}: not found; run 'kernels lock' to create it") from None
    except OSError as exc:
        raise LockfileError(f"{path}: cannot read ({exc.strerror or exc}); check that it is a readable file") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LockfileError(f"{path}: not UTF-8 text (bad byte at offset {exc.start}); rerun 'kernels lock'") from None


def read_lockfile(path: Path) -> Lockfile:
    """Read and validate the lock at ``path``."""
    return Lockfile.from_json(read_lock_text(path), source=str(path))


def write_lockfile(path: Path, lock: Lockfile) -> bool:
    """Atomically write ``lock`` to ``path``; False (and nothing written) when unchanged."""
    return atomicfile.write_text_if_changed(Path(path), lock.to_json())


def diff_locks(old: Lockfile | None, new: Lockfile) -> list[str]:
    """Human-readable lines for what changed from ``old`` to ``new``; empty when equal."""
    before = {k.repo_id: k for k in old.kernels} if old is not None else {}
    after = {k.repo_id: k for k in new.kernels}
    lines: list[str] = []
    for repo_id in sorted(before.keys() | after.keys()):
        a, b = before.get(repo_id), after.get(repo_id)
        if a is None or b is None:
            lines.append(f"+ {repo_id} {_describe(b)}" if a is None else f"- {repo_id} {_describe(a)}")
            continue
        if (a.sha, a.version) != (b.sha, b.version):
            lines.append(f"~ {repo_id} {_describe(a)} -> {_describe(b)}")
        for name in sorted(a.variants.keys() | b.variants.keys()):
            if name not in a.variants or name not in b.variants:
                lines.append(f"~ {repo_id}: variant {name} {'added' if name in b.variants else 'removed'}")
            elif a.sha == b.sha and a.variants[name] != b.variants[name]:
                # A new commit is expected to change hashes; the same commit is not.
                lines.append(f"~ {repo_id}: variant {name} hash changed")
        if a.requirement != b.requirement:
            lines.append(f"~ {repo_id}: requirement {_spec(a.requirement)} -> {_spec(b.requirement)}")
        lines += [f"~ {repo_id}: now depends on {d}" for d in b.dependencies if d not in a.dependencies]
        lines += [f"~ {repo_id}: no longer depends on {d}" for d in a.dependencies if d not in b.dependencies]
    return lines


def _describe(kernel: LockedKernel | None) -> str:
    if kernel is None:
        return ""
    return f"{kernel.version} ({kernel.sha[:12]})" if kernel.version else f"({kernel.sha[:12]})"


def _spec(requirement: str | None) -> str:
    return repr(requirement) if requirement is not None else "(none, transitive)"


def _parse_lock(data: list[Any], source: str, *, require_dependencies: bool) -> Lockfile:
    """Our format; without ``require_dependencies`` also kernels <= 0.16 entries."""
    kernels: list[LockedKernel] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(data):
        try:
            kernel = LockedKernel.from_dict(entry, require_dependencies=require_dependencies)
        except _FieldError as exc:
            repo_id = entry.get("repo_id") if isinstance(entry, dict) else None
            context = "" if _repo_id_problem(repo_id) else f" ({repo_id})"
            where = f"'[{i}]{exc.key}'{context}"
            raise LockfileError(f"{source}: {exc.detail} in {where}; {exc.expected}; {_FIX}") from None
        if kernel.repo_id in seen:
            raise LockfileError(
                f"{source}: duplicate repo_id {kernel.repo_id!r} in '[{seen[kernel.repo_id]}].repo_id' "
                f"and '[{i}].repo_id'; expected one entry per kernel; {_FIX}"
            )
        seen[kernel.repo_id] = i
        kernels.append(kernel)
    for i, (entry, kernel) in enumerate(zip(data, kernels)):
        for j, dep in enumerate(entry.get("dependencies", ())):
            if dep not in seen:
                raise LockfileError(
                    f"{source}: dependency {dep!r} in '[{i}].dependencies[{j}]' ({kernel.repo_id}) "
                    f"has no entry of its own in the lock; {_FIX}"
                )
    return Lockfile(kernels=tuple(kernels))


def _parse_kernels017(data: list[Any], source: str) -> dict[str, str]:
    """Pins of ``[{"dependency": {"repo-id", "version" | "revision"}, "lock": {"commit"}}]``."""
    pins: dict[str, str] = {}
    conflicting: set[str] = set()
    for i, entry in enumerate(data):
        try:
            repo_id, commit = _kernels017_pin(entry)
        except _FieldError as exc:
            raise LockfileError(
                f"{source}: {exc.detail} in '[{i}]{exc.key}' (kernels 0.17 lock); {exc.expected}; "
                "fix the entry, or delete the lock and run 'kernels lock'"
            ) from None
        if pins.setdefault(repo_id, commit) != commit:
            conflicting.add(repo_id)
    return {repo_id: commit for repo_id, commit in pins.items() if repo_id not in conflicting}


def _kernels017_pin(entry: Any) -> tuple[str, str]:
    """(repo id, commit) of one kernels 0.17 entry, checked as strictly as kernels 0.17 does."""
    _check_object(entry, "", ("dependency", "lock"), ("dependency", "lock"))
    dep = _check_object(entry["dependency"], ".dependency", ("repo-id", "version", "revision"), ("repo-id",))
    lock = _check_object(entry["lock"], ".lock", ("commit",), ("commit",))
    if reason := _repo_id_problem(dep["repo-id"]):
        raise _invalid(".dependency.repo-id", "repo id", dep["repo-id"], reason)
    if ("version" in dep) == ("revision" in dep):
        raise _FieldError(".dependency", "need exactly one of 'version' and 'revision'", "expected one of them")
    version = dep.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise _invalid(".dependency.version", "version", version, "expected a major version number")
    if not isinstance(dep.get("revision", "-"), str) or not dep.get("revision", "-"):
        raise _invalid(".dependency.revision", "revision", dep["revision"], "expected a branch, tag or commit")
    commit = lock["commit"]
    # kernels 0.17 accepts upper case and lower-cases it; SHA-256 object ids name no Hub commit.
    if not isinstance(commit, str) or not _SHA.fullmatch(commit.lower()):
        raise _invalid(".lock.commit", "commit", commit, "expected 40 hex characters (a full commit SHA)")
    return dep["repo-id"], commit.lower()


def _check_object(obj: Any, key: str, allowed: Sequence[str], required: Sequence[str]) -> dict[str, Any]:
    """``obj`` if it is a JSON object with only ``allowed`` keys and all ``required`` ones."""
    if not isinstance(obj, dict):
        raise _invalid(key, "value", obj, f"expected an object with {', '.join(allowed)}")
    for name in obj:
        if name not in allowed:
            expected = f"expected only {', '.join(allowed)}"
            raise _FieldError(f"{key}{_step(name)}", f"unknown key {_show.repr(name)}", expected)
    for name in required:
        if name not in obj:
            raise _FieldError(key, f"missing key {name!r}", f"expected {', '.join(required)}")
    return obj


def _load_list(text: str, source: str) -> list[Any]:
    """Decode JSON (rejecting duplicate keys) and require a list at the top level."""
    hint = "fix the file or rerun 'kernels lock'"
    try:
        data = json.loads(text, object_pairs_hook=lambda pairs: _no_duplicate_keys(pairs, source))
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}: {exc.msg}"
        raise LockfileError(f"{source}: not valid JSON ({where}); {hint}") from None
    except (ValueError, RecursionError) as exc:  # Python's own limits on numbers and nesting
        what = "nested too deeply" if isinstance(exc, RecursionError) else "a number too long"
        raise LockfileError(f"{source}: cannot be read ({what}); {hint}") from None
    if not isinstance(data, list):
        raise LockfileError(f"{source}: invalid top level {_show.repr(data)}; expected a JSON list of entries; {hint}")
    return data


def _no_duplicate_keys(pairs: list[tuple[str, Any]], source: str) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            duplicate = _show.repr(key)
            raise LockfileError(f"{source}: duplicate key {duplicate} in an object; expected each key once; {_FIX}")
        obj[key] = value
    return obj


def _repo_id_problem(value: object) -> str | None:
    """Why ``value`` is not a repo id (validate_repo_id's reason, minus its prefix), or None."""
    if not isinstance(value, str):  # never repr() an arbitrary JSON value in full
        return "expected a string 'org/name'"
    try:
        validate_repo_id(value)
    except InvalidRepoIdError as exc:
        return exc.message.removeprefix(f"invalid kernel repo id {value!r}: ")
    return None

"""The ``kernels.lock`` model and its strict parse; writing the file.

The format (docs/locking.md) is a JSON list sorted by ``repo_id``. Each rule of the format
is checked in one place:

- the records (:class:`VariantLock`, :class:`LockedKernel`, :class:`Lockfile`; a signer is a
  :class:`kernel_deps.trust.signers.VariantSigner`) own every rule about values: commit and
  hash formats, repo ids, variant names, non-empty text, no repeated or dangling
  dependency, one entry per kernel. They check when built, from a file or in code, and
  raise a :class:`kernel_deps.core.fields.FieldError` (a ``ValueError``) naming the key.
- the parse owns what only JSON can get wrong (through :mod:`kernel_deps.core.fields`): an
  entry that is not an object, unknown or missing keys, ``null`` for an absent key,
  duplicate keys, the text itself. One getter per field reads it and prefixes the path of
  every error it sees (``'[1].variants.x.hash'``), and :meth:`Lockfile.from_json` turns
  each into one :class:`LockfileError` line naming the file, the entry and the key.

A file is read (in whichever format) by :mod:`kernel_deps.lock.read`, and other tools'
entries by :mod:`kernel_deps.lock.formats`, through the helpers below; files are written
through :mod:`kernel_deps.core.atomicfile`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kernel_deps.core import atomicfile, jsondoc
from kernel_deps.core.errors import InvalidRepoIdError, LockfileError
from kernel_deps.core.fields import FieldError, brief, check_object, invalid, optional, per_name, step
from kernel_deps.core.hashing import HASH_TYPE
from kernel_deps.core.records import FrozenMap, Record, replaceable
from kernel_deps.core.settings import LOCK_NAME
from kernel_deps.core.spec import (
    MAX_MAJOR_DIGITS,
    InvalidEntry,
    KernelRequirement,
    requirement_from_value,
    show_value,
    validate_repo_id,
)
from kernel_deps.core.variants import MAX_NAME_LENGTH as MAX_VARIANT_NAME_LENGTH
from kernel_deps.trust.publishers import TRUSTED_BY_HUB, TRUSTED_BY_PROJECT
from kernel_deps.trust.signers import VariantSigner

__all__ = [
    "LockedKernel", "Lockfile", "VariantLock", "VariantSigner", "lock_path", "requirement_from_text", "write_lockfile",
]  # fmt: skip

COMMIT_SHA = re.compile(r"[0-9a-f]{40}")
_HASH = re.compile(r"sha256-[0-9a-f]{64}")
_VARIANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_ENTRY_KEYS = (
    "repo_id", "sha", "variants", "version", "requirement", "dependencies", "kernel_depends", "redirected_from",
    "trusted_by", "signatures",
)  # fmt: skip
_REQUIRED_KEYS = ("repo_id", "sha", "variants", "dependencies")
_VARIANT_KEYS = ("hash", "hash_type")
_FIX = "fix the entry or rerun 'kernels lock'"
# Compiled (by re's cache) on first use: a kernel_depends text.
_MAJOR_TEXT = rf"[0-9]{{1,{MAX_MAJOR_DIGITS}}}"
_REQUIREMENT_TEXT = "expected a requirement as kernel-depends states it: a PEP 440 range, a major like 1, or revision=REV"


_NO_SIGNERS: Mapping[str, VariantSigner] = FrozenMap(())


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


def repo_id_problem(value: object) -> str | None:
    """Why ``value`` is not a repo id (validate_repo_id's reason, minus its prefix), or None."""
    if not isinstance(value, str):  # never repr() an arbitrary JSON value in full
        return "expected a string 'org/name'"
    try:
        validate_repo_id(value)
    except InvalidRepoIdError as exc:
        return exc.message.removeprefix(f"invalid kernel repo id {show_value(value)}: ")
    return None


def requirement_from_text(repo_id: str, text: str) -> KernelRequirement:
    """The requirement on ``repo_id`` that a lock records as ``text`` (a requirement's
    ``text``: a PEP 440 range, a major ``1``, or ``revision=<rev>``); ValueError saying
    why when ``text`` is none of these."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("expected a non-empty string")
    if text.startswith("revision="):
        value: object = {"revision": text.removeprefix("revision=")}
    else:
        value = int(text) if re.fullmatch(_MAJOR_TEXT, text) else text
    try:
        return requirement_from_value(repo_id, value)
    except InvalidEntry as exc:
        raise ValueError(exc.problem) from None


# -- the records: each owns the rules about its values ------------------------------------


class VariantLock(Record):
    """The locked content hash of one build variant."""

    __slots__ = ("hash", "hash_type")
    hash: str
    hash_type: str

    def __init__(self, *, hash: str, hash_type: str = HASH_TYPE) -> None:
        self._init(hash, hash_type)
        if not isinstance(self.hash, str) or not _HASH.fullmatch(self.hash):
            raise invalid(".hash", "variant hash", self.hash, "expected 'sha256-' and 64 lowercase hex characters")
        if self.hash_type != HASH_TYPE:
            raise invalid(".hash_type", "hash type", self.hash_type, f"expected {HASH_TYPE!r}")

    @classmethod
    def from_dict(cls, raw: Any) -> VariantLock:
        """Build from a lock's JSON object; FieldError naming the bad key."""
        obj = check_object(raw, "", _VARIANT_KEYS, _VARIANT_KEYS)
        return cls(hash=obj["hash"], hash_type=obj["hash_type"])


@replaceable  # locking copies entries with dataclasses.replace (trust, signers)
class LockedKernel(Record):
    """One locked kernel: its commit, variant hashes, resolved version, spec and dependencies."""

    __slots__ = (
        "repo_id", "sha", "variants", "version", "requirement", "dependencies", "kernel_depends", "redirected_from",
        "trusted_by", "signatures",
    )  # fmt: skip
    repo_id: str
    sha: str
    variants: Mapping[str, VariantLock]
    version: str | None
    requirement: str | None
    dependencies: tuple[str, ...]
    # What this kernel requires of each of its dependencies (dependency repo id -> the
    # requirement texts its variants' kernel-depends state, the union over variants), so a
    # lock is checked against them offline. None: not recorded (a lock written before
    # kernel-deps recorded them); a kernel without dependencies records nothing, {}.
    kernel_depends: Mapping[str, tuple[str, ...]] | None
    # Repo ids pyproject.toml names that redirect here (their kernel-status.toml): this
    # entry is the lock's answer for them too.
    redirected_from: tuple[str, ...]
    # Why its publisher is trusted: "hub" (the Hub's trustedKernelPublisher flag for its
    # organization) or "pyproject:<entry>" (the [tool.kernels.trust] publishers entry, its
    # organization or its repo id, that allowed it). None: not recorded (an older lock).
    trusted_by: str | None
    # Variant name -> who signed its metadata.json, for each variant that is signed (kept
    # beside ``variants``, which the Hugging Face library up to 0.16 reads strictly).
    signatures: Mapping[str, VariantSigner]

    def __init__(
        self, *, repo_id: str, sha: str, variants: Mapping[str, VariantLock], version: str | None = None,
        requirement: str | None = None, dependencies: tuple[str, ...] = (),
        kernel_depends: Mapping[str, tuple[str, ...]] | None = None, redirected_from: tuple[str, ...] = (),
        trusted_by: str | None = None, signatures: Mapping[str, VariantSigner] = _NO_SIGNERS,
    ) -> None:  # fmt: skip
        self._init(repo_id, sha, variants, version, requirement, dependencies, kernel_depends, redirected_from,
                   trusted_by, signatures)  # fmt: skip
        self.__post_init__()  # each value checked, and normalized in place

    def __post_init__(self) -> None:
        if reason := repo_id_problem(self.repo_id):
            raise invalid(".repo_id", "repo id", self.repo_id, reason)
        if not isinstance(self.sha, str) or not COMMIT_SHA.fullmatch(self.sha):
            raise invalid(".sha", "commit", self.sha, "expected 40 lowercase hex characters (a full commit SHA)")
        if not isinstance(self.variants, Mapping):
            raise invalid(".variants", "variants", self.variants, "expected an object of variant name -> hash")
        for name, lock in self.variants.items():
            if not isinstance(name, str) or not _VARIANT.fullmatch(name) or len(name) > MAX_VARIANT_NAME_LENGTH:
                raise invalid(f".variants{step(name)}", "variant name", name,
                              f"expected a build variant folder name of at most {MAX_VARIANT_NAME_LENGTH} characters")
            if not isinstance(lock, VariantLock):
                raise invalid(f".variants{step(name)}", "variant lock", lock, "expected a VariantLock")
        for key in ("version", "requirement"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, str):
                raise invalid(f".{key}", key, value, "expected a string, or no key at all")
            if value is not None and not value.strip():
                raise invalid(f".{key}", key, value, "expected a non-empty string, or no key at all")
        if not isinstance(self.dependencies, (list, tuple, set, frozenset)):
            raise invalid(".dependencies", "dependencies", self.dependencies, "expected a list of repo ids")
        dependencies = tuple(self.dependencies)
        for index, dep in enumerate(dependencies):
            key = f".dependencies[{index}]"
            if reason := repo_id_problem(dep):
                raise invalid(key, "repo id", dep, reason)
            if dep == self.repo_id or dep in dependencies[:index]:
                raise invalid(key, "dependency", dep, "expected each other kernel once, not the kernel itself")
        object.__setattr__(self, "variants", FrozenMap(sorted(self.variants.items())))
        object.__setattr__(self, "dependencies", tuple(sorted(dependencies)))
        object.__setattr__(self, "kernel_depends", _checked_kernel_depends(self.kernel_depends, dependencies))
        if not isinstance(self.redirected_from, (list, tuple)):
            raise invalid(".redirected_from", "redirected_from", self.redirected_from, "expected a list of repo ids")
        sources = tuple(self.redirected_from)
        for index, source in enumerate(sources):
            if reason := repo_id_problem(source):
                raise invalid(f".redirected_from[{index}]", "repo id", source, reason)
            if source == self.repo_id or source in sources[:index]:
                raise invalid(f".redirected_from[{index}]", "repo id", source, "expected each other repo id once")
        object.__setattr__(self, "redirected_from", tuple(sorted(sources)))
        if self.trusted_by is not None and self.trusted_by not in (
            TRUSTED_BY_HUB, TRUSTED_BY_PROJECT + self.repo_id, TRUSTED_BY_PROJECT + self.repo_id.partition("/")[0]
        ):  # fmt: skip
            expected = f'expected "{TRUSTED_BY_HUB}", or "{TRUSTED_BY_PROJECT}" and its organization or its repo id'
            raise invalid(".trusted_by", "trusted_by", self.trusted_by, expected)
        if not isinstance(self.signatures, Mapping):
            raise invalid(".signatures", "signatures", self.signatures, "expected an object of variant name -> signer")
        for name, signer in self.signatures.items():
            if name not in self.variants:
                raise invalid(f".signatures{step(name)}", "variant", name, "expected a variant of this entry")
            if not isinstance(signer, VariantSigner):
                raise invalid(f".signatures{step(name)}", "signer", signer, "expected a VariantSigner")
        object.__setattr__(self, "signatures", FrozenMap(sorted(self.signatures.items())))

    @property
    def trusted_as(self) -> str | None:
        """The [tool.kernels.trust] publishers entry the lock relied on, or None (the Hub, or not recorded)."""
        if self.trusted_by is None or not self.trusted_by.startswith(TRUSTED_BY_PROJECT):
            return None
        return self.trusted_by[len(TRUSTED_BY_PROJECT):]

    @classmethod
    def from_dict(cls, raw: Any) -> LockedKernel:
        """Build from a lock entry's JSON object; FieldError naming the bad key."""
        entry = check_object(raw, "", _ENTRY_KEYS, _REQUIRED_KEYS)
        return cls(
            repo_id=entry["repo_id"],
            sha=entry["sha"],
            variants=_get_variants(entry),
            version=optional(entry, "version"),
            requirement=optional(entry, "requirement"),
            dependencies=entry["dependencies"],
            kernel_depends=optional(entry, "kernel_depends", "an object of dependency repo id -> requirements"),
            redirected_from=entry.get("redirected_from", ()),
            trusted_by=optional(entry, "trusted_by"),
            signatures=_get_signatures(entry),
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
        if self.kernel_depends:
            entry["kernel_depends"] = {dep: list(texts) for dep, texts in self.kernel_depends.items()}
        if self.redirected_from:
            entry["redirected_from"] = list(self.redirected_from)
        if self.trusted_by is not None:
            entry["trusted_by"] = self.trusted_by
        if self.signatures:
            entry["signatures"] = {name: signer.to_dict() for name, signer in self.signatures.items()}
        return entry


def _checked_kernel_depends(asks: Any, dependencies: tuple[str, ...]) -> Mapping[str, tuple[str, ...]] | None:
    """``asks`` (an entry's ``kernel_depends``) sorted and frozen, once it names each of
    ``dependencies`` exactly, each with distinct requirement texts; FieldError otherwise."""
    if asks is None:
        return FrozenMap(()) if not dependencies else None
    expected = "expected an object of dependency repo id -> list of requirements, one key per dependency"
    if not isinstance(asks, Mapping):
        raise invalid(".kernel_depends", "kernel_depends", asks, expected)
    checked: dict[str, tuple[str, ...]] = {}
    for dep, texts in asks.items():
        if not isinstance(dep, str):
            raise invalid(".kernel_depends", "kernel_depends", asks, expected)
        key = f".kernel_depends{step(dep)}"
        if dep not in dependencies:
            raise FieldError(key, f"requirement on {brief.repr(dep)}, which is not in dependencies", expected)
        if not isinstance(texts, (list, tuple)) or not texts:
            raise invalid(key, "requirements", texts, "expected a non-empty list of requirements")
        for index, text in enumerate(texts):
            try:
                requirement_from_text(dep, text)
            except ValueError:
                raise invalid(f"{key}[{index}]", "requirement", text, _REQUIREMENT_TEXT) from None
            if text in texts[:index]:
                raise invalid(f"{key}[{index}]", "requirement", text, "expected each requirement once")
        checked[dep] = tuple(sorted(texts))
    for dep in dependencies:
        if dep not in checked:
            raise FieldError(".kernel_depends", f"no requirement on the dependency {dep!r}", expected)
    return FrozenMap(sorted(checked.items()))


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

    def to_json(self) -> str:
        """The lock as written to disk: sorted, 2-space indent, trailing newline."""
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
    return atomicfile.write_text_if_changed(Path(path), lock.to_json())


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


def _get_variants(entry: dict[str, Any]) -> Any:
    """``entry["variants"]`` with each JSON object made a VariantLock, errors under ``.variants.<name>``."""
    return per_name(entry["variants"], "variants", VariantLock.from_dict)


def _get_signatures(entry: dict[str, Any]) -> Any:
    """``entry["signatures"]`` with each JSON object made a VariantSigner, errors under ``.signatures.<name>``."""
    raw = optional(entry, "signatures", "an object of variant name -> signer")
    return {} if raw is None else per_name(raw, "signatures", VariantSigner.from_dict)

"""One entry of ``kernels.lock``: a locked kernel, its variants' hashes, and its pin.

Each record (:class:`VariantLock`, :class:`LockedKernel`; a signer is a
:class:`kernel_deps.trust.signers.VariantSigner`) owns every rule about its values: commit
and hash formats, repo ids, variant names, non-empty text, no repeated dependency, the
requirements it records of each dependency. It checks them when built, from a file or in
code, and raises a :class:`kernel_deps.core.fields.FieldError` (a ``ValueError``) naming
the key; ``from_dict`` reads one entry's JSON object, what only JSON can get wrong checked
by :mod:`kernel_deps.core.fields`. :class:`LockedPin` is where an entry points (its commit
and the tag or branch it was locked under), the one pin type every layer above uses.

The whole lock, its file and the positions of errors in it are :mod:`kernel_deps.lock.model`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kernel_deps.core.fields import FieldError, brief, check_object, invalid, optional, per_name, step
from kernel_deps.core.hashing import HASH_TYPE
from kernel_deps.core.records import FrozenMap, Record, replaceable
from kernel_deps.core.spec import (
    MAX_MAJOR_DIGITS,
    InvalidEntry,
    KernelRequirement,
    repo_id_reason,
    requirement_from_value,
)
from kernel_deps.core.variants import MAX_NAME_LENGTH as MAX_VARIANT_NAME_LENGTH
from kernel_deps.trust.publishers import TRUSTED_BY_HUB, TRUSTED_BY_PROJECT
from kernel_deps.trust.signers import VariantSigner

__all__ = ["LockedKernel", "LockedPin", "VariantLock", "VariantSigner", "repo_id_problem", "requirement_from_text"]

COMMIT_SHA = re.compile(r"[0-9a-f]{40}")
_HASH = re.compile(r"sha256-[0-9a-f]{64}")
_VARIANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")

_ENTRY_KEYS = (
    "repo_id", "sha", "variants", "version", "requirement", "dependencies", "kernel_depends", "redirected_from",
    "trusted_by", "signatures",
)  # fmt: skip
_REQUIRED_KEYS = ("repo_id", "sha", "variants", "dependencies")
_VARIANT_KEYS = ("hash", "hash_type")
# Compiled (by re's cache) on first use: a kernel_depends text.
_MAJOR_TEXT = rf"[0-9]{{1,{MAX_MAJOR_DIGITS}}}"
_REQUIREMENT_TEXT = "expected a requirement as kernel-depends states it: a PEP 440 range, a major like 1, or revision=REV"


_NO_SIGNERS: Mapping[str, VariantSigner] = FrozenMap(())


def repo_id_problem(value: object) -> str | None:
    """Why ``value`` is not a repo id (validate_repo_id's reason), or None."""
    if not isinstance(value, str):  # never repr() an arbitrary JSON value in full
        return "expected a string 'org/name'"
    return repo_id_reason(value)


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


class LockedPin(Record):
    """Where a lock entry points: its commit, and the tag or branch it was locked under (None: a
    commit pin, or not recorded). A prior lock's pins are what a relock offers first."""

    __slots__ = ("commit", "version")
    commit: str
    version: str | None

    def __init__(self, commit: str, version: str | None = None) -> None:
        self._init(commit, version)

    @classmethod
    def of(cls, kernel: LockedKernel) -> LockedPin:
        """The pin of a lock entry."""
        return cls(kernel.sha, kernel.version)

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "commit": self.commit}


# -- the parse of one entry's JSON object: each per-variant value under its name --------------


def _get_variants(entry: dict[str, Any]) -> Any:
    """``entry["variants"]`` with each JSON object made a VariantLock, errors under ``.variants.<name>``."""
    return per_name(entry["variants"], "variants", VariantLock.from_dict)


def _get_signatures(entry: dict[str, Any]) -> Any:
    """``entry["signatures"]`` with each JSON object made a VariantSigner, errors under ``.signatures.<name>``."""
    raw = optional(entry, "signatures", "an object of variant name -> signer")
    return {} if raw is None else per_name(raw, "signatures", VariantSigner.from_dict)

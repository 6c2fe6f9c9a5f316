"""Kernel versions: turning a repo's git refs into ordered candidate versions.

Two conventions coexist on the Hub: tags ``vX.Y.Z`` (or ``vX.Y``) carry PEP 440 versions,
and branches ``vN`` track the newest release of major ``N``. Other refs (``main``,
feature branches, odd tags) are not versions and are ignored here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable, Literal

from kernel_deps.core.records import Record

if TYPE_CHECKING:  # packaging is imported where a version is parsed: a lock's vN branch is judged without it
    from packaging.version import Version

    from kernel_deps.core.spec import KernelRequirement

RefKind = Literal["tag", "branch"]

# vX.Y or vX.Y.Z, optionally followed by PEP 440 pre/post/dev segments (v2.0.0rc1).
# Compiled (by re's cache) on first use: a lock of vN branches never needs it.
_TAG = r"^v(\d+\.\d+(?:\.\d+)?(?:[-._]?(?:a|b|c|rc|alpha|beta|pre|preview|post|dev)\.?\d*)*)$"
# ASCII digits only: \d also takes other scripts' digits, which name no version packaging parses.
_MAJOR_BRANCH = re.compile(r"^v([0-9]+)$")
# A branch's major longer than this is not a version (far beyond any requirement's).
MAX_REF_DIGITS = 100


class GitRef(Record):
    """A branch or tag of a repo and the commit it points at."""

    __slots__ = ("name", "kind", "commit")
    name: str
    kind: RefKind
    commit: str

    def __init__(self, name: str, kind: RefKind, commit: str) -> None:
        self._init(name, kind, commit)


class KernelVersion(Record):
    """A ref that names a version: a ``vX.Y.Z`` tag or a ``vN`` major branch."""

    __slots__ = ("ref", "version")
    ref: GitRef
    version: Version

    def __init__(self, ref: GitRef, version: Version) -> None:
        self._init(ref, version)

    @property
    def is_branch(self) -> bool:
        """True for a ``vN`` major branch."""
        return self.ref.kind == "branch"

    @property
    def sort_key(self) -> tuple[Version, int]:
        """Newest-last ordering; a ``vN`` branch sorts above every ``vN.*`` tag."""
        from packaging.version import Version

        if self.is_branch:
            return (Version(f"{self.version.major}.99999999"), 1)
        return (self.version, 0)


def parse_version_ref(ref: GitRef) -> KernelVersion | None:
    """The version a ref names, or None when the ref is not a version."""
    from packaging.version import InvalidVersion, Version

    if ref.kind == "branch":
        major = _branch_major(ref)
        return KernelVersion(ref, Version(str(major))) if major is not None else None
    match = re.match(_TAG, ref.name)
    if not match:
        return None
    try:
        version = Version(match.group(1))
    except (InvalidVersion, ValueError):  # ValueError: a number longer than Python converts
        return None
    return KernelVersion(ref, version)


def _branch_major(ref: GitRef) -> int | None:
    """N of a ``vN`` branch; None for any other ref, and for a number too long to be a
    major (a ref name is the Hub's answer: Python refuses to convert thousands of digits)."""
    match = _MAJOR_BRANCH.match(ref.name) if ref.kind == "branch" else None
    if match is None or len(match.group(1)) > MAX_REF_DIGITS:
        return None
    return int(match.group(1))


def versions_from_refs(refs: Iterable[GitRef]) -> list[KernelVersion]:
    """Every version among ``refs``, newest first."""
    found = [v for v in map(parse_version_ref, refs) if v is not None]
    return sorted(found, key=lambda v: v.sort_key, reverse=True)


def default_requirement(found: list[KernelVersion]) -> str | int | None:
    """What ``kernels add ORG/NAME`` writes when no range is given.

    The newest final tag ``vX.Y.Z`` gives ``">=X.Y.Z,<X+1"`` (a new major may break the
    API); a repo with only ``vN`` branches gives the major ``N``; None when there are no
    versions at all.
    """
    tags = [v for v in found if not v.is_branch and not v.version.is_prerelease]
    if tags:
        newest = max(tags, key=lambda v: v.version)
        return f">={newest.version},<{newest.version.major + 1}"
    branches = [v for v in found if v.is_branch]
    return max(branches, key=lambda v: v.version).version.major if branches else None


def locked_ref(name: str | None, commit: str) -> GitRef | None:
    """The ref a lock recorded for ``commit``: ``vN`` names a major branch, anything else a
    tag or revision name; None when the lock recorded no name."""
    if not name:
        return None
    return GitRef(name, "branch" if _MAJOR_BRANCH.match(name) else "tag", commit)


def satisfies(requirement: KernelRequirement, commit: str, refs: Iterable[GitRef]) -> bool:
    """The one rule: whether ``commit``, named by ``refs``, meets ``requirement``.

    A revision is met by that commit or a ref of that name; a major ``N`` by the ``vN``
    branch or a final ``vN.*`` tag; a range by a tag whose version it allows. Only the refs
    given count: for a locked kernel, the name the lock recorded (and, while resolving, the
    refs that point at the commit now), never where a branch or tag has moved since.
    """
    refs = tuple(refs)
    if requirement.revision is not None:
        return requirement.revision == commit or any(ref.name == requirement.revision for ref in refs)
    for ref in refs:
        if ref.kind == "branch":  # a vN branch meets the major N only, judged without packaging
            if requirement.major is not None and _branch_major(ref) == requirement.major:
                return True
            continue
        version = parse_version_ref(ref)
        if version is not None and requirement.allows(version.version):
            return True
    return False

"""A resolution's candidates: the commits of a kernel repo, each with the refs naming it.

Built from a repo's refs listing (:func:`candidates_for`), best version first; whether a
candidate meets a requirement is :func:`kernel_deps.core.versions.satisfies` through the
refs that name it (:func:`matches`), and the tag or branch a lock records for the one
chosen is :func:`version_name`'s.
"""

from __future__ import annotations

from typing import Sequence

from packaging.version import Version

from kernel_deps.core.records import Record
from kernel_deps.core.spec import KernelRequirement
from kernel_deps.core.versions import GitRef, KernelVersion, locked_ref, parse_version_ref, satisfies

_FULL_SHA_LENGTH = 40


class Candidate(Record):
    """One commit of a kernel repo and the refs pointing at it."""

    __slots__ = ("repo_id", "commit", "refs")
    repo_id: str
    commit: str
    refs: tuple[GitRef, ...]

    def __init__(self, repo_id: str, commit: str, refs: tuple[GitRef, ...]) -> None:
        self._init(repo_id, commit, refs)
    @property
    def versions(self) -> list[KernelVersion]:
        """The version refs at this commit, newest first."""
        found = [v for v in map(parse_version_ref, self.refs) if v is not None]
        return sorted(found, key=lambda v: v.sort_key, reverse=True)

    @property
    def label(self) -> str:
        """How people name this candidate: its newest version tag or branch, else the commit."""
        tags = [v for v in self.versions if not v.is_branch]
        best = tags[0] if tags else (self.versions[0] if self.versions else None)
        return str(best.version) if best else self.commit[:12]

    @property
    def ref_name(self) -> str:
        """Its newest version tag (``v1.2.0``), else branch (``v1``), else the short commit."""
        tags = [v for v in self.versions if not v.is_branch]
        best = tags[0] if tags else (self.versions[0] if self.versions else None)
        return best.ref.name if best else self.commit[:12]


def is_commit(revision: str) -> bool:
    return len(revision) == _FULL_SHA_LENGTH and all(c in "0123456789abcdef" for c in revision)


def candidates_for(repo_id: str, refs: Sequence[GitRef]) -> list[Candidate]:
    """Every commit that a ref of ``repo_id`` points at, best version first."""
    by_commit: dict[str, list[GitRef]] = {}
    for ref in refs:
        by_commit.setdefault(ref.commit, []).append(ref)
    found = [Candidate(repo_id, commit, tuple(sorted(rs, key=lambda r: (r.kind, r.name)))) for commit, rs in by_commit.items()]
    return sorted(found, key=candidate_order, reverse=True)


def candidate_order(candidate: Candidate) -> tuple:
    versions = candidate.versions
    if not versions:
        return (0, Version("0"), candidate.commit)
    final = [v for v in versions if not v.version.is_prerelease]
    return (1 if final else 0.5, versions[0].sort_key[0], candidate.commit)


def matches(requirement: KernelRequirement, candidate: Candidate) -> bool:
    """Whether ``candidate`` satisfies ``requirement``, through the refs that name it."""
    return satisfies(requirement, candidate.commit, candidate.refs)


def version_name(
    candidate: Candidate, requirements: Sequence[KernelRequirement], recorded: str | None = None
) -> str | None:
    """The tag or branch the lock records for ``candidate``, given what required it.

    ``recorded``, the name a prior lock gave this commit, is kept while it still
    satisfies every requirement: a relock that keeps the commit keeps its name too.
    """
    ref = locked_ref(recorded, candidate.commit)
    if ref is not None and all(satisfies(req, candidate.commit, (ref,)) for req in requirements):
        return recorded
    for req in requirements:
        if req.revision is not None and not is_commit(req.revision):
            return req.revision
    majors = {req.major for req in requirements if req.major is not None}
    if len(majors) == 1 and all(req.major is not None for req in requirements):
        branch = f"v{majors.pop()}"
        if any(r.kind == "branch" and r.name == branch for r in candidate.refs):
            return branch
    ranges = [req for req in requirements if req.specifier is not None]
    for version in candidate.versions:
        if not version.is_branch and all(req.allows(version.version) for req in ranges):
            return version.ref.name
    return candidate.versions[0].ref.name if candidate.versions else None

"""Resolving kernel requirements to commits with resolvelib.

The provider only adapts: candidates are commits of a repo (with the refs that name
them), built from the repo's refs listing; whether a commit meets a requirement is
:func:`kernel_deps.versions.satisfies`, the rule ``kernels verify`` applies to the lock.

A locked pin is a candidate of its own, offered first: the locked commit with the ref
name the lock recorded, whether or not that branch or tag still points at it. So a pin
moves only when it no longer satisfies the requirement, or when ``--upgrade`` /
``--upgrade-package`` drops it. A conflict is raised as
:class:`~kernel_deps.errors.ResolutionError` listing who required what.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from packaging.version import Version
from resolvelib import AbstractProvider, BaseReporter, ResolutionImpossible, Resolver
from resolvelib.resolvers import RequirementInformation

from kernel_deps.errors import ResolutionError, RevisionNotFoundError, UsageError
from kernel_deps.spec import KernelRequirement
from kernel_deps.versions import GitRef, KernelVersion, locked_ref, parse_version_ref, satisfies, versions_from_refs

if TYPE_CHECKING:  # the index imports the Hub client; reading a lock needs neither
    from kernel_deps.index import KernelIndex

_FULL_SHA_LENGTH = 40


@dataclass(frozen=True, slots=True)
class Candidate:
    """One commit of a kernel repo and the refs pointing at it."""

    repo_id: str
    commit: str
    refs: tuple[GitRef, ...]

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


@dataclass(frozen=True, slots=True)
class Pin:
    """A kernel's commit in the prior lock, and the tag or branch name it recorded."""

    commit: str
    version: str | None = None


@dataclass(frozen=True, slots=True)
class Resolution:
    """The pinned candidate of every kernel and what required it."""

    pins: dict[str, Candidate]
    requirements: dict[str, tuple[KernelRequirement, ...]]
    dependencies: dict[str, tuple[str, ...]]


def _is_commit(revision: str) -> bool:
    return len(revision) == _FULL_SHA_LENGTH and all(c in "0123456789abcdef" for c in revision)


def candidates_for(repo_id: str, refs: Sequence[GitRef]) -> list[Candidate]:
    """Every commit that a ref of ``repo_id`` points at, best version first."""
    by_commit: dict[str, list[GitRef]] = {}
    for ref in refs:
        by_commit.setdefault(ref.commit, []).append(ref)
    found = [Candidate(repo_id, commit, tuple(sorted(rs, key=lambda r: (r.kind, r.name)))) for commit, rs in by_commit.items()]
    return sorted(found, key=_candidate_order, reverse=True)


def _candidate_order(candidate: Candidate) -> tuple:
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
        if req.revision is not None and not _is_commit(req.revision):
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


class KernelProvider(AbstractProvider):
    """resolvelib adapter: identifiers are repo ids, candidates commits."""

    def __init__(self, index: KernelIndex, pins: Mapping[str, Pin]) -> None:
        self.index = index
        self.pins = dict(pins)

    def identify(self, requirement_or_candidate: KernelRequirement | Candidate) -> str:
        return requirement_or_candidate.repo_id

    def get_preference(self, identifier, resolutions, candidates, information, backtrack_causes) -> tuple:
        requirements = [info.requirement for info in information[identifier]]
        pinned_by_revision = any(r.revision is not None for r in requirements)
        in_conflict = any(cause.requirement.repo_id == identifier for cause in backtrack_causes)
        return (not pinned_by_revision, not in_conflict, identifier)

    def find_matches(self, identifier: str, requirements, incompatibilities) -> list[Candidate]:
        wanted = list(requirements[identifier])
        excluded = {c.commit for c in incompatibilities[identifier]}
        found = [c for c in self._all_candidates(identifier, wanted) if c.commit not in excluded]
        return [c for c in found if all(matches(r, c) for r in wanted)]

    def is_satisfied_by(self, requirement: KernelRequirement, candidate: Candidate) -> bool:
        return matches(requirement, candidate)

    def get_dependencies(self, candidate: Candidate) -> Iterable[KernelRequirement]:
        try:
            requirements = self.index.dependencies(candidate.repo_id, candidate.commit)
        except RevisionNotFoundError:
            pin = self.pins.get(candidate.repo_id)
            if pin is None or pin.commit != candidate.commit:
                raise
            raise ResolutionError(
                f"{candidate.repo_id}: the locked commit {pin.commit[:12]} ({pin.version or 'no version'}) is no "
                "longer on the Hub (history rewritten?); run "
                f"'kernels lock --upgrade-package {candidate.repo_id}' to pin a commit that exists"
            ) from None
        self.index.prefetch(requirements, self.likely_pick)
        return requirements

    def likely_pick(self, requirement: KernelRequirement) -> str | None:
        """The commit the resolver would most likely choose for ``requirement`` alone."""
        found = [c for c in self._all_candidates(requirement.repo_id, [requirement]) if matches(requirement, c)]
        return found[0].commit if found else None

    def _all_candidates(self, repo_id: str, wanted: Sequence[KernelRequirement]) -> list[Candidate]:
        """The pinned commit first (named as the lock recorded it), then every commit a ref
        points at, newest first, then full SHAs asked for by revision."""
        refs = self.index.refs(repo_id).refs
        found = candidates_for(repo_id, refs)
        pin = self.pins.get(repo_id)
        if pin is not None:
            live = next((c for c in found if c.commit == pin.commit), None)
            recorded = locked_ref(pin.version, pin.commit)
            named = set(live.refs if live else ()) | ({recorded} if recorded else set())
            pinned = Candidate(repo_id, pin.commit, tuple(sorted(named, key=lambda r: (r.kind, r.name))))
            found = [pinned] + [c for c in found if c.commit != pin.commit]
        known = {c.commit for c in found}
        for req in wanted:
            # A full commit SHA that no ref points at is still a candidate.
            if req.revision is not None and _is_commit(req.revision) and req.revision not in known:
                found.append(Candidate(repo_id, req.revision, ()))
                known.add(req.revision)
        return found


def resolve(
    requirements: Sequence[KernelRequirement],
    index: KernelIndex,
    *,
    pins: Mapping[str, Pin] | None = None,
    max_rounds: int = 2000,
) -> Resolution:
    """Pin every requirement and its transitive kernel dependencies to a commit."""
    provider = KernelProvider(index, pins or {})
    index.prefetch(requirements, provider.likely_pick)
    try:
        result = Resolver(provider, BaseReporter()).resolve(requirements, max_rounds=max_rounds)
    except ResolutionImpossible as exc:
        raise ResolutionError(explain_conflict(exc.causes, index)) from None
    pins_out: dict[str, Candidate] = dict(result.mapping)
    required: dict[str, tuple[KernelRequirement, ...]] = {
        key: tuple(info.requirement for info in criterion.information) for key, criterion in result.criteria.items()
    }
    dependencies = {
        key: tuple(sorted(c for c in result.graph.iter_children(key) if c is not None and c != key)) for key in pins_out
    }
    return Resolution(pins_out, required, dependencies)


def _cause_line(info: RequirementInformation) -> str:
    parent = "project" if info.parent is None else f"{info.parent.repo_id} {info.parent.label}"
    return f"{info.requirement.describe()} (from {parent})"


def explain_conflict(causes: Sequence[RequirementInformation], index: KernelIndex) -> str:
    """One readable message: each requirement with who asked for it, and what exists."""
    lines = ["cannot find versions that satisfy every requirement:"]
    lines += [f"  {_cause_line(info)}" for info in causes]
    for repo_id in sorted({info.requirement.repo_id for info in causes}):
        try:
            refs = index.refs(repo_id).refs
        except Exception:  # noqa: BLE001 - the conflict is the news; availability is a hint
            continue
        versions = versions_from_refs(refs)
        tags = ", ".join(v.ref.name for v in versions if not v.is_branch) or "none"
        branches = ", ".join(v.ref.name for v in versions if v.is_branch)
        lines.append(f"  versions of {repo_id}: {tags}" + (f" (branches {branches})" if branches else ""))
    lines.append("hint: relax one of these ranges in [tool.kernels.dependencies]")
    return "\n".join(lines)


def reject_unknown_upgrades(upgrade_packages: Iterable[str], known: Iterable[str]) -> None:
    """``--upgrade-package`` must name a kernel of the project or its lock."""
    known = set(known)
    for repo_id in upgrade_packages:
        if repo_id not in known:
            raise UsageError(f"--upgrade-package {repo_id}: not a kernel of this project or its lock")


"""Why a resolution failed, as records: a version conflict (who required what, the versions
that exist), a kernel whose versions in range all miss a declared target, or one whose
versions in range are all refused for their signatures.

resolvelib gives the causes as ``(requirement, parent)`` pairs and formats nothing; these
functions turn them into :class:`~kernel_deps.core.errors.ResolutionError` (or
:class:`~kernel_deps.core.errors.SignatureError`) records, worded for who asked
(:class:`Requester`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from resolvelib.resolvers import RequirementInformation

from kernel_deps.core.errors import ConflictCause, OfferedVersions, ResolutionError, SignatureError, UnservedCandidate
from kernel_deps.core.records import Record
from kernel_deps.core.versions import versions_from_refs
from kernel_deps.resolve.candidates import candidate_order, matches

if TYPE_CHECKING:
    from kernel_deps.hub.index import KernelIndex
    from kernel_deps.resolve.resolver import KernelProvider


class Requester(Record):
    """Who asked for the top-level requirements, for messages: its name beside them, and
    what to change when they cannot be met (or the search runs too long)."""

    __slots__ = ("name", "relax", "narrow")
    name: str
    relax: str
    narrow: str

    def __init__(self, name: str, relax: str, narrow: str) -> None:
        self._init(name, relax, narrow)


PROJECT = Requester(
    "project",
    "relax one of these ranges in [tool.kernels.dependencies]",
    "narrow a version range in [tool.kernels.dependencies] to help; kernels.lock was not changed",
)


def explain_unsigned(causes: Sequence[RequirementInformation], provider: KernelProvider) -> SignatureError | None:
    """The error for a kernel whose every version in range (serving the targets) is refused
    for its signatures: the newest one's refusal; None when that is not why resolution failed."""
    if provider.signed is None:
        return None
    for repo_id in sorted({info.requirement.repo_id for info in causes}):
        wanted = [info.requirement for info in causes if info.requirement.repo_id == repo_id]
        allowed = [c for c in provider.all_candidates(repo_id, wanted) if all(matches(r, c) for r in wanted)]
        refused = [c for c in allowed if not provider.judged(c) and provider.refused_before(c)]
        if allowed and refused and all(provider.judged(c) or provider.refused_before(c) for c in allowed):
            newest = max(refused, key=candidate_order)
            return SignatureError(
                f"kernels.lock not written: no version of {repo_id} in range is signed as the project requires; "
                f"the newest, {newest.ref_name}: {provider.refused_before(newest)}"
            )
    return None


def explain_unserved_targets(
    causes: Sequence[RequirementInformation], provider: KernelProvider
) -> ResolutionError | None:
    """The error for a kernel whose versions in range all miss a declared target, with each
    of those versions as a record (newest first); None when the failure is a plain version
    conflict."""
    by_repo: dict[str, list[RequirementInformation]] = {}
    for info in causes:
        by_repo.setdefault(info.requirement.repo_id, []).append(info)
    for repo_id, infos in sorted(by_repo.items()):
        wanted = [info.requirement for info in infos]
        allowed = [c for c in provider.all_candidates(repo_id, wanted) if all(matches(r, c) for r in wanted)]
        if not allowed or any(not provider.missing(c) for c in allowed):
            continue
        allowed.sort(key=candidate_order, reverse=True)  # newest first, a prior pin among them
        # Judging each one listed its tree (memoised): no new request.
        trees = [provider.index.tree(repo_id, c.commit) for c in allowed]
        candidates = [
            UnservedCandidate(c.ref_name, c.commit, provider.missing(c), tuple(sorted(tree.files)))
            for c, tree in zip(allowed, trees)
        ]
        hint = (
            "remove the target from [tool.kernels] targets in pyproject.toml, "
            f"or allow a version of {repo_id} that has a build for it; kernels.lock was not changed"
        )
        asked = [conflict_cause(info) for info in infos]
        return ResolutionError.targets_unserved(repo_id, asked, candidates, hint=hint)
    return None


def conflict_cause(info: RequirementInformation) -> ConflictCause:
    """resolvelib's ``(requirement, parent)`` as a record."""
    parent = info.parent
    return ConflictCause(
        repo_id=info.requirement.repo_id,
        requirement=info.requirement.text,
        shown=info.requirement.describe(),
        required_by=parent.repo_id if parent is not None else None,
        required_by_version=parent.label if parent is not None else None,
    )


def explain_conflict(
    causes: Sequence[RequirementInformation], index: KernelIndex, requester: Requester = PROJECT
) -> ResolutionError:
    """The conflict as records: each requirement with who asked for it, and what exists; or,
    when a revision asked for names nothing in its repo, that alone (:func:`_missing_revision`)."""
    missing = _missing_revision(causes, index)
    if missing is not None:
        return missing
    offered = []
    for repo_id in sorted({info.requirement.repo_id for info in causes}):
        try:
            refs = index.refs(repo_id).refs
        except Exception:  # noqa: BLE001 - the conflict is the news; availability is a hint
            continue
        versions = versions_from_refs(refs)
        tags = tuple(v.ref.name for v in versions if not v.is_branch)
        branches = tuple(v.ref.name for v in versions if v.is_branch)
        offered.append(OfferedVersions(repo_id, tags, branches))
    return ResolutionError.conflict(
        [conflict_cause(info) for info in causes], offered, requester=requester.name, hint=requester.relax
    )


def _missing_revision(causes: Sequence[RequirementInformation], index: KernelIndex) -> ResolutionError | None:
    """The error for a ``revision`` no branch or tag of its repo is named and that is no full
    commit (``@v9.9.9``, a short commit): that is why nothing satisfies it, whatever else is
    asked; None when every revision asked names something."""
    import re

    for info in causes:
        requirement = info.requirement
        revision = requirement.revision
        if revision is None or re.fullmatch(r"[0-9a-f]{40}", revision):
            continue
        try:
            refs = index.refs(requirement.repo_id).refs
        except Exception:  # noqa: BLE001 - the refs unread, the conflict is told as it is
            continue
        if revision in {ref.name for ref in refs}:
            continue
        asker = "" if info.parent is None else f" (asked by {info.parent.repo_id} {info.parent.label})"
        versions = versions_from_refs(refs)
        tags = ", ".join(v.ref.name for v in versions if not v.is_branch) or "none"
        branches = ", ".join(v.ref.name for v in versions if v.is_branch)
        hint = None
        if re.fullmatch(r"[0-9a-f]{4,39}", revision):  # a short commit: the full one, when a ref points at it
            hint = _full_commit_hint(revision, refs)
        return ResolutionError(
            f"no branch, tag or full commit '{revision}' in {requirement.repo_id}{asker}; "
            f"its versions: {tags}{f' (branches {branches})' if branches else ''}",
            hint=hint,
        )
    return None


def _full_commit_hint(prefix: str, refs) -> str:
    """What to give instead of the short commit ``prefix``: the full commit it starts, when a
    branch or tag the Hub lists points at one (each named), else the rule."""
    found: dict[str, list[str]] = {}
    for ref in refs:
        if ref.commit.startswith(prefix):
            found.setdefault(ref.commit, []).append(ref.name)
    if len(found) == 1:
        ((commit, names),) = found.items()
        return f"give the full commit: '{prefix}' is the start of {commit} ({', '.join(sorted(names))})"
    if found:
        return f"give the full commit: '{prefix}' is the start of {' and of '.join(sorted(found))}"
    return "give the full commit, 40 hex digits (no branch or tag points at one starting with it)"

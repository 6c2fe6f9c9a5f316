"""Resolving kernel requirements to commits with resolvelib.

The provider only adapts: candidates are commits of a repo (with the refs that name
them), built from the repo's refs listing; whether a commit meets a requirement is
:func:`kernel_deps.core.versions.satisfies`, the rule ``kernels verify`` applies to the lock.

A locked pin (:class:`kernel_deps.lock.entries.LockedPin`) is a candidate of its own,
offered first: the locked commit with the ref name the lock recorded, whether or not that
branch or tag still points at it. So a pin
moves only when it no longer satisfies the requirement, or when ``--upgrade`` /
``--upgrade-package`` drops it. A conflict is raised as
:class:`~kernel_deps.core.errors.ResolutionError` carrying resolvelib's causes as records
(who required what, the versions that exist) and its message told from them.

With deployment targets declared (:mod:`kernel_deps.core.targets`), a candidate is acceptable
only when its variants serve every target. Candidates are then judged lazily, in order,
so only the trees of the commits the resolver reaches are listed; the ones passed over
are kept, to say why a kernel was held back (``Resolution.held_back``) or, when no
version in range serves a target, what the newest ones offer.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

from resolvelib import AbstractProvider, BaseReporter, ResolutionImpossible, ResolutionTooDeep
from resolvelib.resolvers import Resolution as Search

from kernel_deps.core.errors import ResolutionError, RevisionNotFoundError, UsageError
from kernel_deps.core.records import Record
from kernel_deps.core.spec import KernelRequirement
from kernel_deps.core.targets import Target, missing_targets
from kernel_deps.core.versions import locked_ref
from kernel_deps.lock.entries import LockedPin
from kernel_deps.resolve.candidates import Candidate, candidates_for, is_commit, matches
from kernel_deps.resolve.explain import PROJECT, Requester, explain_conflict, explain_unserved_targets, explain_unsigned

if TYPE_CHECKING:  # the index imports the Hub client; reading a lock needs neither
    from kernel_deps.hub.index import KernelIndex

__all__ = ["KernelProvider", "Resolution", "reject_unknown_upgrades", "resolve"]

T = TypeVar("T")


class Resolution(Record):
    """The pinned candidate of every kernel and what required it."""

    __slots__ = ("pins", "requirements", "dependencies", "held_back", "held_back_unsigned")
    pins: dict[str, Candidate]
    requirements: dict[str, tuple[KernelRequirement, ...]]
    dependencies: dict[str, tuple[str, ...]]
    # Per kernel, the better candidates passed over because they lack a build for a
    # declared target, best first, each with the names of the targets it misses.
    held_back: dict[str, tuple[tuple[Candidate, tuple[str, ...]], ...]]
    # Per kernel, the better candidates passed over (with targets declared) because a build
    # is not signed as the project requires, best first, each with why.
    held_back_unsigned: dict[str, tuple[tuple[Candidate, str], ...]]

    def __init__(
        self, pins: dict[str, Candidate], requirements: dict[str, tuple[KernelRequirement, ...]],
        dependencies: dict[str, tuple[str, ...]],
        held_back: dict[str, tuple[tuple[Candidate, tuple[str, ...]], ...]] | None = None,
        held_back_unsigned: dict[str, tuple[tuple[Candidate, str], ...]] | None = None,
    ) -> None:  # fmt: skip
        self._init(pins, requirements, dependencies, {} if held_back is None else held_back,
                   {} if held_back_unsigned is None else held_back_unsigned)  # fmt: skip


class KernelProvider(AbstractProvider):
    """resolvelib adapter: identifiers are repo ids, candidates commits."""

    def __init__(
        self, index: KernelIndex, pins: Mapping[str, LockedPin], targets: Sequence[Target] = (),
        signed: Callable[[str, str], str | None] | None = None,
    ) -> None:  # fmt: skip
        self.index = index
        self.pins = dict(pins)
        self.targets = tuple(targets)
        # (repo_id, commit) -> why its builds are not signed as the project requires, or None:
        # asked only with targets, where an older signed version is taken instead.
        self.signed = signed if self.targets else None
        self._refused: dict[tuple[str, str], str | None] = {}
        # (repo_id, commit) -> names of the declared targets its variants do not serve.
        self._missing: dict[tuple[str, str], tuple[str, ...]] = {}
        self._missing_lock = threading.Lock()
        # (repo_id, commit) of candidates ruled out because a resolution pinned them
        # without meeting their own kernel-depends (see resolve()).
        self.ruled_out: set[tuple[str, str]] = set()

    def identify(self, requirement_or_candidate: KernelRequirement | Candidate) -> str:
        return requirement_or_candidate.repo_id

    def get_preference(self, identifier, resolutions, candidates, information, backtrack_causes) -> tuple:
        requirements = [info.requirement for info in information[identifier]]
        pinned_by_revision = any(r.revision is not None for r in requirements)
        in_conflict = any(cause.requirement.repo_id == identifier for cause in backtrack_causes)
        return (not pinned_by_revision, not in_conflict, identifier)

    def find_matches(
        self, identifier: str, requirements, incompatibilities
    ) -> list[Candidate] | Callable[[], Iterator[Candidate]]:
        wanted = list(requirements[identifier])
        excluded = {c.commit for c in incompatibilities[identifier]}
        found = [c for c in self.all_candidates(identifier, wanted)
                 if c.commit not in excluded and (identifier, c.commit) not in self.ruled_out]  # fmt: skip
        found = [c for c in found if all(matches(r, c) for r in wanted)]
        if not self.targets:
            return found
        # Lazily: a candidate's tree is listed only when the resolver reaches it.
        return lambda: (c for c in found if not self.missing(c) and not self.refusal(c))

    def refusal(self, candidate: Candidate) -> str | None:
        """Why ``candidate``'s builds are not signed as the project requires (judged once), or None."""
        if self.signed is None:
            return None
        key = (candidate.repo_id, candidate.commit)
        with self._missing_lock:
            if key in self._refused:
                return self._refused[key]
        found = self.signed(candidate.repo_id, candidate.commit)
        with self._missing_lock:
            self._refused[key] = found
        return found

    def refused_before(self, candidate: Candidate) -> str | None:
        """What :meth:`refusal` found for ``candidate``, or None when it was never judged or passed."""
        with self._missing_lock:
            return self._refused.get((candidate.repo_id, candidate.commit))

    def missing(self, candidate: Candidate) -> tuple[str, ...]:
        """The declared targets that no variant of ``candidate`` serves (its tree listed once)."""
        key = (candidate.repo_id, candidate.commit)
        with self._missing_lock:
            if key in self._missing:
                return self._missing[key]
        try:
            names = self.index.tree(candidate.repo_id, candidate.commit).files
        except RevisionNotFoundError:
            gone = self._pin_gone(candidate)
            if gone is None:
                raise
            raise gone from None
        found = tuple(t.name for t in missing_targets(self.targets, names))
        with self._missing_lock:
            self._missing[key] = found
        return found

    def judged(self, candidate: Candidate) -> tuple[str, ...] | None:
        """What :meth:`missing` found for ``candidate``, or None when it was never judged."""
        with self._missing_lock:
            return self._missing.get((candidate.repo_id, candidate.commit))

    def _pin_gone(self, candidate: Candidate) -> ResolutionError | None:
        pin = self.pins.get(candidate.repo_id)
        if pin is None or pin.commit != candidate.commit:
            return None
        return ResolutionError(
            f"{candidate.repo_id}: the locked commit {pin.commit[:12]} ({pin.version or 'no version'}) is no "
            "longer on the Hub (history rewritten?); run "
            f"'kernels lock --upgrade-package {candidate.repo_id}' to pin a commit that exists"
        )

    def is_satisfied_by(self, requirement: KernelRequirement, candidate: Candidate) -> bool:
        return matches(requirement, candidate)

    def get_dependencies(self, candidate: Candidate) -> Iterable[KernelRequirement]:
        try:
            requirements = self.index.dependencies(candidate.repo_id, candidate.commit)
        except RevisionNotFoundError:
            gone = self._pin_gone(candidate)
            if gone is None:
                raise
            raise gone from None
        self.index.prefetch(requirements, self.likely_pick)
        return requirements

    def likely_pick(self, requirement: KernelRequirement) -> str | None:
        """The commit the resolver would most likely choose for ``requirement`` alone."""
        found = (c for c in self.all_candidates(requirement.repo_id, [requirement]) if matches(requirement, c))
        if self.targets:
            found = (c for c in found if not self.missing(c) and not self.refusal(c))
        pick = next(found, None)
        return pick.commit if pick else None

    def all_candidates(self, repo_id: str, wanted: Sequence[KernelRequirement]) -> list[Candidate]:
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
            if req.revision is not None and is_commit(req.revision) and req.revision not in known:
                found.append(Candidate(repo_id, req.revision, ()))
                known.add(req.revision)
        return found


def resolve(
    requirements: Sequence[KernelRequirement],
    index: KernelIndex,
    *,
    pins: Mapping[str, LockedPin] | None = None,
    targets: Sequence[Target] = (),
    max_rounds: int = 2000,
    requester: Requester = PROJECT,
    signed: Callable[[str, str], str | None] | None = None,
    provider: KernelProvider | None = None,
) -> Resolution:
    """Pin every requirement and its transitive kernel dependencies to a commit; with
    ``targets``, only to commits whose variants serve every target and, given ``signed``
    ((repo id, commit) -> why its builds are not signed as the project requires, or None),
    whose builds are signed as it requires.

    ``provider``, made with those pins, targets and ``signed`` (which are then not given
    again), is one whose :meth:`KernelProvider.likely_pick` a caller already prefetches
    with (:func:`kernel_deps.resolve.session.resolve_in_memory`, while redirects are
    followed); its judgements are kept."""
    provider = provider or KernelProvider(index, pins or {}, targets, signed)
    index.prefetch(requirements, provider.likely_pick)
    while True:
        try:
            state = Search(provider, BaseReporter()).resolve(requirements, max_rounds=max_rounds)
        except ResolutionImpossible as exc:
            unserved = explain_unserved_targets(exc.causes, provider) if provider.targets else None
            if unserved is not None:
                raise unserved from None
            unsigned = explain_unsigned(exc.causes, provider)
            if unsigned is not None:
                raise unsigned from None
            raise explain_conflict(exc.causes, index, requester) from None
        except ResolutionTooDeep:
            asked = ", ".join(sorted({r.repo_id for r in requirements}))
            raise ResolutionError(
                f"no versions found for {asked} and their kernel dependencies within {max_rounds} rounds of "
                f"resolution (their kernel-depends keep undoing each other's choices); {requester.narrow}"
            ) from None
        # What resolvelib pinned is read again from the kernels' own kernel-depends, from
        # the project's requirements down: resolvelib can drop a pin's requirements while it
        # backtracks (a pin that stops satisfying a new requirement loses them, and they stay
        # lost once it satisfies again), and then answer with a kernel beside a dependency it
        # does not accept, or without it. Such a pin is ruled out and the search runs again;
        # each round rules out one more commit, so this ends.
        unmet, reached = _reached(requirements, state.mapping, index)
        if unmet is None:
            break
        provider.ruled_out.add((unmet.repo_id, unmet.commit))
    pins_out = {key: candidate for key, candidate in state.mapping.items() if key in reached}
    required = {key: tuple(found) for key, (found, _) in reached.items()}
    dependencies = {key: tuple(sorted(deps - {key})) for key, (_, deps) in reached.items()}
    held_back = {key: _held_back(provider, candidate, required.get(key, ())) for key, candidate in pins_out.items()}
    unsigned = {key: _held_back_unsigned(provider, c, required.get(key, ())) for key, c in pins_out.items()}
    return Resolution(pins_out, required, dependencies, {k: v for k, v in held_back.items() if v},
                      {k: v for k, v in unsigned.items() if v})  # fmt: skip


def _held_back_unsigned(
    provider: KernelProvider, chosen: Candidate, requirements: Sequence[KernelRequirement]
) -> tuple[tuple[Candidate, str], ...]:
    """The candidates ahead of ``chosen`` that meet ``requirements`` and serve every target but
    whose builds are not signed as the project requires."""
    if provider.signed is None:
        return ()
    return _passed_over(provider, chosen, requirements, provider.refused_before)


def _reached(
    requirements: Sequence[KernelRequirement], mapping: Mapping[str, Candidate], index: KernelIndex
) -> tuple[Candidate | None, dict[str, tuple[list[KernelRequirement], set[str]]]]:
    """The kernels the project's ``requirements`` reach through the kernel-depends of the
    ``mapping``'s pins, each with the requirements on it and the kernels it requires.

    The first pin (from the project down) requiring a kernel the mapping leaves out, or
    pins at a commit the requirement does not allow, comes first instead, with nothing.
    """
    reached: dict[str, tuple[list[KernelRequirement], set[str]]] = {}
    for requirement in requirements:
        reached.setdefault(requirement.repo_id, ([], set()))[0].append(requirement)
    order = list(reached)
    for key in order:  # grows as kernels are reached
        candidate = mapping[key]
        for requirement in index.dependencies(candidate.repo_id, candidate.commit):
            pinned = mapping.get(requirement.repo_id)
            if pinned is None or not matches(requirement, pinned):
                return candidate, {}
            if requirement.repo_id not in reached:
                order.append(requirement.repo_id)
            reached.setdefault(requirement.repo_id, ([], set()))[0].append(requirement)
            reached[key][1].add(requirement.repo_id)
    return None, reached


def _held_back(
    provider: KernelProvider, chosen: Candidate, requirements: Sequence[KernelRequirement]
) -> tuple[tuple[Candidate, tuple[str, ...]], ...]:
    """The candidates ahead of ``chosen`` that meet ``requirements`` but miss a target."""
    if not provider.targets:
        return ()
    return _passed_over(provider, chosen, requirements, provider.judged)


def _passed_over(
    provider: KernelProvider, chosen: Candidate, requirements: Sequence[KernelRequirement],
    why_not: Callable[[Candidate], T],
) -> tuple[tuple[Candidate, T], ...]:
    """Each candidate newer than ``chosen`` that meets ``requirements`` but that ``why_not``
    gives a reason against (newest first), with that reason."""
    passed: list[tuple[Candidate, T]] = []
    for candidate in provider.all_candidates(chosen.repo_id, requirements):
        if candidate.commit == chosen.commit:
            break
        why = why_not(candidate)
        if why and all(matches(r, candidate) for r in requirements):
            passed.append((candidate, why))
    return tuple(passed)


def reject_unknown_upgrades(upgrade_packages: Iterable[str], known: Iterable[str]) -> None:
    """``--upgrade-package`` must name a kernel of the project or its lock."""
    known = set(known)
    for repo_id in upgrade_packages:
        if repo_id not in known:
            raise UsageError(f"--upgrade-package {repo_id}: not a kernel of this project or its lock")

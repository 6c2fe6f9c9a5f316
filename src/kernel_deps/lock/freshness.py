"""Is a lock in sync with its project? The static check, no network.

``kernels lock --check`` (when no pin has to move), ``kernels verify`` and the build
hooks all ask this one question: is every ``[tool.kernels.dependencies]`` entry locked,
by an entry that satisfies it (:func:`kernel_deps.core.versions.satisfies`, the resolver's own
rule) and was locked for that same requirement, does every locked dependency still meet
what the kernels depending on it require of it (their ``kernel-depends``, as the lock
records them), and is every other entry still needed?
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from kernel_deps.core.records import FrozenMap, Record
from kernel_deps.core.settings import PYPROJECT_NAME
from kernel_deps.trust.signers import SignaturePolicy, describe_signer
from kernel_deps.core.spec import KernelRequirement
from kernel_deps.core.targets import Target, missing_targets
from kernel_deps.core.versions import locked_ref, parse_version_ref, satisfies
from kernel_deps.lock.entries import requirement_from_text
from kernel_deps.lock.model import LockedKernel, Lockfile

if TYPE_CHECKING:
    from kernel_deps.lock.read import LockRead
    from kernel_deps.project.record import Project


# What the project's policy asks of a lock (who may sign, who may publish): a lock that does
# not show it is refused by every consumer, ``sync --frozen`` and the loader included.
POLICY_KINDS = frozenset({"signature-missing", "signer-not-allowed", "trust-removed"})
# Whether the lock still agrees with pyproject.toml's requirements and targets.
AGREEMENT_KINDS = frozenset({"not-locked", "unsatisfied", "version-not-recorded", "requirement-changed", "removed",
                             "orphan", "target-not-served", "dependency-unsatisfied"})  # fmt: skip


class Problem(Record):
    """One way pyproject, lock, cache or Hub disagree: a kind (one of
    :data:`kernel_deps.lock.problem_text.KINDS`) and fields; ``facts`` hold what the kind's
    sentence names beyond them. The sentence is made when shown (:attr:`message`)."""

    __slots__ = ("kind", "repo_id", "variant", "path", "expected", "got", "facts")
    kind: str
    repo_id: str | None
    variant: str | None
    path: str | None
    expected: str | None
    got: str | None
    facts: FrozenMap

    def __init__(self, kind: str, repo_id: str | None, variant: str | None, path: str | None,
                 expected: str | None = None, got: str | None = None, **facts: Any) -> None:  # fmt: skip
        self._init(kind, repo_id, variant, path, expected, got, FrozenMap(facts.items()))

    @property
    def message(self) -> str:
        """The problem in words, complete on its own (:func:`kernel_deps.lock.problem_text.problem_text`)."""
        from kernel_deps.lock.problem_text import problem_text

        return problem_text(self)

    def to_dict(self) -> dict[str, Any]:
        """The problem as the JSON reports hold it (``message`` made from the kind and fields)."""
        return {"kind": self.kind, "repo_id": self.repo_id, "variant": self.variant, "path": self.path,
                "message": self.message, "expected": self.expected, "got": self.got}  # fmt: skip


class ProjectRules(Record):
    """What ``pyproject.toml`` asks of a lock, from one read: the requirements, the targets,
    the publishers it trusts and the signature policy."""

    __slots__ = ("source", "requirements", "targets", "publishers", "policy")
    source: str  # the pyproject.toml path, as messages name it
    requirements: tuple[KernelRequirement, ...]
    targets: tuple[Target, ...]
    publishers: tuple[str, ...]
    policy: SignaturePolicy

    def __init__(self, source: str, requirements: Sequence[KernelRequirement], targets: Sequence[Target],
                 publishers: Sequence[str], policy: SignaturePolicy) -> None:  # fmt: skip
        self._init(source, tuple(requirements), tuple(targets), tuple(publishers), policy)


def rules_from_table(text: str, kernels_table: dict[str, Any] | None,
                     requirements: Sequence[KernelRequirement] | None, project_dir: Path) -> ProjectRules:  # fmt: skip
    """The rules of one parse of ``<project_dir>/pyproject.toml`` (``read_kernels_source``'s answer)."""
    from kernel_deps.project.pyproject import signature_policy_from_table, targets_from_table, trust_from_table

    source = str(Path(project_dir) / PYPROJECT_NAME)
    return ProjectRules(
        source, requirements or (), targets_from_table(kernels_table, text, source),
        trust_from_table(kernels_table, text, source),
        signature_policy_from_table(kernels_table, text, source, Path(project_dir)),
    )  # fmt: skip


def rules_of(project: Project) -> ProjectRules:
    """The rules the project record sets for its lock (its one parse of pyproject.toml)."""
    return ProjectRules(project.source, project.declared or (), project.targets, project.publishers, project.policy)


def read_rules(project_dir: Path) -> ProjectRules | None:
    """The rules ``<project_dir>/pyproject.toml`` sets for its lock; None when the project has
    no pyproject.toml (a lock copied alone, as into an image): nothing is asked of it then."""
    from kernel_deps.project.record import read_project_record

    project = read_project_record(Path(project_dir), missing_ok=True)
    return rules_of(project) if project is not None else None


def judge_lock(found: LockRead, rules: ProjectRules | None) -> list[Problem]:
    """Every way the lock ``found`` fails what the project asks of it, whichever tool wrote it.

    The one judgement of a lock against its project, for every consumer (``verify``,
    ``download``, ``sync``, ``to-wheel``, the build hooks, the loader): the agreement with
    the requirements and targets (:data:`AGREEMENT_KINDS`) and the policy
    (:data:`POLICY_KINDS`). Each consumer decides what a kind means to it; none skips a
    kind because of the lock's format. A lock that cannot show what is asked (a pin
    without its version where a range is asked, no signer recorded where signatures are
    required) fails, naming the kernel and the missing record; no network.
    """
    if rules is None:
        return []
    if found.lock is None:  # kernels 0.17: commits and ref names, no variants, signers or hashes
        return _judge_pins(found, rules)
    lock, written_by = found.lock, found.written_by
    problems = check_sync(rules.requirements, lock, written_by=written_by)
    problems += check_targets(rules.targets, lock)
    problems += check_trust(rules.publishers, lock)
    problems += check_signatures(rules.policy, lock, written_by=written_by)
    return problems


def judge_for_use(found: LockRead, rules: ProjectRules | None, lock_path: str, doing: str) -> str | None:
    """:func:`judge_lock` for a consumer that uses the lock as it is (download, to-wheel, the
    loader): LockPolicyError on a policy finding (:func:`refuse_policy`); else the one-line
    warning for the agreement findings (:func:`agreement_warning`), or None."""
    judged = judge_lock(found, rules)
    refuse_policy(judged, lock_path, doing)
    return use_warning(found, judged, lock_path)


def use_warning(found: LockRead, problems: Sequence[Problem], lock_path: str) -> str | None:
    """The one warning line of a consumer that uses ``found`` as it is: that a newer
    kernel-deps wrote it (:func:`kernel_deps.lock.read.newer_lock_warning`), then that it no
    longer agrees with pyproject.toml (:func:`agreement_warning`); None when neither."""
    from kernel_deps.lock.read import newer_lock_warning

    said = [w for w in (newer_lock_warning(found), agreement_warning(problems, lock_path)) if w]
    return "; ".join(said) or None


def judge_project_lock(project_dir: Path, lock_file: Path, doing: str) -> str | None:
    """:func:`judge_for_use` of the lock at ``lock_file`` against ``<project_dir>/pyproject.toml``
    (read here), for a consumer that holds no project record of its own (``export``)."""
    from kernel_deps.lock.read import read_lock

    return judge_for_use(read_lock(lock_file, purpose="use"), read_rules(project_dir), str(lock_file), doing)


def refuse_policy(problems: Sequence[Problem], lock_path: str, doing: str) -> None:
    """LockPolicyError listing every policy finding of :func:`judge_lock` (none: returns).

    ``doing`` is what the consumer refuses to do, for the message's start
    (``"refusing to download"``): no consumer acts on a lock its project's policy refuses."""
    from kernel_deps.core.errors import LockPolicyError

    refused = [p for p in problems if p.kind in POLICY_KINDS]
    if not refused:
        return
    listed = "".join(f"\n  - {p.message}" for p in refused)
    raise LockPolicyError(
        f"{lock_path} does not show what pyproject.toml's [tool.kernels.trust] asks ({len(refused)} "
        f"{'finding' if len(refused) == 1 else 'findings'}):{listed}",
        refused,
        subject=doing,
    )


def agreement_warning(problems: Sequence[Problem], lock_path: str) -> str | None:
    """One line saying the lock no longer agrees with pyproject.toml, naming each kernel, and
    what to run; None when it agrees (or nothing was judged)."""
    stale = [p for p in problems if p.kind in AGREEMENT_KINDS]
    if not stale:
        return None
    named = ", ".join(sorted({p.repo_id or p.got or "?" for p in stale}))
    return (
        f"{lock_path} does not agree with pyproject.toml for {named}; using it as it is; run 'kernels lock' "
        "to update it ('kernels verify' names each finding)"
    )


def _judge_pins(found: LockRead, rules: ProjectRules) -> list[Problem]:
    """:func:`judge_lock` of a lock that records only commits and the ref each was locked under."""
    problems: list[Problem] = []
    for req in rules.requirements:
        pin = found.pins.get(req.repo_id)
        if pin is None:
            problems.append(Problem("not-locked", req.repo_id, None, None, asked=req.text))
            continue
        recorded = locked_ref(pin.version, pin.commit)
        if not satisfies(req, pin.commit, (recorded,) if recorded else ()):
            problems.append(_unsatisfied(req, pin.commit, pin.version, found.written_by))
    for repo_id in sorted(found.pins) if rules.policy.require else ():
        problems.append(_unsigned(repo_id, None, found.written_by))
    return problems


def _unsatisfied(req: KernelRequirement, commit: str, version: str | None, written_by: str | None) -> Problem:
    """A pin that does not meet ``req``, or, with no version recorded, cannot show that it does."""
    got = f"{version} ({commit[:12]})" if version else f"commit {commit[:12]}"
    if version or req.revision is not None or written_by is None:
        return Problem("unsatisfied", req.repo_id, None, None, req.text, got)
    return Problem("version-not-recorded", req.repo_id, None, None, req.text, got, written_by=written_by)


def _unsigned(repo_id: str, variant: str | None, written_by: str | None) -> Problem:
    """A build (every build, ``variant`` None) the lock records no signer for, while signatures are required."""
    return Problem("signature-missing", repo_id, variant, None, "a signer", None, written_by=written_by)


def check_sync(requirements: Sequence[KernelRequirement], lock: Lockfile, *,
               written_by: str | None = None) -> list[Problem]:  # fmt: skip
    """The static rule of ``lock --check``: is each requirement locked as written, and nothing else?

    ``written_by`` names the other tool that wrote the lock: it records no requirements, so
    whether a pin was locked for the requirement as written now is not asked of it, and a
    pin without its version cannot show that it meets a range (``version-not-recorded``)."""
    direct = {req.repo_id: req for req in requirements}
    problems: list[Problem] = []
    for req in requirements:
        entry = lock.get(req.repo_id)
        if entry is None:
            problems.append(Problem("not-locked", req.repo_id, None, None, asked=req.text))
        elif not entry_satisfies(entry, req):
            problems.append(_unsatisfied(req, entry.sha, entry.version, written_by))
        elif written_by is not None:
            continue  # it records no requirement to compare
        elif entry.requirement != req.text:
            problems.append(Problem("requirement-changed", req.repo_id, None, None, req.text, entry.requirement))
    problems += check_dependencies(lock)
    removed = {
        k.repo_id for k in lock.kernels
        if k.requirement is not None and k.repo_id not in direct and not set(k.redirected_from) & direct.keys()
    }
    for repo_id in sorted(removed):
        problems.append(Problem("removed", repo_id, None, None, asked=lock.get(repo_id).requirement))
    reachable = _reachable(lock, direct)
    for kernel in lock.kernels:
        if kernel.repo_id not in reachable and kernel.repo_id not in removed:
            problems.append(Problem("orphan", kernel.repo_id, None, None))
    return problems


def check_dependencies(lock: Lockfile) -> list[Problem]:
    """Each locked dependency must meet what the kernels depending on it require of it, as
    the lock records their kernel-depends (a hand-edited pin that no longer does is named).

    An entry records one ref name. When a revision asked of it chose a name that is not a
    version tag (the lock records ``v1`` for ``revision = "v1"``), the name cannot show which
    version the commit is, so a range asked of it too is left to the resolver that checked
    it when locking."""
    problems: list[Problem] = []
    asked = [(parent, dep, text) for parent in lock.kernels for dep, texts in (parent.kernel_depends or {}).items()
             for text in texts]  # fmt: skip
    texts_on: dict[str, set[str]] = {}
    for _, dep, text in asked:
        texts_on.setdefault(dep, set()).add(text)
    for parent, dep, text in asked:
        entry = lock.get(dep)
        if entry is None or entry_satisfies(entry, requirement_from_text(dep, text)):
            continue
        forced = {t for t in (*texts_on[dep], entry.requirement or "") if t.startswith("revision=")}
        if f"revision={entry.version}" in forced and not _names_a_version(entry):
            continue
        problems.append(Problem("dependency-unsatisfied", dep, None, None, text, _label(entry), by=parent.repo_id,
                                by_locked=_label(parent)))  # fmt: skip
    return problems


def unrecorded_requirements(lock: Lockfile) -> Problem | None:
    """A notice when the lock lists kernels' dependencies without what they require of them
    (written before kernel-deps recorded it), so their pins cannot be checked; else None."""
    parents = [k.repo_id for k in lock.kernels if k.kernel_depends is None]
    if not parents:
        return None
    return Problem("requirements-not-recorded", None, None, None, repo_ids=tuple(parents))


def check_targets(targets: Sequence[Target], lock: Lockfile) -> list[Problem]:
    """Each locked kernel must have a build for every declared target: a target added (or
    changed) since the lock was made may not be served by the locked commits."""
    problems: list[Problem] = []
    for kernel in lock.kernels:
        for target in missing_targets(targets, kernel.variants):
            problems.append(Problem("target-not-served", kernel.repo_id, None, None, target.name, None,
                                    locked=_label(kernel)))  # fmt: skip
    return problems


def check_trust(publishers: Sequence[str], lock: Lockfile) -> list[Problem]:
    """Entries the lock trusted on the project's word (``trusted_by`` "pyproject:<entry>")
    whose entry ``[tool.kernels.trust] publishers`` no longer lists; no network. An entry
    without ``trusted_by`` (an older lock) or trusted by the Hub is not judged here."""
    problems = []
    for kernel in lock.kernels:
        allowance = kernel.trusted_as
        if allowance is not None and allowance not in publishers:
            problems.append(Problem("trust-removed", kernel.repo_id, None, None, allowance, None))
    return problems


def check_signatures(policy: SignaturePolicy, lock: Lockfile, *, written_by: str | None = None) -> list[Problem]:
    """Variants whose signer, as the lock records it, the project's signature policy no longer
    allows, and, when it requires signatures, variants the lock records no signer for (a lock
    ``written_by`` another tool records none); no network."""
    problems = []
    for kernel in lock.kernels:
        for variant in kernel.variants:
            signer = kernel.signatures.get(variant)
            if signer is None:
                if policy.require:
                    problems.append(_unsigned(kernel.repo_id, variant, written_by))
                continue
            reason = policy.problem(kernel.repo_id, signer.issuer, signer.repository, signer.workflow, signer.ref)
            if reason is not None:
                found = describe_signer(signer.issuer, signer.repository, signer.workflow, signer.ref)
                problems.append(Problem("signer-not-allowed", kernel.repo_id, variant, None, None, found, detail=reason))
    return problems


def entry_satisfies(entry: LockedKernel, requirement: KernelRequirement) -> bool:
    """Whether a lock entry meets ``requirement``, judged by what the lock recorded (its
    commit and tag or branch name), never by where that ref points on the Hub now."""
    recorded = locked_ref(entry.version, entry.sha)
    return satisfies(requirement, entry.sha, (recorded,) if recorded else ())


def _names_a_version(entry: LockedKernel) -> bool:
    """Whether the entry's recorded name is a version tag (``v1.2.0``), which shows its version."""
    ref = locked_ref(entry.version, entry.sha)
    version = parse_version_ref(ref) if ref is not None else None
    return version is not None and not version.is_branch


def _label(entry: LockedKernel) -> str:
    return f"{entry.version} ({entry.sha[:12]})" if entry.version else f"commit {entry.sha[:12]}"


def _reachable(lock: Lockfile, direct: dict[str, KernelRequirement]) -> set[str]:
    """Repo ids reachable from the project's requirements through locked dependencies."""
    seen: set[str] = set()
    todo = [repo_id for repo_id in direct if lock.get(repo_id) is not None]
    while todo:
        entry = lock.get(todo.pop())  # a redirecting repo id gives its destination's entry
        if entry.repo_id not in seen:
            seen.add(entry.repo_id)
            todo += entry.dependencies
    return seen

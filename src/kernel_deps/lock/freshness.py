"""Is a lock in sync with its project? The static check, no network.

``kernels lock --check`` (when no pin has to move), ``kernels verify`` and the build
hooks all ask this one question: is every ``[tool.kernels.dependencies]`` entry locked,
by an entry that satisfies it (:func:`kernel_deps.core.versions.satisfies`, the resolver's own
rule) and was locked for that same requirement, does every locked dependency still meet
what the kernels depending on it require of it (their ``kernel-depends``, as the lock
records them), and is every other entry still needed?
"""

from __future__ import annotations

from typing import Sequence

from kernel_deps.core.records import Record
from kernel_deps.core.signers import SignaturePolicy, describe_signer
from kernel_deps.core.spec import KernelRequirement
from kernel_deps.core.targets import Target, missing_targets
from kernel_deps.core.versions import locked_ref, parse_version_ref, satisfies
from kernel_deps.lock.model import LockedKernel, Lockfile, requirement_from_text

RELOCK_HINT = "run 'kernels lock' to update kernels.lock"


class Problem(Record):
    """One way pyproject, lock, cache or Hub disagree; ``message`` is complete on its own."""

    __slots__ = ("kind", "repo_id", "variant", "path", "message", "expected", "got")
    kind: str
    repo_id: str | None
    variant: str | None
    path: str | None
    message: str
    expected: str | None
    got: str | None

    def __init__(self, kind: str, repo_id: str | None, variant: str | None, path: str | None, message: str,
                 expected: str | None = None, got: str | None = None) -> None:  # fmt: skip
        self._init(kind, repo_id, variant, path, message, expected, got)


def check_sync(requirements: Sequence[KernelRequirement], lock: Lockfile) -> list[Problem]:
    """The static rule of ``lock --check``: is each requirement locked as written, and nothing else?"""
    direct = {req.repo_id: req for req in requirements}
    problems: list[Problem] = []
    for req in requirements:
        entry = lock.get(req.repo_id)
        if entry is None:
            message = f"{req.repo_id} is in pyproject.toml ({req.text!r}) but not in kernels.lock"
            problems.append(_sync("not-locked", req.repo_id, message, None, None))
        elif not entry_satisfies(entry, req):
            got = _label(entry)
            message = f"{req.repo_id}: the locked {got} does not satisfy {req.text!r} from pyproject.toml"
            problems.append(_sync("unsatisfied", req.repo_id, message, req.text, got))
        elif entry.requirement != req.text:
            was = f"for {entry.requirement!r}" if entry.requirement else "only as a dependency of another kernel"
            message = f"{req.repo_id}: pyproject.toml asks for {req.text!r} but kernels.lock was locked {was}"
            problems.append(_sync("requirement-changed", req.repo_id, message, req.text, entry.requirement))
    problems += check_dependencies(lock)
    removed = {
        k.repo_id for k in lock.kernels
        if k.requirement is not None and k.repo_id not in direct and not set(k.redirected_from) & direct.keys()
    }
    for repo_id in sorted(removed):
        was = lock.get(repo_id).requirement
        message = f"{repo_id} was removed from pyproject.toml but kernels.lock still requires it ({was!r})"
        problems.append(_sync("removed", repo_id, message, None, None))
    reachable = _reachable(lock, direct)
    for kernel in lock.kernels:
        if kernel.repo_id not in reachable and kernel.repo_id not in removed:
            message = f"{kernel.repo_id} is in kernels.lock but no longer required by pyproject.toml or a locked kernel"
            problems.append(_sync("orphan", kernel.repo_id, message, None, None))
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
        got = _label(entry)
        message = (
            f"{dep}: the locked {got} does not satisfy {text!r}, which {parent.repo_id} {_label(parent)} "
            "requires of it (its kernel-depends, as kernels.lock records them)"
        )
        problems.append(_sync("dependency-unsatisfied", dep, message, text, got))
    return problems


def unrecorded_requirements(lock: Lockfile) -> Problem | None:
    """A notice when the lock lists kernels' dependencies without what they require of them
    (written before kernel-deps recorded it), so their pins cannot be checked; else None."""
    parents = [k.repo_id for k in lock.kernels if k.kernel_depends is None]
    if not parents:
        return None
    message = (
        f"kernels.lock records which kernels {', '.join(parents)} depend on but not what they require of them, "
        "so those pins are not checked against their kernel-depends; 'kernels lock' records them "
        "(kernel_depends in each entry), keeping every pin that meets them"
    )
    return Problem("requirements-not-recorded", None, None, None, message)


def check_targets(targets: Sequence[Target], lock: Lockfile) -> list[Problem]:
    """Each locked kernel must have a build for every declared target: a target added (or
    changed) since the lock was made may not be served by the locked commits."""
    problems: list[Problem] = []
    for kernel in lock.kernels:
        for target in missing_targets(targets, kernel.variants):
            message = (
                f"{kernel.repo_id} {_label(kernel)}: kernels.lock has no build for the target {target.name} "
                "(declared in [tool.kernels] targets, not served by the locked commit); "
                "run 'kernels lock' to pick a version that has one"
            )
            problems.append(Problem("target-not-served", kernel.repo_id, None, None, message, target.name, None))
    return problems


def check_trust(publishers: Sequence[str], lock: Lockfile) -> list[Problem]:
    """Entries the lock trusted on the project's word (``trusted_by`` "pyproject:<entry>")
    whose entry ``[tool.kernels.trust] publishers`` no longer lists; no network. An entry
    without ``trusted_by`` (an older lock) or trusted by the Hub is not judged here."""
    problems = []
    for kernel in lock.kernels:
        allowance = kernel.trusted_as
        if allowance is not None and allowance not in publishers:
            message = (
                f"{kernel.repo_id}: kernels.lock trusts it because [tool.kernels.trust] publishers listed "
                f"{allowance!r}, which pyproject.toml no longer lists; add it back, or run 'kernels lock' "
                "to ask the Hub whether it trusts the publisher"
            )
            problems.append(Problem("trust-removed", kernel.repo_id, None, None, message, allowance, None))
    return problems


def check_signatures(policy: SignaturePolicy, lock: Lockfile) -> list[Problem]:
    """Variants whose signer, as the lock records it, the project's signature policy no longer
    allows, and, when it requires signatures, variants the lock records no signer for; no network."""
    problems = []
    for kernel in lock.kernels:
        for variant in kernel.variants:
            signer = kernel.signatures.get(variant)
            if signer is None:
                if policy.require:
                    message = (
                        f"{kernel.repo_id} build {variant}: [tool.kernels.trust] require-signatures = true, but "
                        f"kernels.lock records no signer for it (expected a signed metadata.json; found none locked)"
                    )
                    problems.append(Problem("signature-missing", kernel.repo_id, variant, None,
                                            f"{message}; {RELOCK_HINT}", "a signer", None))  # fmt: skip
                continue
            reason = policy.problem(kernel.repo_id, signer.issuer, signer.repository, signer.workflow, signer.ref)
            if reason is not None:
                message = f"{kernel.repo_id} build {variant}: the signer kernels.lock records is not allowed: {reason}"
                found = describe_signer(signer.issuer, signer.repository, signer.workflow, signer.ref)
                problems.append(Problem("signer-not-allowed", kernel.repo_id, variant, None,
                                        f"{message}; {RELOCK_HINT}", None, found))  # fmt: skip
    return problems


def _sync(kind: str, repo_id: str, message: str, expected: str | None, got: str | None) -> Problem:
    return Problem(kind, repo_id, None, None, f"{message}; {RELOCK_HINT}", expected, got)


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

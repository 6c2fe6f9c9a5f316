"""Unlocked use (``get_kernel``, ``has_kernel``): a one-kernel lock resolved from the Hub in memory.

The requirement is the Hugging Face library's ``version=`` or ``revision=``; each kernel of
the lock is trusted as ``trust_remote_code`` says (the Hub asked about each other
publisher while resolving); with a ``signature_policy``, every build resolved is held to it
(:func:`kernel_deps.resolve.session.resolve_in_memory`, as ``kernels lock`` resolves).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel_deps.core.errors import DigestMismatchError, SignatureError, UsageError
from kernel_deps.trust.signers import SignaturePolicy
from kernel_deps.lock.model import Lockfile

if TYPE_CHECKING:
    from kernel_deps.core.spec import KernelRequirement
    from kernel_deps.hub.index import KernelIndex


def resolve_unlocked(
    repo_id: str, version: int | str | None, revision: str | None, function: str, trust_remote_code: object = False,
    signature_policy: SignaturePolicy | None = None,
) -> tuple[Lockfile, "KernelRequirement"]:
    """A one-kernel lock (its dependencies included) for ``version`` or ``revision``, from
    the Hub; every kernel of it trusted as ``trust_remote_code`` says, else UntrustedPublisherError."""
    from kernel_deps.resolve.session import resolve_in_memory
    from kernel_deps.core.spec import InvalidEntry, requirement_from_value
    from kernel_deps.hub.client import HubClient
    from kernel_deps.resolve.explain import Requester

    expected = (
        "pass exactly one of version= (a major, e.g. version=1, or a range such as '>=1.2,<2') "
        "and revision= (a branch, tag or commit)"
    )
    if (version is None) == (revision is None):
        given = "both" if version is not None else "neither"
        raise UsageError(f"{expected}; {given} given", subject=f"{function}({repo_id!r})")
    if not isinstance(trust_remote_code, bool) and not (
        isinstance(trust_remote_code, list) and all(isinstance(item, str) for item in trust_remote_code)
    ):
        raise UsageError(
            f"trust_remote_code={trust_remote_code!r}: expected True, False, or a list of repo "
            "ids to allow",
            subject=f"{function}({repo_id!r})",
        )
    value: object = {"revision": revision} if revision is not None else version
    try:
        requirement = requirement_from_value(repo_id, value)
    except InvalidEntry as exc:
        argument = f"revision={revision!r}" if revision is not None else f"version={version!r}"
        raise UsageError(exc.problem, subject=f"{function}({repo_id!r}, {argument})",
                         hint=expected if exc.hint else None) from None  # fmt: skip
    requester = Requester(
        f"{function}()",
        f"pass another version= or revision= to {function}()",
        f"pass a narrower version= or a revision= to {function}()",
    )
    # The Hub is asked about each publisher the argument does not allow, while resolving.
    allowed = None if trust_remote_code is True else tuple(trust_remote_code or ())

    def judge(lock: Lockfile, index: KernelIndex) -> Lockfile:
        if allowed is not None:
            _check_publishers(lock, allowed, index, function)
        return lock

    if signature_policy is not None:
        _check_trusted_root(signature_policy, f"{function}({repo_id!r})")
    try:
        lock, _ = resolve_in_memory(HubClient(), [requirement], publishers=allowed, judge=judge,
                                    policy=signature_policy, requester=requester)  # fmt: skip
    except (SignatureError, DigestMismatchError) as exc:
        if not exc.refused:
            raise
        from kernel_deps.trust.signatures import CALLER_POLICY, refusal

        # Nothing is written (there is no lock): the call refused to load, under the policy its caller passed.
        outcome = f"{function}({repo_id!r}) refused to load {repo_id} under its signature_policy argument"
        raise refusal(exc.refused, outcome=outcome, place=CALLER_POLICY) from None
    return lock, requirement


def _check_trusted_root(policy: SignaturePolicy, call: str) -> None:
    """UsageError naming the call when the trusted root its ``signature_policy`` names cannot be used."""
    if policy.trusted_root is None:
        return
    from kernel_deps.trust.bundles import TrustedRootError, check_trusted_root

    try:
        check_trusted_root(policy.trusted_root)
    except TrustedRootError as exc:
        raise UsageError(f"signature_policy's trusted_root: {exc}", subject=call) from None


def _check_publishers(lock: Lockfile, allowed: tuple[str, ...], index: KernelIndex, function: str) -> None:
    """As the Hugging Face library: each kernel's repo id in ``allowed``, or its publisher
    trusted by the Hub; else UntrustedPublisherError naming the first other one."""
    from kernel_deps.core.errors import UntrustedPublisherError
    from kernel_deps.core.spec import org_of
    from kernel_deps.trust.publishers import publisher_trust_text

    for kernel in lock.kernels:
        if kernel.repo_id in allowed:
            continue
        answer = index.publisher(org_of(kernel.repo_id))
        if not answer.trusted:
            raise UntrustedPublisherError(
                f"{kernel.repo_id} is not from a trusted publisher: {publisher_trust_text(answer)}",
                subject=f"{function}()",
                hint=(
                    f"pass trust_remote_code=True, or a list of repo ids including {kernel.repo_id!r}, to "
                    "load it anyway"
                ),
            )

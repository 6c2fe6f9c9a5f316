"""The judge of a build a load imports: the signature policy it is held to, and where that policy is written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel_deps.cache import store as cache
from kernel_deps.core.errors import KernelCacheReadError
from kernel_deps.core.records import Record
from kernel_deps.trust.signers import SignaturePolicy
from kernel_deps.lock.model import LockedKernel

if TYPE_CHECKING:
    from kernel_deps.loader.finding import LockSource
    from kernel_deps.trust.signatures import PolicyPlace


class Judge(Record):
    """The signature policy a load holds a build to, and where that policy is written (for messages)."""

    __slots__ = ("policy", "place")
    policy: SignaturePolicy
    place: PolicyPlace

    def __init__(self, policy: SignaturePolicy, place: PolicyPlace) -> None:
        self._init(policy, place)

    @staticmethod
    def of(source: LockSource, kernel: LockedKernel, variant: str, policy: SignaturePolicy | None) -> Judge:
        """``get_kernel``'s ``signature_policy``; else, for a build the lock records a signer for,
        the policy of the project whose lock it is (its pyproject.toml beside the lock), or the
        default policy (Sigstore's public-good root) for a lock with none beside it."""
        from kernel_deps.trust.signatures import CALLER_POLICY, NO_PROJECT_POLICY, PROJECT_POLICY

        if policy is not None:
            return Judge(policy, CALLER_POLICY)
        if source.policy is not None:  # read with the lock's judgement (find_lock)
            return Judge(source.policy, PROJECT_POLICY)
        return Judge(SignaturePolicy(), NO_PROJECT_POLICY)

    def refuse(self, kernel: LockedKernel, variant: str, check: cache.VariantCheck) -> None:
        """The build's metadata.json digest against every file of ``check`` and, when the lock
        records its signer, its bundle verified offline to exactly that signer; else the error."""
        from kernel_deps.trust.signatures import check_cached_variant, refusal

        try:
            refused = check_cached_variant(kernel, variant, check.path, check.files, self.policy)
        except OSError as exc:
            raise KernelCacheReadError(
                f"{kernel.repo_id} {variant}: cannot read {exc.filename or check.path} ({exc.strerror or exc}); "
                "check the cache's permissions, or run 'kernels download' to repair it"
            ) from None
        if refused:
            raise refusal(refused, outcome=self.outcome(kernel, variant), place=self.place)

    def outcome(self, kernel: LockedKernel, variant: str) -> str:
        """What the load did, in a refusal's words: the call and its argument when the caller passed the policy."""
        from kernel_deps.trust.signatures import CALLER_POLICY

        if self.place == CALLER_POLICY:  # only get_kernel passes one
            return (f"get_kernel({kernel.repo_id!r}) refused to load {kernel.repo_id} {variant} under its "
                    "signature_policy argument")  # fmt: skip
        return f"refusing to load {kernel.repo_id} {variant}"

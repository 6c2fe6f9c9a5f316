"""The verified files of a build a load imports: from the cache, an installed kernel wheel, or a download.

On every first load of a build in a process its files are checked against the lock and
held to its digest and recorded signer (:class:`kernel_deps.loader.judge.Judge`); a build
missing from the cache is taken from an installed kernel wheel of that commit and variant
(``kernels to-wheel``), or, where allowed, downloaded through the same checks
(:func:`kernel_deps.fetch.run.download_lock`).
"""

from __future__ import annotations

from kernel_deps.cache import store as cache
from kernel_deps.core.errors import (
    DigestMismatchError,
    KernelCacheReadError,
    KernelIntegrityError,
    KernelNotCachedError,
    SignatureError,
)
from kernel_deps.core.settings import is_offline
from kernel_deps.loader.judge import Judge
from kernel_deps.lock.model import LockedKernel, Lockfile


def verified_variant(
    lock: Lockfile, kernel: LockedKernel, variant: str, *, allow_download: bool, judge: Judge
) -> cache.VariantCheck:
    """The check of this build's files against the lock, its digest and recorded signer held
    too, on every first load in a process: from the cache, an installed kernel wheel, or (with
    ``allow_download``) a download through the same checks."""
    expected = kernel.variants[variant].hash
    check = _check(kernel, variant, expected)
    if not check.present:
        installed = _installed_wheel(kernel, variant, expected)
        if installed is not None:
            judge.refuse(kernel, variant, installed)
            return installed
    if not check.present and allow_download:
        from kernel_deps.fetch.run import download_lock

        if not is_offline():
            # The whole lock, so the entry keeps its dependencies' entries; only this variant.
            try:
                download_lock(lock, variants_for=lambda k: [variant] if k.repo_id == kernel.repo_id else [],
                              policy=judge.policy, place=judge.place)  # fmt: skip
            except (SignatureError, DigestMismatchError) as exc:
                from kernel_deps.trust.signatures import CALLER_POLICY, refusal

                if not exc.refused or judge.place != CALLER_POLICY:
                    raise
                # get_kernel's words: what the call did first, then what became of the fetched build.
                outcome = f"{judge.outcome(kernel, variant)} (not placed in the cache)"
                raise refusal(exc.refused, outcome=outcome, place=judge.place) from None
            check = _check(kernel, variant, expected)
    if not check.present:
        from kernel_deps.cache.installed import unusable_wheels

        unusable = "".join(f"; not used: {line}" for line in unusable_wheels(kernel.repo_id))
        raise KernelNotCachedError(
            f"{kernel.repo_id} {variant} at {kernel.sha[:12]} is not in the cache ({cache.cache_root()}); "
            f"run 'kernels download' for this project first{unusable}"
        )
    if not check.ok:
        details = "; ".join(_describe(p) for p in check.problems)
        raise KernelIntegrityError(
            f"refusing to load {kernel.repo_id} {variant}: the cached files differ from kernels.lock: {details}; "
            "run 'kernels download' to repair the cache"
        )
    judge.refuse(kernel, variant, check)
    return check


def _installed_wheel(kernel: LockedKernel, variant: str, expected: str) -> cache.VariantCheck | None:
    """The check of an installed kernel wheel of this commit and variant (``kernels to-wheel``),
    when one is installed; KernelIntegrityError naming each file that differs from the lock."""
    from kernel_deps.cache.installed import check_installed, find_installed

    wheel = find_installed(kernel.repo_id, kernel.sha, variant)
    if wheel is None:
        return None
    try:
        check = check_installed(wheel, expected)
    except OSError as exc:
        raise KernelCacheReadError(
            f"{kernel.repo_id} {variant}: cannot read {exc.filename or wheel.folder} ({exc.strerror or exc}); "
            f"check the permissions of {wheel.label}"
        ) from None
    if not check.ok:
        details = "; ".join(_describe(p) for p in check.problems)
        raise KernelIntegrityError(
            f"refusing to load {kernel.repo_id} {variant}: {wheel.label} differs from kernels.lock: {details}; "
            f"reinstall it (pip install --force-reinstall --require-hashes -r requirements.txt)"
        )
    return check


def _check(kernel: LockedKernel, variant: str, expected: str) -> cache.VariantCheck:
    try:
        return cache.check_variant_in_tiers(kernel.repo_id, kernel.sha, variant, expected)
    except OSError as exc:
        where = exc.filename or cache.cache_root()
        raise KernelCacheReadError(
            f"{kernel.repo_id} {variant}: cannot read {where} ({exc.strerror or exc}); "
            "check the cache's permissions, or run 'kernels download' to repair it"
        ) from None


def _describe(problem: cache.FileProblem) -> str:
    if problem.kind == "outside-cache":
        return f"{problem.path} links outside the cache (to {problem.got})"
    if problem.expected and problem.got:
        return f"{problem.path} {problem.kind} (expected {problem.expected}, got {problem.got})"
    return f"{problem.path} {problem.kind}"

"""A download run: every chosen variant of a lock made present and verified in the cache.

What the cache holds as locked is judged there and costs no request; what is missing is
fetched (:mod:`kernel_deps.fetch.files`), files of all variants of all kernels concurrently,
under one time budget; every refusal is told at once.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from kernel_deps.cache import store as cache
from kernel_deps.cache.pools import worker_pool
from kernel_deps.core.errors import FileWriteError, OfflineError, UnsafeRepoContentError
from kernel_deps.core.settings import HUB_WORKERS, is_offline, offline_env
from kernel_deps.trust.signers import SignaturePolicy
from kernel_deps.core.variants import is_valid_variant_name
from kernel_deps.fetch.gate import cache_error, download_refusal, judge_present
from kernel_deps.fetch.tasks import DownloadReport, Progress, VariantOutcome, VariantTask
from kernel_deps.lock.model import LockedKernel, Lockfile

if TYPE_CHECKING:
    from kernel_deps.hub.client import HubClient
    from kernel_deps.trust.signatures import PolicyPlace, VariantRefusal


def download_lock(
    lock: Lockfile,
    *,
    variants_for: Callable[[LockedKernel], list[str]],
    hub: HubClient | None = None,
    root: Path | None = None,
    progress: Progress | None = None,
    max_workers: int = HUB_WORKERS,
    policy: SignaturePolicy | None = None,
    place: PolicyPlace | None = None,
) -> DownloadReport:
    """Make every chosen variant of every locked kernel present and verified in the cache:
    its files the locked bytes, the digest its metadata.json declares met, and the bundle of
    a variant the lock records a signer for verified offline under ``policy``'s trusted root
    (None: the default policy, Sigstore's public-good root) to exactly that signer. What is
    fetched is admitted into ``snapshots/`` only once all of that holds (:func:`kernel_deps.fetch.gate.admit_variant`)
    and checked again there, complete, before it counts; a refused variant is named in one
    error (SignatureError or DigestMismatchError, exit 1), ``place`` saying where the policy
    is written (None: the project's ``[tool.kernels.trust]`` when a policy is given)."""
    from kernel_deps.trust.signatures import NO_PROJECT_POLICY, PROJECT_POLICY

    progress = progress or Progress()
    root = root or cache.cache_root()
    place = place or (PROJECT_POLICY if policy is not None else NO_PROJECT_POLICY)
    policy = policy if policy is not None else SignaturePolicy()
    tasks = [VariantTask(kernel, variant) for kernel in lock.kernels for variant in variants_for(kernel)]
    for task in tasks:
        if not is_valid_variant_name(task.variant):
            raise UnsafeRepoContentError(f"{task.variant!r} is not a valid variant name", subject=task.kernel.repo_id)
    progress.start(tasks)
    if any(task.variant in task.kernel.signatures and not _has_receipt(task, root, policy) for task in tasks):
        _prepare_verifier(policy)  # sigstore's import overlaps the hashing of the cached files
    cached: list[VariantTask] = []
    fetched: list[VariantTask] = []
    outcomes: list[VariantOutcome] = []
    refused: list[tuple[VariantRefusal, str]] = []  # each refusal, and what became of the variant
    missing = []
    _check_cache_root(root)
    # Every chosen variant checked at once: their files share the hashing threads when they are large.
    # A variant a shared cache (KERNELS_CACHE_SHARED) holds intact is used there, never written to.
    checks = cache.check_in_tiers([(t.kernel.repo_id, t.kernel.sha, t.variant, t.kernel.variants[t.variant].hash)
                                   for t in tasks], root=root)  # fmt: skip
    for task, (check, tier) in zip(tasks, checks):
        if isinstance(check, OSError):
            raise cache_error(task, check, "read") from None
        if not check.ok:
            missing.append(task)
            continue
        found, fate = judge_present(task, check, policy, holding_lock=False, removable=tier == root)
        refused += [(r, fate) for r in found]
        if not found:
            cached.append(task)
            outcomes.append(VariantOutcome(task, cached=True, files=0, size=0))
            progress.variant_done(task, cached=True, files=0, size=0)
    if refused and (not missing or is_offline()):  # what is missing is still fetched, then all is told
        raise download_refusal(refused, place)
    if not missing:
        return DownloadReport(cached, cache_root=root, outcomes=outcomes)
    if is_offline():
        names = ", ".join(t.label for t in missing)
        raise OfflineError(f"not in the cache and {offline_env()} is set: {names}; run 'kernels download' with network access")

    from kernel_deps.fetch.files import fetch_variant

    if hub is None:
        from kernel_deps.hub.client import HubClient

        hub = HubClient()
    files_fetched = bytes_fetched = 0
    # One time budget for the whole download. An interrupt or failure returns at once;
    # files still in flight are not waited for.
    with hub.operation(), progress.fetching():
        with worker_pool(max_workers, "kernel-deps-download") as files_pool:
            with worker_pool(max(1, min(len(missing), max_workers)), "kernel-deps-variant") as variants_pool:
                futures = [variants_pool.submit(fetch_variant, task, hub, root, files_pool, progress, policy)
                           for task in missing]  # fmt: skip
                for task, future in zip(missing, futures):  # results are taken in this one thread
                    files, size, found, fate = future.result()
                    files_fetched += files
                    bytes_fetched += size
                    refused += [(r, fate) for r in found]
                    if found:
                        continue
                    (fetched if files else cached).append(task)
                    outcomes.append(VariantOutcome(task, cached=not files, files=files, size=size))
    if refused:
        raise download_refusal(refused, place)
    order = {id(task): i for i, task in enumerate(tasks)}
    outcomes.sort(key=lambda outcome: order[id(outcome.task)])
    return DownloadReport(cached, fetched, files_fetched, bytes_fetched, root, outcomes)


def _has_receipt(task: VariantTask, root: Path, policy: SignaturePolicy) -> bool:
    """Whether the cached bundle of ``task`` was verified here before, as far as the unproven
    bytes tell: when every signed one was, sigstore is never imported (the check after the
    files are proven decides, and imports it itself on a miss)."""
    from kernel_deps.trust.signatures import receipt_held

    folder = cache.variant_dir(cache.repo_dir(task.kernel.repo_id, root=root), task.kernel.sha, task.variant)
    return receipt_held(task.kernel.repo_id, task.variant, folder, policy)


def _prepare_verifier(policy: SignaturePolicy) -> None:
    import threading

    from kernel_deps.trust.bundles import prepare

    threading.Thread(target=prepare, args=(policy.trusted_root,), name="kernel-deps-sigstore", daemon=True).start()


def _check_cache_root(root: Path) -> None:
    """FileWriteError naming ``root`` when it cannot be the cache (absent is fine: it is made)."""
    hint = "point KERNELS_CACHE or HF_HUB_CACHE at a folder (or unset them)"
    try:
        mode = os.stat(root).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise FileWriteError(
            f"cannot be used as the kernel cache ({exc.strerror or exc})",
            subject=root,
            hint=hint,
        ) from None
    if not stat.S_ISDIR(mode):
        raise FileWriteError("the kernel cache is not a folder", subject=root, hint=hint)

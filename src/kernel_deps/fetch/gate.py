"""The one gate into the cache: a fetched variant staged, held to its digest and recorded signer, then placed.

A variant already in the cache is judged the same way (:func:`judge_present`); one that does not
match its own digest is removed from ``snapshots/`` when kernel-deps placed it there. Every
refused variant of a run is named in one error (:func:`download_refusal`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from kernel_deps.cache import store as cache
from kernel_deps.core.errors import FileWriteError, KernelCacheReadError, KernelDepsError
from kernel_deps.core.settings import LOCK_NAME
from kernel_deps.trust.signers import SignaturePolicy
from kernel_deps.fetch.tasks import VariantTask

if TYPE_CHECKING:
    from kernel_deps.trust.signatures import PolicyPlace, VariantRefusal


def admit_variant(task: VariantTask, repo: Path, files: dict[str, str], policy: SignaturePolicy) -> list[VariantRefusal]:
    """The one way bytes a download fetched become loadable in the cache.

    ``files`` (relative path -> blob) are the Hub's listing, which hashes to the locked value,
    each blob verified against it on arrival. They are linked in a staging folder, held there to
    the digest their ``metadata.json`` declares and, when the lock records the variant's signer,
    its bundle is verified offline under ``policy``'s trusted root to exactly that signer; only
    then is the folder renamed into ``snapshots/<commit>/build/<variant>`` (with its manifest).
    Returns the refusals: a refused variant leaves nothing under ``snapshots/`` and no manifest;
    its blobs stay in ``blobs/``, content-addressed and never loaded by themselves."""
    from kernel_deps.trust.signatures import check_cached_variant

    with cache.staged_variant(repo, task.kernel.sha, task.variant, files) as staged:
        refused = check_cached_variant(task.kernel, task.variant, staged.folder, files, policy)
        if not refused:
            staged.place()
    return refused


def judge_present(
    task: VariantTask, check: cache.VariantCheck, policy: SignaturePolicy, *, holding_lock: bool,
    removable: bool = True,
) -> tuple[list[VariantRefusal], str]:
    """A variant found in the cache holding the locked bytes, held to its digest and recorded
    signer; a build that does not match its own digest is removed from ``snapshots/`` when
    kernel-deps placed it there (the blobs stay). Returns the refusals and what became of it:
    ``"removed"`` or ``"kept"`` (a signer refused: the bytes are what the lock pins, and the
    lock's record or the trusted root is what fails, so another project may rely on them)."""
    from kernel_deps.trust.signatures import check_cached_variant

    try:
        refused = check_cached_variant(task.kernel, task.variant, check.path, check.files, policy)
    except OSError as exc:
        raise cache_error(task, exc, "read") from None
    if not refused or any(r.kind != "digest" for r in refused) or not removable:  # a shared cache is only read
        return refused, "kept"
    repo = check.path.parents[3]  # snapshots/<commit>/build/<variant>
    removed = _remove_own_placement(task, repo) if not holding_lock else _remove_placement(task, repo)
    return refused, "removed" if removed else "kept"


def _remove_own_placement(task: VariantTask, repo: Path) -> bool:
    """:func:`_remove_placement` under the variant's lock, when no other download holds it now."""
    from kernel_deps.core.filelocks import HostLock, stale_after

    lock_file = cache.variant_lock_path(repo, task.kernel.sha, task.variant)
    lock = HostLock(lock_file, stale_after=stale_after())
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        if not lock.try_acquire():
            return False  # another download is at it: left as it is
    except OSError:
        return False  # the cache cannot be written: left as it is
    try:
        return _remove_placement(task, repo)
    finally:
        lock.release()


def _remove_placement(task: VariantTask, repo: Path) -> bool:
    try:
        return cache.remove_placed_variant(repo, task.kernel.sha, task.variant, task.kernel.variants[task.variant].hash)
    except OSError:
        return False


_FATES = {
    "not-placed": "not placed in the cache",
    "removed": "removed from the cache",
    "kept": f"left in the cache, where loading it with {LOCK_NAME} is refused",
}


def download_refusal(refused: Sequence[tuple[VariantRefusal, str]], place: PolicyPlace) -> KernelDepsError:
    """One error naming every refused variant, saying what became of each kind."""
    from kernel_deps.trust.signatures import refusal

    outcome = ", or ".join(_FATES[fate] for fate in dict.fromkeys(fate for _, fate in refused))
    return refusal([r for r, _ in refused], outcome=outcome, place=place)


def cache_error(task: VariantTask, exc: OSError, doing: str) -> FileWriteError | KernelCacheReadError:
    """One line for a file-system failure in the cache, naming the path and what to check."""
    where = exc.filename or "the kernel cache"
    error = KernelCacheReadError if doing == "read" else FileWriteError
    return error(
        f"{task.label}: cannot {doing} {where} ({exc.strerror or exc}); check that the kernel cache "
        "(KERNELS_CACHE, HF_HUB_CACHE) is a writable folder with free space and paths the system allows"
    )

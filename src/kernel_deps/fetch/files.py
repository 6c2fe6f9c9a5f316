"""One missing variant fetched from the Hub: its listing proven against the lock, each file verified, then admitted.

The Hub's tree listing of ``build/<variant>/`` at the locked commit must hash to the locked
value before a byte is fetched; every file is streamed to a partial path (resumed where an
interrupted run left it), hashed and checked against the listing before it becomes a blob;
then the variant goes through the gate (:func:`kernel_deps.fetch.gate.admit_variant`) and is
checked again, complete, in place. Imported only once a variant is missing, so a warm
download imports neither the Hub client nor a lock.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

from kernel_deps.cache import store as cache
from kernel_deps.core.errors import (
    CacheBusyError,
    DownloadVerificationError,
    HubError,
    PathNotFoundError,
    UnsafeRepoContentError,
)
from kernel_deps.core.filelocks import HostLock, acquire_within
from kernel_deps.core.hashing import is_hashed_path, variant_hash
from kernel_deps.core.settings import BUDGET_ENV, BUILD_DIR, KERNEL
from kernel_deps.trust.signers import SignaturePolicy
from kernel_deps.fetch.gate import admit_variant, cache_error, judge_present
from kernel_deps.fetch.tasks import Progress, VariantTask

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from kernel_deps.hub.client import HubClient
    from kernel_deps.hub.listing import TreeFile
    from kernel_deps.trust.signatures import VariantRefusal


def check_tree_paths(task: VariantTask, files: Iterable[TreeFile]) -> dict[str, TreeFile]:
    """Relative path -> entry for the hashed files of a variant; refuses unsafe paths."""
    from kernel_deps.hub.listing import path_problem, shown_path

    prefix = f"{BUILD_DIR}/{task.variant}/"
    out: dict[str, TreeFile] = {}
    for entry in files:
        rel = entry.path[len(prefix):] if entry.path.startswith(prefix) else None
        if rel is None or path_problem(rel):
            raise UnsafeRepoContentError(
                f"the repo lists an unsafe path {shown_path(entry.path)}; refusing to download this "
                "kernel",
                subject=task.label,
            )
        if is_hashed_path(rel):
            out[rel] = entry
    return out


def _present(task: VariantTask, root: Path) -> cache.VariantCheck:
    locked = task.kernel.variants[task.variant].hash
    try:
        return cache.check_variant(task.kernel.repo_id, task.kernel.sha, task.variant, locked, root=root)
    except OSError as exc:
        raise cache_error(task, exc, "read") from None


Fetched = tuple[int, int, list["VariantRefusal"], str]  # files and bytes fetched, refusals, what became of it


def fetch_variant(
    task: VariantTask, hub: HubClient, root: Path, pool: ThreadPoolExecutor, progress: Progress,
    policy: SignaturePolicy,
) -> Fetched:  # fmt: skip
    """Fetch, verify, admit and check one variant."""
    try:
        return _fetch_variant_into_cache(task, hub, root, pool, progress, policy)
    except OSError as exc:  # the cache's own folders and files: Hub errors are mapped by the transport
        raise cache_error(task, exc, "write") from None


def _fetch_variant_into_cache(
    task: VariantTask, hub: HubClient, root: Path, pool: ThreadPoolExecutor, progress: Progress,
    policy: SignaturePolicy,
) -> Fetched:  # fmt: skip
    kernel = task.kernel
    # The variant's lock is waited for before the Hub is asked anything, even which type of
    # repo it is: of many processes wanting the variant at once (the ranks of one job), the
    # first asks the Hub and places it, and the others find it placed. Where the cache does
    # not yet show the repo's type, the kernel repo's lock is the one every process takes
    # first; a legacy model repo's own lock, which prune takes, is then taken too.
    known = cache.find_repo_dir(kernel.repo_id, root)
    first = known or cache.repo_dir(kernel.repo_id, KERNEL, root)
    with _acquire(_variant_lock(first, task), task.label, hub, progress):
        present = _present(task, root)
        if present.ok:  # another process placed it while we waited: judged as any cached copy
            refused, fate = judge_present(task, present, policy, holding_lock=True)
            if not refused:
                progress.variant_done(task, cached=True, files=0, size=0)
            return 0, 0, refused, fate
        repo = known or cache.repo_dir(kernel.repo_id, hub.repo_type(kernel.repo_id), root)
        if repo == first:
            return _fetch_locked(task, hub, repo, pool, progress, policy)
        with _acquire(_variant_lock(repo, task), task.label, hub, progress):
            return _fetch_locked(task, hub, repo, pool, progress, policy)


def _variant_lock(repo: Path, task: VariantTask) -> Path:
    lock_file = cache.variant_lock_path(repo, task.kernel.sha, task.variant)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    return lock_file


def _fetch_locked(
    task: VariantTask, hub: HubClient, repo: Path, pool: ThreadPoolExecutor, progress: Progress,
    policy: SignaturePolicy,
) -> Fetched:  # fmt: skip
    """Fetch, verify, admit and check one variant missing from ``repo``, its lock held."""
    kernel = task.kernel
    cache.remove_stale_partials(repo)
    try:
        listed = hub.list_variant_files(kernel.repo_id, kernel.sha, task.variant)
    except PathNotFoundError:
        raise DownloadVerificationError(
            f"the Hub has no {BUILD_DIR}/{task.variant} at {kernel.sha[:12]}; the lock names a variant the repo "
            "does not have (edited lock or rewritten repo); nothing was downloaded",
            subject=task.label,
        ) from None
    listing = check_tree_paths(task, listed)
    expected = kernel.variants[task.variant].hash
    served = variant_hash((rel, entry.content_hash) for rel, entry in listing.items())
    if not listing or served != expected:
        raise DownloadVerificationError(
            f"the Hub serves different content at {kernel.sha[:12]} than kernels.lock pins "
            f"(Expected {expected}, Got {served}); the repo may have been rewritten; nothing was downloaded",
            subject=task.label,
        )
    files = {rel: e.content_hash for rel, e in listing.items()}
    count = size = 0
    for attempt in ("first", "again"):
        fetched_now, received = _fetch_blobs(task, hub, repo, listing, pool, progress)
        count, size = count + fetched_now, size + received
        try:
            refused = admit_variant(task, repo, files, policy)
        except FileNotFoundError:  # a blob went between its check and the staged copy's
            refused = None
        if refused:
            return count, size, refused, "not-placed"
        # What was placed, checked again while the lock is held: another process removing
        # blobs meanwhile (a prune that does not take this lock) must not pass for verified.
        # Every blob was hashed on arrival or by blob_is_valid: presence and size say enough.
        gone = _not_in_place(repo, task, listing) if refused is not None else ["a file vanished"]
        if not gone:
            break
        if attempt == "again":
            what = "; ".join(gone)
            raise DownloadVerificationError(
                f"placed in the cache, but incomplete there right after ({what}); another process removed "
                "its files meanwhile (kernels cache prune, or a tool deleting blobs)",
                subject=task.label,
                hint="run the command again once it is done",
            )
    progress.variant_done(task, cached=False, files=count, size=size)
    return count, size, [], "placed"


def _not_in_place(repo: Path, task: VariantTask, listing: dict[str, TreeFile]) -> list[str]:
    """Each file of the placed variant whose blob is no longer there, at the listed size."""
    folder = cache.variant_dir(repo, task.kernel.sha, task.variant)
    gone = []
    for rel, entry in sorted(listing.items()):
        try:
            info = os.stat(folder.joinpath(*rel.split("/")))  # through the link, to the blob
        except OSError:
            gone.append(f"{rel} missing")
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_size != entry.size:
            gone.append(f"{rel} modified")
    return gone


def _fetch_blobs(
    task: VariantTask, hub: HubClient, repo: Path, listing: dict[str, TreeFile], pool: ThreadPoolExecutor,
    progress: Progress,
) -> tuple[int, int]:  # fmt: skip
    """Every blob of ``listing`` not already valid in ``blobs/``, downloaded and verified; returns
    (files fetched, bytes fetched)."""
    from concurrent.futures import wait

    blobs: dict[str, tuple[str, TreeFile]] = {}  # one download per content, however many paths share it
    for rel, entry in listing.items():
        if entry.content_hash not in blobs and not cache.blob_is_valid(repo, entry.content_hash):
            blobs[entry.content_hash] = (rel, entry)
    fetched = list(blobs.values())
    progress.expect(task, len(fetched), sum(entry.size - _resumable(repo, entry) for _, entry in fetched))
    futures = [pool.submit(_fetch_file, task, hub, repo, entry, rel, progress) for rel, entry in fetched]
    try:
        results = [future.result() for future in futures]
    except Exception:
        # One file failed: the files not started are not started, and those under way end
        # (placing their blob, or removing or keeping their partial as their rules say)
        # before the variant's lock is let go and the error reaches the caller. Ctrl-C is
        # not held up: it ends the process at once (kernel_deps.cli.interrupt).
        for future in futures:
            future.cancel()
        wait(futures)
        raise
    return len(fetched), sum(results)


def _resumable(repo: Path, entry: TreeFile) -> int:
    """The bytes of ``entry`` an interrupted run left in its partial file, which are not fetched again."""
    try:
        size = cache.partial_path(repo, entry.content_hash).stat().st_size
    except OSError:
        return 0
    return size if size <= entry.size else 0


@contextmanager
def _acquire(lock_file: Path, label: str, hub: HubClient, progress: Progress) -> Iterator[None]:
    """Hold the lock ``lock_file``, waiting for another process at most the operation's time
    left; a wait longer than a moment is told through ``progress``, and so is, once, a file
    system where locks are taken without flock (:class:`kernel_deps.core.filelocks.HostLock`)."""
    transport = hub.transport
    # No command holds a lock longer than its budget; twice that allows for clocks that disagree.
    lock = HostLock(lock_file, stale_after=2 * transport.budget, on_note=progress.message)

    def tell() -> None:
        progress.message(f"waiting for another kernels download of {label} (lock {lock_file}) ...")

    if not acquire_within(lock, transport.time_left, tell):
        holder = lock.holder()
        who = f" ({holder})" if holder else ""
        raise CacheBusyError(
            f"another kernels download{who} held {lock_file} until the {transport.budget:g} s budget was spent",
            subject=label,
            hint=f"run again once it is done (raise {BUDGET_ENV} to wait longer), or delete that file if none is running",
        )
    try:
        yield
    finally:
        lock.release()


def _fetch_file(task: VariantTask, hub: HubClient, repo: Path, entry: TreeFile, rel: str, progress: Progress) -> int:
    """Download one file, verify it, and make it a blob; returns the bytes received.

    The file is written to its partial path (one writer at a time, any process); what an
    interrupted run left there is resumed. A partial file stays only when the Hub fails
    part-way, for the next run to resume; anything that fails verification is removed.
    """
    partial = cache.partial_path(repo, entry.content_hash)
    label = f"{task.label} {rel}"
    with _acquire(cache.partial_lock_path(repo, entry.content_hash), label, hub, progress):
        if cache.blob_is_valid(repo, entry.content_hash):  # another download placed it meanwhile
            return 0
        keep = False
        try:
            if partial.exists() and partial.stat().st_size > entry.size:
                partial.unlink()
            resumed = partial.exists() and partial.stat().st_size > 0
            received = 0
            for attempt in ("resume", "fresh") if resumed else ("fresh",):
                if attempt == "fresh":
                    partial.unlink(missing_ok=True)
                if not partial.exists() or partial.stat().st_size < entry.size:
                    try:
                        received += hub.download_to(
                            task.kernel.repo_id, task.kernel.sha, entry.path, partial,
                            size=entry.size, on_bytes=progress.add_bytes,
                        )
                    except HubError:
                        keep = partial.exists() and partial.stat().st_size > 0  # resumable next run
                        raise
                kind = cache.hash_kind(entry.content_hash)
                got = cache.content_hash_of(partial, kind)
                size = partial.stat().st_size
                if got == entry.content_hash and size == entry.size:
                    cache.place_blob(repo, partial, entry.content_hash)
                    progress.file_done(task, rel, entry.size)
                    return received
            raise DownloadVerificationError(
                f"{rel} does not match the Hub's listing (Expected {kind} {entry.content_hash}, "
                f"{entry.size} bytes; Got {got}, {size} bytes); removed it",
                subject=task.label,
            )
        finally:
            if not keep:
                partial.unlink(missing_ok=True)

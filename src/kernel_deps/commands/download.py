"""`kernels download` as a library function: exactly the locked bytes, proven, in the HF cache.

For each locked kernel and each chosen variant:

1. A variant already in the cache that recomputes to the locked hash costs no request.
2. Otherwise the Hub's tree listing of ``build/<variant>/`` at the locked commit must hash
   (``git_lfs_concat``) to the locked value before a byte is fetched: a rewritten repo is
   refused up front.
3. Every file is streamed to a private temporary path, hashed, and checked against the
   listing (LFS SHA-256 or git blob SHA-1, and size) before it becomes a blob.
4. Only when every file is verified is the variant folder linked and renamed into
   ``snapshots/<commit>/build/<variant>``.

A mismatch deletes what arrived and names the kernel, variant, file, expected and actual
hashes. Files of all variants of all kernels download concurrently.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

from kernel_deps.cache import store as cache
from kernel_deps.cache.pools import worker_pool
from kernel_deps.core.errors import (
    CacheBusyError,
    DownloadVerificationError,
    FileWriteError,
    HubError,
    KernelCacheReadError,
    KernelDepsError,
    OfflineError,
    PathNotFoundError,
    TargetNotServedError,
    UnsafeRepoContentError,
    UsageError,
)
from kernel_deps.core.filelocks import acquire_within
from kernel_deps.core.hashing import is_hashed_path, variant_hash
from kernel_deps.core.records import Record, replaceable
from kernel_deps.core.settings import (
    BUDGET_ENV,
    BUILD_DIR,
    HUB_WORKERS,
    LOCK_NAME,
    PYPROJECT_NAME,
    is_offline,
    offline_env,
)
from kernel_deps.core.system import SystemInfo, detect_system
from kernel_deps.core.targets import Target, serving_variant, targets_from_options
from kernel_deps.core.variants import is_valid_variant_name, parse_variant, select_variant, system_for_variant
from kernel_deps.trust.signers import SignaturePolicy
from kernel_deps.lock.model import LockedKernel, Lockfile

if TYPE_CHECKING:  # a warm run finds everything in the cache: it imports neither the Hub client nor filelock
    from concurrent.futures import ThreadPoolExecutor  # nor starts a thread pool

    from filelock import FileLock

    from kernel_deps.cache.subset import SubsetReport, WantedVariant  # --into only

    from kernel_deps.hub.client import HubClient, TreeFile
    from kernel_deps.trust.signatures import PolicyPlace, VariantRefusal


class VariantTask(Record):
    """One variant of one locked kernel to make present and verified."""

    __slots__ = ("kernel", "variant")
    kernel: LockedKernel
    variant: str

    def __init__(self, kernel: LockedKernel, variant: str) -> None:
        self._init(kernel, variant)

    @property
    def label(self) -> str:
        return f"{self.kernel.repo_id} {self.variant}"


class VariantOutcome(Record):
    """One variant a run made present: whether it was cached already, and what it fetched."""

    __slots__ = ("task", "cached", "files", "size")
    task: VariantTask
    cached: bool
    files: int
    size: int

    def __init__(self, task: VariantTask, cached: bool, files: int, size: int) -> None:
        self._init(task, cached, files, size)


SCHEMA_VERSION = 2  # of docs/schemas/download.schema.json; see docs/ci.md


@replaceable  # to-wheel and sync build on one
class DownloadReport(Record):
    """What a download run did: every variant it made present, and what it fetched."""

    __slots__ = (
        "already_cached", "fetched", "files_fetched", "bytes_fetched", "cache_root", "outcomes", "lockfile", "into",
        "warnings",
    )  # fmt: skip
    already_cached: list[VariantTask]
    fetched: list[VariantTask]
    files_fetched: int
    bytes_fetched: int
    cache_root: Path | None
    outcomes: list[VariantOutcome]  # every variant, in lock order
    lockfile: Path | None  # the lock downloaded from (None: a Lockfile given in memory)
    into: SubsetReport | None  # --into: the variants placed in a folder of their own
    warnings: list[str]  # the lock used as it is though it no longer agrees with pyproject.toml

    def __init__(
        self, already_cached: list[VariantTask] | None = None, fetched: list[VariantTask] | None = None,
        files_fetched: int = 0, bytes_fetched: int = 0, cache_root: Path | None = None,
        outcomes: list[VariantOutcome] | None = None, lockfile: Path | None = None, into: SubsetReport | None = None,
        warnings: list[str] | None = None,
    ) -> None:  # fmt: skip
        self._init([] if already_cached is None else already_cached, [] if fetched is None else fetched,
                   files_fetched, bytes_fetched, cache_root, [] if outcomes is None else outcomes, lockfile, into,
                   [] if warnings is None else warnings)  # fmt: skip

    def wanted(self) -> list[WantedVariant]:
        """Every variant the run made present, as ``--into`` places them."""
        from kernel_deps.cache.subset import WantedVariant

        return [WantedVariant(o.task.kernel.repo_id, o.task.kernel.sha, o.task.variant,
                              o.task.kernel.variants[o.task.variant].hash) for o in self.outcomes]  # fmt: skip

    def to_json(self) -> dict:
        """The report as docs/schemas/download.schema.json describes it."""
        into = {"into": self.into.to_json()} if self.into is not None else {}  # --into only
        return {
            "schema_version": SCHEMA_VERSION,
            "lockfile": str(self.lockfile),
            "cache": str(self.cache_root),
            "downloaded": len(self.fetched),
            "already_cached": len(self.already_cached),
            "files": self.files_fetched,
            "bytes": self.bytes_fetched,
            "warnings": list(self.warnings),
            "variants": [
                {
                    "repo_id": o.task.kernel.repo_id,
                    "commit": o.task.kernel.sha,
                    "variant": o.task.variant,
                    "hash": o.task.kernel.variants[o.task.variant].hash,
                    "state": "cached" if o.cached else "downloaded",
                    "files": o.files,
                    "bytes": o.size,
                }
                for o in self.outcomes
            ],
        } | into


class Progress:
    """Receives download events; the default does nothing."""

    def start(self, tasks: Sequence[VariantTask]) -> None:
        """Called once with every variant the run will make present."""

    def add_bytes(self, count: int) -> None:
        """Called as bytes arrive (negative when a restarted file takes bytes back)."""

    def variant_done(self, task: VariantTask, *, cached: bool, files: int, size: int) -> None:
        """Called when a variant is present and verified."""

    def message(self, text: str) -> None:
        """Called with a line the user should see while waiting (e.g. for another download)."""


def choose_variants(
    kernel: LockedKernel,
    *,
    all_variants: bool = False,
    requested: Sequence[str] = (),
    system: SystemInfo | None = None,
) -> list[str]:
    """The variants of ``kernel`` to download: this machine's best, every one, or as requested."""
    names = sorted(kernel.variants)
    if all_variants:
        return names
    if not requested:
        return [select_variant(kernel.repo_id, names, system or detect_system())]
    chosen: list[str] = []
    for name in requested:
        if name in kernel.variants:
            chosen.append(name)
            continue
        parsed = parse_variant(name)
        if parsed is None or parsed.noarch or parsed.framework != "torch":
            raise UsageError(
                f"--variant {name}: {kernel.repo_id} has no such variant; it has {', '.join(names) or 'none'}"
            )
        # An arch build this kernel lacks: take its best variant for that target system.
        chosen.append(select_variant(kernel.repo_id, names, system_for_variant(name)))
    return sorted(set(chosen))


def variants_for_targets(kernel: LockedKernel, targets: Sequence[Target]) -> list[str]:
    """The variant of ``kernel`` that serves each target (the loader's pick there); exit 1
    naming the kernel and the target when the lock has none for it."""
    chosen: set[str] = set()
    for target in targets:
        name = serving_variant(target, kernel.variants)
        if name is None:
            locked = ", ".join(sorted(kernel.variants)) or "none"
            raise TargetNotServedError(
                f"--target {target.name}: {kernel.repo_id} {kernel.version or kernel.sha[:12]} has no build for it "
                f"(locked: {locked}); declare it in [tool.kernels] targets and run 'kernels lock' to pick a "
                "version that has one"
            )
        chosen.add(name)
    return sorted(chosen)


def check_tree_paths(task: VariantTask, files: Iterable[TreeFile]) -> dict[str, TreeFile]:
    """Relative path -> entry for the hashed files of a variant; refuses unsafe paths."""
    from kernel_deps.hub.listing import path_problem, shown_path

    prefix = f"{BUILD_DIR}/{task.variant}/"
    out: dict[str, TreeFile] = {}
    for entry in files:
        rel = entry.path[len(prefix):] if entry.path.startswith(prefix) else None
        if rel is None or path_problem(rel):
            raise UnsafeRepoContentError(
                f"{task.label}: the repo lists an unsafe path {shown_path(entry.path)}; refusing to download this kernel"
            )
        if is_hashed_path(rel):
            out[rel] = entry
    return out


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
    fetched is admitted into ``snapshots/`` only once all of that holds (:func:`admit_variant`)
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
            raise UnsafeRepoContentError(f"{task.kernel.repo_id}: {task.variant!r} is not a valid variant name")
    progress.start(tasks)
    if any(task.variant in task.kernel.signatures for task in tasks):
        _prepare_verifier(policy)  # sigstore's import overlaps the hashing of the cached files
    cached: list[VariantTask] = []
    fetched: list[VariantTask] = []
    outcomes: list[VariantOutcome] = []
    refused: list[tuple[VariantRefusal, str]] = []  # each refusal, and what became of the variant
    missing = []
    _check_cache_root(root)
    # Every chosen variant checked at once: their files share the hashing threads when they are large.
    checks = cache.check_variants([(t.kernel.repo_id, t.kernel.sha, t.variant, t.kernel.variants[t.variant].hash)
                                   for t in tasks], root=root)  # fmt: skip
    for task, check in zip(tasks, checks):
        if isinstance(check, OSError):
            raise _cache_error(task, check, "read") from None
        if not check.ok:
            missing.append(task)
            continue
        found, fate = _judge_present(task, check, policy, holding_lock=False)
        refused += [(r, fate) for r in found]
        if not found:
            cached.append(task)
            outcomes.append(VariantOutcome(task, cached=True, files=0, size=0))
            progress.variant_done(task, cached=True, files=0, size=0)
    if refused and (not missing or is_offline()):  # what is missing is still fetched, then all is told
        raise _download_refusal(refused, place)
    if not missing:
        return DownloadReport(cached, cache_root=root, outcomes=outcomes)
    if is_offline():
        names = ", ".join(t.label for t in missing)
        raise OfflineError(f"not in the cache and {offline_env()} is set: {names}; run 'kernels download' with network access")

    if hub is None:
        from kernel_deps.hub.client import HubClient

        hub = HubClient()
    files_fetched = bytes_fetched = 0
    # One time budget for the whole download. An interrupt or failure returns at once;
    # files still in flight are not waited for.
    with hub.operation():
        with worker_pool(max_workers, "kernel-deps-download") as files_pool:
            with worker_pool(max(1, min(len(missing), max_workers)), "kernel-deps-variant") as variants_pool:
                futures = [variants_pool.submit(_fetch_variant, task, hub, root, files_pool, progress, policy)
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
        raise _download_refusal(refused, place)
    order = {id(task): i for i, task in enumerate(tasks)}
    outcomes.sort(key=lambda outcome: order[id(outcome.task)])
    return DownloadReport(cached, fetched, files_fetched, bytes_fetched, root, outcomes)


def _prepare_verifier(policy: SignaturePolicy) -> None:
    import threading

    from kernel_deps.trust.bundles import prepare

    threading.Thread(target=prepare, args=(policy.trusted_root,), name="kernel-deps-sigstore", daemon=True).start()


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


def _judge_present(
    task: VariantTask, check: cache.VariantCheck, policy: SignaturePolicy, *, holding_lock: bool
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
        raise _cache_error(task, exc, "read") from None
    if not refused or any(r.kind != "digest" for r in refused):
        return refused, "kept"
    repo = check.path.parents[3]  # snapshots/<commit>/build/<variant>
    removed = _remove_own_placement(task, repo) if not holding_lock else _remove_placement(task, repo)
    return refused, "removed" if removed else "kept"


def _remove_own_placement(task: VariantTask, repo: Path) -> bool:
    """:func:`_remove_placement` under the variant's lock, when no other download holds it now."""
    from filelock import FileLock, Timeout

    lock_file = cache.variant_lock_path(repo, task.kernel.sha, task.variant)
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(lock_file), timeout=0):
            return _remove_placement(task, repo)
    except (Timeout, OSError):
        return False  # another download is at it, or the cache cannot be written: left as it is


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


def _download_refusal(refused: Sequence[tuple[VariantRefusal, str]], place: PolicyPlace) -> KernelDepsError:
    """One error naming every refused variant, saying what became of each kind."""
    from kernel_deps.trust.signatures import refusal

    outcome = ", or ".join(_FATES[fate] for fate in dict.fromkeys(fate for _, fate in refused))
    return refusal([r for r, _ in refused], outcome=outcome, place=place)


def _present(task: VariantTask, root: Path) -> cache.VariantCheck:
    locked = task.kernel.variants[task.variant].hash
    try:
        return cache.check_variant(task.kernel.repo_id, task.kernel.sha, task.variant, locked, root=root)
    except OSError as exc:
        raise _cache_error(task, exc, "read") from None


def _check_cache_root(root: Path) -> None:
    """FileWriteError naming ``root`` when it cannot be the cache (absent is fine: it is made)."""
    hint = "point KERNELS_CACHE or HF_HUB_CACHE at a folder (or unset them)"
    try:
        mode = os.stat(root).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise FileWriteError(f"{root}: cannot be used as the kernel cache ({exc.strerror or exc}); {hint}") from None
    if not stat.S_ISDIR(mode):
        raise FileWriteError(f"{root}: the kernel cache is not a folder; {hint}")


def _cache_error(task: VariantTask, exc: OSError, doing: str) -> FileWriteError | KernelCacheReadError:
    """One line for a file-system failure in the cache, naming the path and what to check."""
    where = exc.filename or "the kernel cache"
    error = KernelCacheReadError if doing == "read" else FileWriteError
    return error(
        f"{task.label}: cannot {doing} {where} ({exc.strerror or exc}); check that the kernel cache "
        "(KERNELS_CACHE, HF_HUB_CACHE) is a writable folder with free space and paths the system allows"
    )


Fetched = tuple[int, int, list["VariantRefusal"], str]  # files and bytes fetched, refusals, what became of it


def _fetch_variant(
    task: VariantTask, hub: HubClient, root: Path, pool: ThreadPoolExecutor, progress: Progress,
    policy: SignaturePolicy,
) -> Fetched:  # fmt: skip
    """Fetch, verify, admit and check one variant."""
    try:
        return _fetch_variant_into_cache(task, hub, root, pool, progress, policy)
    except OSError as exc:  # the cache's own folders and files: Hub errors are mapped by the transport
        raise _cache_error(task, exc, "write") from None


def _fetch_variant_into_cache(
    task: VariantTask, hub: HubClient, root: Path, pool: ThreadPoolExecutor, progress: Progress,
    policy: SignaturePolicy,
) -> Fetched:  # fmt: skip
    from filelock import FileLock

    kernel = task.kernel
    repo = cache.repo_dir(kernel.repo_id, hub.repo_type(kernel.repo_id), root)
    lock_file = cache.variant_lock_path(repo, kernel.sha, task.variant)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with _acquire(FileLock(str(lock_file)), task.label, hub, progress):
        present = _present(task, root)
        if present.ok:  # another process placed it while we waited: judged as any cached copy
            refused, fate = _judge_present(task, present, policy, holding_lock=True)
            if not refused:
                progress.variant_done(task, cached=True, files=0, size=0)
            return 0, 0, refused, fate
        cache.remove_stale_partials(repo)
        try:
            listed = hub.list_variant_files(kernel.repo_id, kernel.sha, task.variant)
        except PathNotFoundError:
            raise DownloadVerificationError(
                f"{task.label}: the Hub has no {BUILD_DIR}/{task.variant} at {kernel.sha[:12]}; the lock names a "
                "variant the repo does not have (edited lock or rewritten repo); nothing was downloaded"
            ) from None
        listing = check_tree_paths(task, listed)
        expected = kernel.variants[task.variant].hash
        served = variant_hash((rel, entry.content_hash) for rel, entry in listing.items())
        if not listing or served != expected:
            raise DownloadVerificationError(
                f"{task.label}: the Hub serves different content at {kernel.sha[:12]} than kernels.lock pins "
                f"(Expected {expected}, Got {served}); the repo may have been rewritten; nothing was downloaded"
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
                    f"{task.label}: placed in the cache, but incomplete there right after ({what}); another "
                    "process removed its files meanwhile (kernels cache prune, or a tool deleting blobs); "
                    "run the command again once it is done"
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
    futures = [pool.submit(_fetch_file, task, hub, repo, entry, rel, progress) for rel, entry in fetched]
    try:
        results = [future.result() for future in futures]
    except Exception:
        # One file failed: the files not started are not started, and those under way end
        # (placing their blob, or removing or keeping their partial as their rules say)
        # before the variant's lock is let go and the error reaches the caller. Ctrl-C is
        # not held up: it ends the process at once (kernel_deps.interrupt).
        for future in futures:
            future.cancel()
        wait(futures)
        raise
    return len(fetched), sum(results)


@contextmanager
def _acquire(lock: FileLock, label: str, hub: HubClient, progress: Progress) -> Iterator[None]:
    """Hold ``lock``, waiting for another process at most the operation's time left;
    a wait longer than a moment is told through ``progress``."""
    transport = hub.transport

    def tell() -> None:
        progress.message(f"waiting for another kernels download of {label} (lock {lock.lock_file}) ...")

    if not acquire_within(lock, transport.time_left, tell):
        raise CacheBusyError(
            f"{label}: another kernels download held {lock.lock_file} until the {transport.budget:g} s budget was spent; "
            f"run again once it is done (raise {BUDGET_ENV} to wait longer), or delete that file if none is running"
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
    from filelock import FileLock

    partial = cache.partial_path(repo, entry.content_hash)
    label = f"{task.label} {rel}"
    with _acquire(FileLock(str(cache.partial_lock_path(repo, entry.content_hash))), label, hub, progress):
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
                    return received
            raise DownloadVerificationError(
                f"{task.label}: {rel} does not match the Hub's listing "
                f"(Expected {kind} {entry.content_hash}, {entry.size} bytes; Got {got}, {size} bytes); removed it"
            )
        finally:
            if not keep:
                partial.unlink(missing_ok=True)


def download_project(
    project_dir: Path,
    *,
    all_variants: bool = False,
    variants: Sequence[str] = (),
    targets: Sequence[str] = (),
    all_targets: bool = False,
    hub: HubClient | None = None,
    progress: Progress | None = None,
    into: Path | None = None,
) -> DownloadReport:
    """Download what ``<project_dir>/kernels.lock`` pins, for this machine unless told otherwise:
    every variant, the named ``variants``, or the builds that serve the named ``targets``
    (or every target pyproject.toml declares, ``all_targets``); with ``into``, then place
    exactly those variants in that folder (:func:`kernel_deps.cache.subset.place_subset`)."""
    from kernel_deps.lock.read import read_lock

    if all_variants and (variants or targets or all_targets):
        raise UsageError("--all-variants downloads every variant; drop --variant, --target and --all-targets")
    from kernel_deps.lock.freshness import judge_for_use, read_rules

    # pyproject.toml read once: its targets, and what it asks of the lock, judged before a byte
    # is fetched the same way for every lock format (none when the lock was copied alone).
    lock_file = Path(project_dir) / LOCK_NAME
    rules = read_rules(Path(project_dir))
    found = read_lock(lock_file, purpose="use")  # ours or kernels <= 0.16's, never rewritten
    warning = judge_for_use(found, rules, str(lock_file), "refusing to download")  # said, not refused
    declared = rules.targets if rules is not None else ()
    chosen_targets = targets_from_options(targets, all_targets, declared, Path(project_dir) / PYPROJECT_NAME)
    lock = found.lock
    system = None if (all_variants or variants or chosen_targets) else detect_system()

    def variants_for(kernel: LockedKernel) -> list[str]:
        if chosen_targets and not variants:
            return variants_for_targets(kernel, chosen_targets)
        picked = choose_variants(kernel, all_variants=all_variants, requested=variants, system=system)
        return sorted(set(picked) | set(variants_for_targets(kernel, chosen_targets)))

    if into is not None:
        from kernel_deps.cache.subset import check_folder, place_subset

        check_folder(Path(into), cache.cache_root(), project=Path(project_dir))  # bad input before anything is fetched
    policy = rules.policy if rules is not None else None
    report = download_lock(lock, variants_for=variants_for, hub=hub, progress=progress, policy=policy)
    placed = (place_subset(report.wanted(), Path(into), root=report.cache_root, project=Path(project_dir))
              if into is not None else None)  # fmt: skip
    return replace(report, lockfile=lock_file, into=placed, warnings=[warning] if warning else [])

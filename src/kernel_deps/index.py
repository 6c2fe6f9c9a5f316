"""The resolver's view of the Hub for one run: refs, trees and dependencies, fetched once.

Every answer is memoised per run, so a repo's refs are listed once however often the
resolver asks, each candidate commit is listed once, and each distinct ``metadata.json``
(by the content hash its listing gives) is read once, however many variants or commits
share it. Work for independent repos runs concurrently: when a candidate's dependencies
become known, their refs and the dependencies of their most likely pick are fetched in
background threads, up to ``settings.HUB_RESOLVE_WORKERS`` requests in flight, so
resolving N kernels costs about as many round trips as resolving one. A background
failure is kept and raised only if the resolver asks for that answer.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, TypeVar

from kernel_deps.errors import HubError, InvalidKernelMetadataError, PyprojectError
from kernel_deps import cache
from kernel_deps.hashing import variant_hash
from kernel_deps.hub import MAX_SMALL_FILE_BYTES, HubClient, RepoRefs, TreeFile
from kernel_deps.settings import BUILD_DIR, HUB_RESOLVE_WORKERS
from kernel_deps.spec import KernelRequirement, parse_kernel_depends
from kernel_deps.variants import is_valid_variant_name

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class VariantTree:
    """The files of every variant of a repo at one commit."""

    files: dict[str, tuple[TreeFile, ...]]

    def variant_hash(self, variant: str) -> str:
        """``git_lfs_concat`` of one variant as the Hub lists it."""
        cut = len(BUILD_DIR) + len(variant) + 2
        return variant_hash((f.path[cut:], f.content_hash) for f in self.files[variant])


class _Once:
    """A value computed by exactly one thread; others wait for it."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: object = None
        self.error: BaseException | None = None


class KernelIndex:
    """Memoised, concurrent access to the refs, trees and dependencies of kernel repos."""

    def __init__(self, hub: HubClient, *, max_workers: int = HUB_RESOLVE_WORKERS) -> None:
        self.hub = hub
        # Prefetch tasks may wait on Hub calls; Hub calls never wait on anything. Two pools
        # keep a full prefetch pool from starving the calls it waits for.
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="kernel-deps-prefetch")
        self._calls = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="kernel-deps-hub")
        self._memo: dict[tuple, _Once] = {}
        self._lock = threading.Lock()
        self._cache_root = cache.cache_root()

    def close(self, *, wait: bool = True) -> None:
        """Stop background work (pending prefetches are dropped); ``wait`` for running calls."""
        self._pool.shutdown(wait=wait, cancel_futures=True)
        self._calls.shutdown(wait=wait, cancel_futures=True)

    def __enter__(self) -> "KernelIndex":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        # After an interrupt or failure, Hub calls still running are not waited for.
        self.close(wait=exc_type is None)

    # -- answers ----------------------------------------------------------------------

    def refs(self, repo_id: str) -> RepoRefs:
        """The repo's refs, listed once per run."""
        return self._once(("refs", repo_id), lambda: self.hub.list_refs(repo_id))

    def tree(self, repo_id: str, commit: str) -> VariantTree:
        """Every file under ``build/<variant>/`` at ``commit`` for valid variant names,
        grouped by variant; listed once."""

        def fetch() -> VariantTree:
            grouped: dict[str, list[TreeFile]] = {}
            prefix = BUILD_DIR + "/"
            for entry in self.hub.list_variant_files(repo_id, commit):
                variant, _, rest = entry.path[len(prefix):].partition("/")
                # A folder that is not a valid variant name is never locked, so it is
                # never downloaded or loaded either.
                if entry.path.startswith(prefix) and rest and is_valid_variant_name(variant):
                    grouped.setdefault(variant, []).append(entry)
            return VariantTree({v: tuple(files) for v, files in grouped.items()})

        return self._once(("tree", repo_id, commit), fetch)

    def dependencies(self, repo_id: str, commit: str) -> tuple[KernelRequirement, ...]:
        """The union of ``kernel-depends`` over the variants' metadata at ``commit``."""

        def fetch() -> tuple[KernelRequirement, ...]:
            tree = self.tree(repo_id, commit)
            listed = [
                (variant, entry)
                for variant, files in tree.files.items()
                for entry in files
                if entry.path == f"{BUILD_DIR}/{variant}/metadata.json"
            ]
            # Every file read at once; variants whose metadata.json is the same content share one read.
            metadata = list(self._calls.map(lambda item: self._metadata_of(repo_id, commit, item[1]), listed))
            found: dict[tuple, KernelRequirement] = {}
            for (variant, _), meta in zip(listed, metadata):
                source = f"{repo_id}@{commit[:12]} build/{variant}/metadata.json"
                try:
                    requirements = parse_kernel_depends(meta.get("kernel-depends", []), source=source)
                except PyprojectError as exc:
                    raise InvalidKernelMetadataError(exc.message) from None
                for req in requirements:
                    found.setdefault((req.repo_id, req.text), req)
            return tuple(found[key] for key in sorted(found))

        return self._once(("deps", repo_id, commit), fetch)

    def _metadata_of(self, repo_id: str, commit: str, entry: TreeFile) -> dict:
        """A listed ``metadata.json``, read once per content hash in this run; the bytes
        must be the content the listing names, since other variants take them on trust."""

        def fetch() -> dict:
            source = f"{repo_id}@{commit[:12]}: {entry.path}"
            repo = cache.repo_dir(repo_id, self.hub.repo_type(repo_id), self._cache_root)
            data = cache.read_blob(repo, entry.content_hash, MAX_SMALL_FILE_BYTES)
            if data is None:
                data = self.hub.read_small_file(repo_id, commit, entry.path)
                got = cache.content_hash_of_bytes(data, cache.hash_kind(entry.content_hash))
                if got != entry.content_hash:
                    raise HubError(
                        f"{source}: the Hub serves content that differs from its listing (Expected "
                        f"{entry.content_hash}, Got {got}); refusing to lock this kernel"
                    )
                cache.keep_blob(repo, entry.content_hash, data)
            return parse_metadata(data, source)

        return self._once(("metadata", entry.content_hash), fetch)

    def metadata(self, repo_id: str, commit: str, variant: str) -> dict:
        """The parsed ``build/<variant>/metadata.json`` at ``commit`` (read, not cached on disk)."""
        data = self.hub.read_small_file(repo_id, commit, f"{BUILD_DIR}/{variant}/metadata.json")
        return parse_metadata(data, f"{repo_id}@{commit[:12]}: {BUILD_DIR}/{variant}/metadata.json")

    # -- speculation ------------------------------------------------------------------

    def prefetch(self, requirements: Iterable[KernelRequirement], pick: Callable[[KernelRequirement], str | None]) -> None:
        """In the background: list refs for each requirement, then fetch the dependencies
        of the commit ``pick`` would choose for it, and so on down the graph."""

        def warm(req: KernelRequirement) -> None:
            self.refs(req.repo_id)
            commit = pick(req)
            if commit is not None:
                # Follow the likely picks down the graph, so deep chains warm up too.
                self.prefetch(self.dependencies(req.repo_id, commit), pick)

        for req in requirements:
            key = ("prefetch", req.repo_id, req.text)
            with self._lock:
                if key in self._memo:
                    continue
                self._memo[key] = _Once()
            self._pool.submit(self._quietly, warm, req)

    @staticmethod
    def _quietly(fn: Callable[[KernelRequirement], None], req: KernelRequirement) -> None:
        try:
            fn(req)
        except BaseException:  # noqa: BLE001 - kept in the memo; raised when asked for
            pass

    def _once(self, key: tuple, compute: Callable[[], T]) -> T:
        with self._lock:
            slot = self._memo.get(key)
            owner = slot is None
            if owner:
                slot = self._memo[key] = _Once()
        if owner:
            try:
                slot.value = compute()
            except BaseException as exc:  # noqa: BLE001 - re-raised to every asker
                slot.error = exc
            finally:
                slot.done.set()
        else:
            slot.done.wait()
        if slot.error is not None:
            raise slot.error
        return slot.value  # type: ignore[return-value]


def parse_metadata(data: bytes, source: str) -> dict:
    """A variant's ``metadata.json`` as a dict; HubError naming ``source`` when it is not one."""
    try:
        parsed = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HubError(f"{source} is not valid JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise HubError(f"{source} is not a JSON object")
    return parsed

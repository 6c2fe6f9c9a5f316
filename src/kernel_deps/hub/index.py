"""The resolver's view of the Hub for one run: refs, trees and dependencies, fetched once.

Every answer is memoised per run, so a repo's refs are listed once however often the
resolver asks, each candidate commit is listed once, and each distinct ``metadata.json``
(by the content hash its listing gives) is read once, however many variants or commits
share it. Work for independent repos runs concurrently: when a candidate's dependencies
become known, their refs and the dependencies of their most likely pick are fetched in
background threads (``settings.HUB_RESOLVE_WORKERS`` of them, and twice as many for the
requests they wait on), so resolving N kernels costs about as many round trips as
resolving one. A background failure is kept and raised only if the resolver asks for
that answer.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Callable, Iterable, Sequence, TypeVar

from kernel_deps.cache import store as cache
from kernel_deps.core import jsondoc
from kernel_deps.core.errors import (
    HubError,
    InvalidKernelMetadataError,
    PyprojectError,
    RepoNotFoundError,
)
from kernel_deps.core.hashing import variant_hash
from kernel_deps.core.records import Record
from kernel_deps.core.settings import BUILD_DIR, HUB_RESOLVE_WORKERS, KERNEL_STATUS_NAME
from kernel_deps.core.spec import (
    KernelRequirement,
    org_of,
    parse_kernel_depends,
    publisher_allowance,
)
from kernel_deps.core.variants import is_valid_variant_name
from kernel_deps.hub import hints
from kernel_deps.hub.client import MAX_SMALL_FILE_BYTES, CommitListing, HubClient
from kernel_deps.hub.listing import TreeFile
from kernel_deps.hub.memo import Once, RunMemo
from kernel_deps.hub.refs import RepoRefs
from kernel_deps.trust.publishers import PublisherTrust
from kernel_deps.hub.redirects import MAX_REDIRECTS, Redirect, and_list, parse_kernel_status, redirect_trail
from kernel_deps.trust.digests import BUNDLE_NAME, METADATA_NAME

T = TypeVar("T")

# Hub call threads per prefetch thread (KernelIndex): with settings.HUB_RESOLVE_WORKERS
# prefetch threads, the prefetch and the calls keep at most three times that many requests
# in flight, within the 100 connections of huggingface_hub's HTTP client.
CALLS_PER_PREFETCH = 2

class VariantTree(Record):
    """The files of every variant of a repo at one commit."""

    __slots__ = ("files", "skipped")
    files: dict[str, tuple[TreeFile, ...]]
    # Folders under build/ whose names are not variant names: never locked, listed as skipped.
    skipped: tuple[str, ...]

    def __init__(self, files: dict[str, tuple[TreeFile, ...]], skipped: tuple[str, ...] = ()) -> None:
        self._init(files, skipped)

    def variant_hash(self, variant: str) -> str:
        """``git_lfs_concat`` of one variant as the Hub lists it."""
        cut = len(BUILD_DIR) + len(variant) + 2
        return variant_hash((f.path[cut:], f.content_hash) for f in self.files[variant])


class KernelIndex(RunMemo):
    """Memoised, concurrent access to the refs, trees and dependencies of kernel repos."""

    def __init__(
        self,
        hub: HubClient,
        *,
        max_workers: int = HUB_RESOLVE_WORKERS,
        held: Iterable[str] = (),
        publishers: Sequence[str] | None = None,
        on_signed: Callable[[], object] | None = None,
        on_bundle: Callable[[str, str, bytes, bytes], object] | None = None,
        early: bool = True,
    ) -> None:
        self.hub = hub
        # Prefetch tasks may wait on Hub calls; Hub calls never wait on anything. Two pools
        # keep a full prefetch pool from starving the calls it waits for. The calls get
        # twice the threads: each prefetch task waits on the reads of every build of its
        # commit (three for the sample kernels), so with as many threads as tasks the reads
        # of 20 kernels went in two waves, the second after the first one's round trip.
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="kernel-deps-prefetch")
        calls = CALLS_PER_PREFETCH * max_workers
        self._calls = ThreadPoolExecutor(max_workers=calls, thread_name_prefix="kernel-deps-hub")
        RunMemo.__init__(self, self._calls)
        # Every repo found to redirect during this run, with each redirect met from it on,
        # for the notes `kernels lock` prints.
        self.redirects_followed: dict[str, tuple[Redirect, ...]] = {}
        # Repos whose prior pin holds: a redirect added upstream since does not move them.
        self.held = frozenset(held)
        # The project's [tool.kernels.trust] publishers; None: publishers are not checked, so
        # the Hub is never asked about them. Otherwise each repo met whose organization the
        # project does not allow has its organization asked about in the background.
        self.publishers = None if publishers is None else tuple(publishers)
        # Run once, in the background, when the first signed variant is met (a lock readies its verifier).
        self.on_signed = on_signed
        self.on_bundle = on_bundle  # given (repo id, variant, metadata.json, bundle) of each signed build read
        self.early = early  # files read early from main's listing (hints.py); no use when picks wait for listings
        self._pick: Callable[[KernelRequirement], str | None] | None = None  # the prefetch's, for early prefetches
        self.cache_root = cache.cache_root()

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
        """The repo's refs, listed once per run (and its publisher asked about, in the background)."""
        if self.publishers is not None and publisher_allowance(repo_id, self.publishers) is None:
            org = org_of(repo_id)
            with self._lock:
                asked = ("publisher", org) in self._memo
            if not asked:
                self._calls.submit(self._quietly, self.publisher, org)
        return self._once(("refs", repo_id), lambda: self.hub.list_refs(repo_id))

    def met_signed(self) -> None:
        """A signed variant was met: run ``on_signed`` once, in the background (if given)."""
        if self.on_signed is not None:
            self._signed_once()

    def _signed_once(self) -> None:
        with self._lock:
            if ("signed",) in self._memo:
                return
            self._memo[("signed",)] = Once()
        hook = self.on_signed
        assert hook is not None
        self._pool.submit(self._quietly, lambda _: hook(), None)

    def publisher(self, org: str) -> PublisherTrust:
        """Whether the Hub trusts ``org`` as a kernel publisher, asked once per run."""
        return self._once(("publisher", org), lambda: self.hub.publisher_trust(org))

    def listing(self, repo_id: str, commit: str) -> CommitListing:
        """The commit's recursive listing (its build files and top-level names), listed once."""
        return self._once(("listing", repo_id, commit), lambda: self.hub.list_commit(repo_id, commit))

    def tree(self, repo_id: str, commit: str) -> VariantTree:
        """Every file under ``build/<variant>/`` at ``commit`` for valid variant names,
        grouped by variant; listed once."""

        def fetch() -> VariantTree:
            grouped: dict[str, list[TreeFile]] = {}
            skipped: set[str] = set()
            prefix = BUILD_DIR + "/"
            for entry in self.listing(repo_id, commit).build_files:
                variant, _, rest = entry.path[len(prefix):].partition("/")
                # A folder that is not a valid variant name is never locked, so it is
                # never downloaded or loaded either.
                if entry.path.startswith(prefix) and rest and is_valid_variant_name(variant):
                    grouped.setdefault(variant, []).append(entry)
                elif entry.path.startswith(prefix) and rest:
                    skipped.add(variant)
            return VariantTree({v: tuple(files) for v, files in grouped.items()}, tuple(sorted(skipped)))

        return self._once(("tree", repo_id, commit), fetch)

    def dependencies(self, repo_id: str, commit: str) -> tuple[KernelRequirement, ...]:
        """The union of ``kernel-depends`` over the variants' metadata at ``commit``."""

        def fetch() -> tuple[KernelRequirement, ...]:
            hints.read_early(self, repo_id, commit)
            tree = self.tree(repo_id, commit)
            named = {(variant, entry.path[len(BUILD_DIR) + len(variant) + 2:]): entry
                     for variant, files in tree.files.items() for entry in files}  # fmt: skip
            listed = [(variant, entry) for (variant, name), entry in named.items() if name == METADATA_NAME]
            bundles = [(variant, entry) for (variant, name), entry in named.items() if name == BUNDLE_NAME]
            if bundles and self.on_signed is not None:
                self._signed_once()
            # Every file read at once; variants whose metadata.json is the same content share one read.
            reads = [self._calls.submit(self._metadata_of, repo_id, commit, entry) for _, entry in listed]
            # Each variant's signature bundle, which locking verifies, read in the background in the
            # same wave (queued after this commit's metadata.json reads), then given to on_bundle.
            for variant, entry in bundles:
                self._calls.submit(self._quietly, self._read_bundle, (repo_id, commit, variant, entry,
                                                                      named.get((variant, METADATA_NAME))))  # fmt: skip
            for read in reads:  # the kernels each one names prefetched as it arrives, not once all have
                read.add_done_callback(self._prefetch_named)
            metadata = [read.result() for read in reads]
            found: dict[tuple, KernelRequirement] = {}
            for (variant, _), meta in zip(listed, metadata):
                source = f"{repo_id}@{commit[:12]} build/{variant}/metadata.json"
                try:
                    requirements = parse_kernel_depends(meta.get("kernel-depends", []), source=source)
                except PyprojectError as exc:
                    raise InvalidKernelMetadataError(exc.reason, subject=exc.subject, hint=exc.hint) from exc
                for req in requirements:
                    found.setdefault((req.repo_id, req.text), req)
            followed = {(req.repo_id, req.text): req for req in self.follow_redirects(found[key] for key in sorted(found))}
            return tuple(followed[key] for key in sorted(followed))

        return self._once(("deps", repo_id, commit), fetch)

    def _read_bundle(self, job: tuple[str, str, str, TreeFile, TreeFile | None]) -> None:
        repo_id, commit, variant, entry, meta = job  # meta's read was queued first: under way, or done
        bundle = self.small_file(repo_id, commit, entry)
        if self.on_bundle is not None and meta is not None:
            self.on_bundle(repo_id, variant, self.small_file(repo_id, commit, meta), bundle)

    def redirect(self, repo_id: str) -> Redirect | None:
        """Where ``repo_id`` redirects, from the ``kernel-status.toml`` at the top of its main
        branch (as the Hugging Face library reads it); None when it has none. Asked once.

        The main branch's listing is the tree of its commit, which is usually also the
        newest release's: looking costs no request of its own then."""

        def fetch() -> Redirect | None:
            main = self._main_commit(repo_id)
            if main is None or KERNEL_STATUS_NAME not in self.listing(repo_id, main).top_level:
                return None
            data = self.hub.read_small_file(repo_id, main, KERNEL_STATUS_NAME)
            found = parse_kernel_status(repo_id, data, f"{repo_id}@{main[:12]}: {KERNEL_STATUS_NAME}")
            return Redirect(found.source, found.destination, found.revision, main)

        return self._once(("redirect", repo_id), fetch)

    def _main_commit(self, repo_id: str) -> str | None:
        return next((r.commit for r in self.refs(repo_id).refs if r.kind == "branch" and r.name == "main"), None)

    def redirects_from(self, repo_id: str) -> tuple[Redirect, ...]:
        """The redirects met from ``repo_id`` on: its own, its destination's, and so on, to a
        repo that does not redirect or is ``held`` (its pin holds); empty when ``repo_id``
        itself does not redirect. The one rule `kernels lock` and `kernels outdated` follow.

        InvalidKernelMetadataError for a loop or more than :data:`MAX_REDIRECTS`; HubError
        naming each redirect on the way when the last destination does not exist."""
        hops: list[Redirect] = []
        current = repo_id
        while current not in self.held:
            try:
                found = self.redirect(current)
            except RepoNotFoundError as exc:
                if not hops:
                    raise
                raise HubError(exc.reason, subject=f"{redirect_trail(hops)}, which is missing", hint=exc.hint) from exc
            if found is None:
                break
            hops.append(found)
            met = [repo_id, *(hop.destination for hop in hops[:-1])]
            if found.destination in met:
                owners = and_list(met[met.index(found.destination):])  # those in the loop
                raise InvalidKernelMetadataError(
                    "a loop of redirects",
                    subject=redirect_trail(hops),
                    hint=f"ask the owners of {owners} to fix it",
                )
            if len(hops) > MAX_REDIRECTS:
                way = " -> ".join([repo_id, *(hop.destination for hop in hops)])
                raise InvalidKernelMetadataError(
                    f"{KERNEL_STATUS_NAME} redirects more than {MAX_REDIRECTS} times ({way}); "
                    f"kernel-deps follows at most {MAX_REDIRECTS}: ask the owners of {repo_id} to "
                    "point it at the repo it moved to",
                    subject=repo_id,
                )
            current = found.destination
        if hops:
            with self._lock:
                self.redirects_followed[repo_id] = tuple(hops)
        return tuple(hops)

    def follow_redirects(self, requirements: Iterable[KernelRequirement]) -> list[KernelRequirement]:
        """``requirements`` with each repo that redirects replaced by where its redirects
        lead (:meth:`redirects_from`); the repos are asked concurrently. A repo in ``held``
        (pinned by the prior lock) is kept as it is and not asked."""
        requirements = list(requirements)
        found = list(self._calls.map(lambda req: self.redirects_from(req.repo_id), requirements))
        return [replace(req, repo_id=hops[-1].destination) if hops else req for req, hops in zip(requirements, found)]

    def parsed_metadata(self, repo_id: str, commit: str, entry: TreeFile) -> dict:
        """A listed ``metadata.json``, parsed once per content hash in this run."""
        return self._metadata_of(repo_id, commit, entry)

    def _metadata_of(self, repo_id: str, commit: str, entry: TreeFile) -> dict:
        source = f"{repo_id}@{commit[:12]}: {entry.path}"
        return self._once(("metadata", entry.content_hash),
                          lambda: parse_metadata(self.small_file(repo_id, commit, entry), source))  # fmt: skip

    def small_file(self, repo_id: str, commit: str, entry: TreeFile) -> bytes:
        """The bytes of a listed small file (``metadata.json``, its ``.sigstore`` bundle), read
        once per content hash in this run, from the cache when a blob of that name is there,
        and kept there when fetched; the bytes must be the content the listing names, since
        other variants take them on trust."""

        def fetch() -> bytes:
            source = f"{repo_id}@{commit[:12]}: {entry.path}"
            repo = cache.repo_dir(repo_id, self.hub.repo_type(repo_id), self.cache_root)
            data = cache.read_blob(repo, entry.content_hash, MAX_SMALL_FILE_BYTES)
            if data is None:
                data = hints.early_bytes(self, repo_id, commit, entry)
                if data is None:  # none read early, or other content
                    data = self.hub.read_small_file(repo_id, commit, entry.path)
                got = cache.content_hash_of_bytes(data, cache.hash_kind(entry.content_hash))
                if got != entry.content_hash:
                    raise HubError(
                        "the Hub serves content that differs from its listing (Expected "
                        f"{entry.content_hash}, Got {got}); refusing to lock this kernel",
                        subject=source,
                    )
                cache.keep_blob(repo, entry.content_hash, data)
            return data

        return self._once(("file", entry.content_hash), fetch)

    def map_calls(self, fn: Callable[[T], object], items: Iterable[T]) -> list:
        """``fn`` over ``items`` on the run's Hub call threads, results in order."""
        return list(self._calls.map(fn, items))

    def metadata(self, repo_id: str, commit: str, variant: str) -> dict:
        """The parsed ``build/<variant>/metadata.json`` at ``commit`` (read, not cached on disk)."""
        data = self.hub.read_small_file(repo_id, commit, f"{BUILD_DIR}/{variant}/metadata.json")
        return parse_metadata(data, f"{repo_id}@{commit[:12]}: {BUILD_DIR}/{variant}/metadata.json")

    # -- speculation ------------------------------------------------------------------

    def prefetch(
        self,
        requirements: Iterable[KernelRequirement],
        pick: Callable[[KernelRequirement], str | None],
        *,
        unless_redirected: bool = False,
    ) -> None:
        """In the background: list refs for each requirement, then fetch the dependencies
        of the commit ``pick`` would choose for it, and so on down the graph.

        With ``unless_redirected`` (requirements whose redirects are being followed at the
        same time, :meth:`follow_redirects`), a repo not ``held`` is first asked whether it
        redirects, which following its redirects asks anyway, and one that does is left to
        the prefetch of where it leads: its own builds are never read."""

        def warm(req: KernelRequirement) -> None:
            held = req.repo_id in self.held
            if not held and self.early:  # its pick is most often main's commit: read its files early
                hints.list_main_soon(self, req.repo_id)
            self.refs(req.repo_id)
            followed = unless_redirected and not held
            if followed:  # the listing it reads, main's commit (most often the pick), asked at once
                self._calls.submit(self._quietly, self.redirect, req.repo_id)
            commit = pick(req) if not followed or hints.shows_no_redirect(self, req.repo_id) else None
            if commit is not None:  # its listing asked first: the reads wait for main's, not it for them
                if not followed or commit != self._main_commit(req.repo_id):
                    self._calls.submit(self._quietly, lambda c: self.listing(req.repo_id, c), commit)
                hints.read_early(self, req.repo_id, commit)
            if followed and self.redirect(req.repo_id) is not None:
                return
            commit = commit or pick(req)
            if commit is not None:
                # Follow the likely picks down the graph, so deep chains warm up too.
                self.prefetch(self.dependencies(req.repo_id, commit), pick)

        if self._pick is None:
            self._pick = pick
        for req in requirements:
            key = ("prefetch", req.repo_id, req.text)
            with self._lock:
                if key in self._memo:
                    continue
                self._memo[key] = Once()
            self._pool.submit(self._quietly, warm, req)

    def _prefetch_named(self, read: Future) -> None:
        """Prefetch the kernels a ``metadata.json`` read names (its redirects followed first),
        as soon as it has arrived; what cannot be read is left to the caller that reads it."""
        if not read.cancelled() and read.exception() is None:
            self.prefetch_named_by(read.result())

    def prefetch_named_by(self, metadata: dict | bytes) -> None:
        """Prefetch the kernels a ``metadata.json`` (parsed, or its bytes) names, its redirects
        followed first; nothing for one that cannot be read, or once the run is over."""
        pick = self._pick
        if pick is None:
            return
        try:
            meta = parse_metadata(metadata, "metadata.json") if isinstance(metadata, bytes) else metadata
            named = parse_kernel_depends(meta.get("kernel-depends", []), source="metadata.json")
            self.prefetch(named, pick, unless_redirected=True)
        except Exception:  # noqa: BLE001 - not a valid list (raised when read), or the run is over
            return


def parse_metadata(data: bytes, source: str) -> dict:
    """A variant's ``metadata.json`` as a dict; HubError naming ``source`` when it is not one."""
    try:
        parsed = jsondoc.loads(data)
    except jsondoc.JSONDocumentError as exc:
        advice = "ask the kernel's owners to fix it, or require another version"
        raise HubError(f"{source} cannot be read: {exc}; {advice}") from None
    if not isinstance(parsed, dict):
        raise HubError(f"{source} is not a JSON object")
    return parsed

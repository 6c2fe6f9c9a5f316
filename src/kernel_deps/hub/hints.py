"""Reads a lock starts before a commit's listing arrives, from the listing of the main branch.

The Hub protocol orders each kernel's requests: its refs (which name the commits), then the
listing of the commit picked (which names its files and their content hashes), then its
``metadata.json`` files, whose ``kernel-depends`` name the next kernels. For a repo the run
holds no pin for, :class:`~kernel_deps.hub.index.KernelIndex` asks for the listing of the
branch ``main`` alongside the refs (:func:`list_main_soon`). Once the refs name the commit the
resolver would most likely pick, the ``metadata.json`` files and signature bundles that
listing shows are read at that commit (:func:`read_early`), beside the commit's own listing
instead of after it: a wave of requests less per kernel, for one request more. These requests
are tried once (a file the commit lacks may be answered with a retryable error, and a fault
costs only the wave they would have saved).

The refs and main's listing are asked with one read more: the ``metadata.json`` of the build
this machine would load (:func:`~kernel_deps.core.variants.exact_build_name` of its torch,
told from torch's files), at ``main``. The kernels its ``kernel-depends`` names are
prefetched as soon as it arrives, a wave before the picked commit's files could name them:
a lock whose graph is N kernels deep waits on N + 1 waves of requests, not 2N. Where main's
listing shows a file of those bytes, the read stands for that file's (no request more);
no read where torch's files do not tell this machine's build (no torch; macOS), a wasted
one where the kernel lacks that build.

The hints only decide which paths are asked for early and which kernels are prefetched,
never what is locked: each read of main's listing names the picked commit, and bytes read
early are taken only for a file whose content hash, as the commit's own listing gives it,
they hash to (:func:`early_bytes`), then kept in the cache as every read is. A main branch
that moved between the answers, or a commit whose variants or dependencies differ from
main's, costs the reads (and prefetches) wasted and the normal ones a wave later; the lock
is the same.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_deps.cache import store as cache
from kernel_deps.core.settings import BUILD_DIR, KERNEL, KERNEL_STATUS_NAME
from kernel_deps.core.variants import exact_build_name, is_valid_variant_name
from kernel_deps.hub.client import MAX_SMALL_FILE_BYTES, CommitListing
from kernel_deps.hub.listing import TreeFile
from kernel_deps.trust.digests import BUNDLE_NAME, METADATA_NAME

if TYPE_CHECKING:
    from kernel_deps.hub.index import KernelIndex

MAIN = "main"
# The files of a variant read early: what resolving (kernel-depends) and signing (its bundle) read.
EARLY_NAMES = (METADATA_NAME, BUNDLE_NAME)


def list_main_soon(index: KernelIndex, repo_id: str) -> None:
    """Ask for the listing of ``repo_id``'s main branch in the background, once per run, as a
    kernel repo (a legacy model repo's is refused and costs the request only), and read this
    machine's build's ``metadata.json`` there; not for a repo the cache holds files of, whose
    ``metadata.json`` files are most likely there already."""
    if _cached_before(cache.repo_dir(repo_id, KERNEL, index.cache_root)):
        return
    listing = lambda: index.hub.list_commit(repo_id, MAIN, repo_type=KERNEL, retries=0)  # noqa: E731
    index.start_once(("main-hint", repo_id), listing)
    index.start_once(("host-build",), _host_build_path)
    index.start_once(("main-build", repo_id), lambda: _read_main_build(index, repo_id))


def _host_build_path() -> str | None:
    """``build/<variant>/metadata.json`` of the exact build for this machine's torch, told
    from torch's files (no import, no probe); None without torch."""
    from kernel_deps.core.system import system_from_files

    system = system_from_files(without_torch=False)
    name = None if system is None else exact_build_name(system)
    return None if name is None else f"{BUILD_DIR}/{name}/{METADATA_NAME}"


def _read_main_build(index: KernelIndex, repo_id: str) -> tuple[str, bytes] | None:
    """The path and bytes of this machine's build's ``metadata.json`` at main (tried once),
    the kernels it names prefetched; None without torch."""
    path = index.answer_of(("host-build",))
    if not isinstance(path, str):
        return None
    data = index.hub.read_small_file(repo_id, MAIN, path, repo_type=KERNEL, retries=0)
    index.prefetch_named_by(data)
    return path, data


def _cached_before(repo: Path) -> bool:
    try:
        with os.scandir(repo / "blobs") as found:
            return next(found, None) is not None
    except OSError:  # none, or unreadable: nothing to go by
        return False


def _hint(index: KernelIndex, repo_id: str) -> CommitListing | None:
    """The listing of the main branch, once it has answered; None when it was not asked or failed."""
    found = index.answer_of(("main-hint", repo_id))
    return found if isinstance(found, CommitListing) else None


def shows_no_redirect(index: KernelIndex, repo_id: str) -> bool:
    """Whether the main branch was listed and holds no ``kernel-status.toml`` (the repo most
    likely does not redirect, so reading its builds early is not likely wasted)."""
    hint = _hint(index, repo_id)
    return hint is not None and KERNEL_STATUS_NAME not in hint.top_level


def read_early(index: KernelIndex, repo_id: str, commit: str) -> None:
    """Read, at ``commit``, each ``metadata.json`` and bundle the main branch's listing shows,
    in the background (one read per distinct content, none for content the cache holds)."""
    hint = _hint(index, repo_id)
    if hint is None or index.refs(repo_id).repo_type != KERNEL:
        return
    repo = cache.repo_dir(repo_id, KERNEL, index.cache_root)
    first: dict[str, str] = {}  # content hash in main's listing -> the first path that shows it
    for entry in sorted(hint.build_files, key=lambda e: e.path):
        variant, _, name = entry.path[len(BUILD_DIR) + 1:].partition("/")
        if name in EARLY_NAMES and is_valid_variant_name(variant):
            first.setdefault(entry.content_hash, entry.path)
    if any(path.endswith("/" + BUNDLE_NAME) for path in first.values()):
        index.met_signed()
    held = None
    guess = index.answer_of(("main-build", repo_id))  # asked with main's listing: here, or nearly
    if isinstance(guess, tuple):
        path, data = guess
        held = next((h for h in first if cache.content_hash_of_bytes(data, cache.hash_kind(h)) == h), None)
        if held is not None:  # those bytes stand for every file of that content: none is read
            first[held] = path
            index.put(("early", repo_id, commit, path), data)
    index.put(("early-paths", repo_id, commit), first)
    for content_hash, path in first.items():
        if content_hash == held:
            continue
        if cache.read_blob(repo, content_hash, MAX_SMALL_FILE_BYTES) is None:
            index.start_once(("early", repo_id, commit, path),
                             lambda p=path: index.hub.read_small_file(repo_id, commit, p, retries=0))  # fmt: skip


def early_bytes(index: KernelIndex, repo_id: str, commit: str, entry: TreeFile) -> bytes | None:
    """The bytes read early at ``commit`` that are the content ``entry`` (of the commit's own
    listing) names: read at its path, or at the path main's listing shows with that content
    (waiting for the read if it is under way); None when there are none."""
    shown = index.answer_of(("early-paths", repo_id, commit))
    paths = (entry.path, shown.get(entry.content_hash) if isinstance(shown, dict) else None)
    kind = cache.hash_kind(entry.content_hash)
    for path in dict.fromkeys(p for p in paths if p is not None):
        data = index.answer_of(("early", repo_id, commit, path))
        if isinstance(data, bytes) and cache.content_hash_of_bytes(data, kind) == entry.content_hash:
            return data
    return None

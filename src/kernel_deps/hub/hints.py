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

The hint only decides which paths are asked for early, never what is locked: each read names
the picked commit, and its bytes are taken only for a file whose content hash, as the commit's
own listing gives it, they hash to (:func:`early_bytes`), then kept in the cache as every
read is. A main branch that moved between the two answers, or a commit whose variants differ
from main's, costs the reads wasted and the normal ones a wave later; the lock is the same.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_deps.cache import store as cache
from kernel_deps.core.settings import BUILD_DIR, KERNEL, KERNEL_STATUS_NAME
from kernel_deps.core.variants import is_valid_variant_name
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
    kernel repo (a legacy model repo's is refused and costs the request only); not for a repo
    the cache holds files of, whose ``metadata.json`` files are most likely there already."""
    if _cached_before(cache.repo_dir(repo_id, KERNEL, index.cache_root)):
        return
    listing = lambda: index.hub.list_commit(repo_id, MAIN, repo_type=KERNEL, retries=0)  # noqa: E731
    index.start_once(("main-hint", repo_id), listing)


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
    index.put(("early-paths", repo_id, commit), first)
    for content_hash, path in first.items():
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

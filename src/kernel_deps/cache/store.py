"""The Hugging Face Hub cache, as kernel-deps uses it: locate, place atomically, verify.

The one import for the cache's callers (``from kernel_deps.cache import store``): a facade
on purpose, whose re-exports (``__all__``) are the cache's public surface
(docs/architecture.md); its names are defined by the modules each concern has, :mod:`~kernel_deps.cache.layout`
(where things live), :mod:`~kernel_deps.cache.checks` (a variant checked file by file),
:mod:`~kernel_deps.cache.blobs` (blobs and partial downloads) and
:mod:`~kernel_deps.cache.placing` (a variant staged and placed) and
:mod:`~kernel_deps.cache.tiers` (the read-only shared caches searched first).

The layout is huggingface_hub's, so every HF tool shares what kernel-deps downloads::

    <root>/kernels--<org>--<name>/
        blobs/<hash>                          content; named by LFS SHA-256 or git blob SHA-1
        snapshots/<commit>/build/<variant>/…  relative symlinks into blobs/
        .kernel-deps/<commit>/<variant>.json  manifest: every file of the variant, its hash

A variant is assembled in a staging folder (:func:`staged_variant`) and renamed into
``snapshots/`` only after every blob is verified, the variant's ``git_lfs_concat`` equals
the lock's and the caller's own checks of the staged files pass, so nothing unverified is
ever visible there. The manifest lets ``verify`` name the exact file that
was modified, removed or added; it is trusted only when its own ``git_lfs_concat``
equals the lock's hash, so editing it gains an attacker nothing.
"""

from __future__ import annotations

from kernel_deps.cache.blobs import (
    STALE_PARTIAL_SECONDS,
    blob_is_valid,
    keep_blob,
    place_blob,
    read_blob,
    remove_stale_partials,
)
from kernel_deps.cache.checks import (
    SMALL_VARIANT_BYTES,
    FileProblem,
    ProblemKind,
    VariantCheck,
    check_variant,
    check_variants,
    walk_variant,
)
from kernel_deps.cache.layout import (
    blob_path,
    cache_root,
    content_hash_of,
    content_hash_of_bytes,
    find_repo_dir,
    hash_kind,
    lock_dir,
    manifest_path,
    partial_lock_path,
    partial_path,
    repo_dir,
    variant_dir,
    variant_lock_path,
)
from kernel_deps.cache.placing import StagedVariant, place_variant, remove_placed_variant, staged_variant
from kernel_deps.cache.tiers import check_in_tiers, check_variant_in_tiers

__all__ = [
    "SMALL_VARIANT_BYTES", "STALE_PARTIAL_SECONDS", "FileProblem", "ProblemKind", "StagedVariant", "VariantCheck",
    "blob_is_valid", "blob_path", "cache_root", "check_in_tiers", "check_variant", "check_variant_in_tiers",
    "check_variants", "content_hash_of",
    "content_hash_of_bytes", "find_repo_dir", "hash_kind", "keep_blob", "lock_dir", "manifest_path",
    "partial_lock_path", "partial_path", "place_blob", "place_variant", "read_blob", "remove_placed_variant",
    "remove_stale_partials", "repo_dir", "staged_variant", "variant_dir", "variant_lock_path",
    "walk_variant",
]  # fmt: skip

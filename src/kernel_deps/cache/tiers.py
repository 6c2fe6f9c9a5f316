"""Tiered caches: the read-only shared caches of ``KERNELS_CACHE_SHARED``, searched before the
writable one.

A shared cache (a folder every node of a cluster mounts, an image layer, object storage
mounted read-only) is laid out as any cache is and is built by ``kernels sync --into`` or a
download into it. kernel-deps only reads it: a variant found there complete and holding
the locked bytes is checked file by file exactly as a variant of the writable cache is
(:func:`kernel_deps.cache.checks.check_variants`), and is then used where it lies, never
copied, and nothing is written there (no lock file, no partial download, no ref, no
manifest). A shared cache that cannot be read is passed over as one lacking the variant.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kernel_deps.cache.checks import VariantCheck, check_variants
from kernel_deps.cache.layout import cache_root
from kernel_deps.core.settings import shared_cache_roots

Wanted = tuple[str, str, str, str]  # repo id, commit, variant, locked hash


def check_in_tiers(
    wanted: Sequence[Wanted], *, root: Path | None = None, shared: bool = True
) -> list[tuple[VariantCheck | OSError, Path]]:
    """For each wanted variant, the check of the first tier holding it intact, and that tier's
    root: the shared caches in order (none without ``shared``), then the writable cache
    ``root`` (None: the cache root). A variant no shared cache holds intact gets the
    writable cache's check (or the OSError checking it there raises), whatever that finds."""
    writable = root or cache_root()
    found: list[tuple[VariantCheck | OSError, Path] | None] = [None] * len(wanted)
    for shared_root in shared_cache_roots() if shared else ():
        if shared_root == writable:
            continue
        left = [i for i, hit in enumerate(found) if hit is None]
        if not left:
            break
        for i, check in zip(left, check_variants([wanted[i] for i in left], root=shared_root)):
            if isinstance(check, VariantCheck) and check.ok:
                found[i] = (check, shared_root)
    left = [i for i, hit in enumerate(found) if hit is None]
    for i, check in zip(left, check_variants([wanted[i] for i in left], root=writable)):
        found[i] = (check, writable)
    return [hit for hit in found if hit is not None]


def check_variant_in_tiers(repo_id: str, commit: str, variant: str, expected_hash: str) -> VariantCheck:
    """:func:`check_in_tiers` of one variant: its check (OSError from the writable cache raised)."""
    ((check, _),) = check_in_tiers([(repo_id, commit, variant, expected_hash)])
    if isinstance(check, OSError):
        raise check
    return check


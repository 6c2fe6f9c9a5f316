"""A repo's blobs and partial downloads: a blob checked or read only when it still hashes to
its name (:func:`blob_is_valid`, :func:`read_blob`), kept (:func:`keep_blob`) or placed
from a verified download (:func:`place_blob`) atomically, and partial downloads no running
download holds removed (:func:`remove_stale_partials`).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from kernel_deps.cache.layout import OWN, blob_path, content_hash_of, content_hash_of_bytes, hash_kind, lock_dir
from kernel_deps.core.boundedread import read_bounded

def blob_is_valid(repo: Path, content_hash: str) -> bool:
    """True when the blob exists and its content hashes to its name."""
    path = blob_path(repo, content_hash)
    try:
        return path.is_file() and content_hash_of(path, hash_kind(content_hash)) == content_hash
    except OSError:
        return False


def read_blob(repo: Path, content_hash: str, limit: int) -> bytes | None:
    """The bytes of blob ``content_hash`` when it is present, at most ``limit`` bytes and
    hashes to its name; else None (absent, damaged or unreadable: fetch it again)."""
    try:
        data = read_bounded(blob_path(repo, content_hash), limit)  # a FIFO planted there is never waited on
    except OSError:  # RefusedFileError too: not a regular file, or over the limit
        return None
    return data if content_hash_of_bytes(data, hash_kind(content_hash)) == content_hash else None


def keep_blob(repo: Path, content_hash: str, data: bytes) -> bool:
    """Place ``data``, which must hash to ``content_hash``, as that blob (atomically), so a
    later lock or download reads it from here; False when the cache cannot take it,
    which costs only a request next time."""
    if content_hash_of_bytes(data, hash_kind(content_hash)) != content_hash:
        raise ValueError(f"the bytes given for blob {content_hash} hash to something else")
    target = blob_path(repo, content_hash)
    try:  # replaces a damaged copy too
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{content_hash}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            temporary.write_bytes(data)
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)
    except OSError:
        return False
    return True


# A partial download this old belongs to no running download: remove it.
STALE_PARTIAL_SECONDS = 24 * 3600


def remove_stale_partials(repo: Path, max_age: float = STALE_PARTIAL_SECONDS) -> list[Path]:
    """Remove partial downloads, and their lock files, untouched for ``max_age`` seconds."""
    cutoff = time.time() - max_age
    candidates = [*(repo / OWN / "tmp").glob("*.part"), *lock_dir(repo).glob("*.part.kernel-deps.lock")]
    removed = []
    for path in sorted(candidates):
        try:
            if path.lstat().st_mtime < cutoff:
                path.unlink()
                removed.append(path)
        except OSError:
            continue  # gone already, or not ours to remove: the next run tries again
    return removed


def place_blob(repo: Path, verified_file: Path, content_hash: str) -> None:
    """Move a verified download into ``blobs/<content_hash>`` atomically."""
    target = blob_path(repo, content_hash)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(verified_file, target)

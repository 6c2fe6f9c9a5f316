"""Content hashes: git blob ids, streaming file hashes, and the ``git_lfs_concat`` variant hash.

``variant_hash`` must equal, byte for byte, what the Hugging Face ``kernels`` library
computes for a build variant (``kernels.lockfile.get_kernel_locks`` online and
``kernels.utils.validate_kernel`` over a cache snapshot, in kernels 0.16), so a lock
written here verifies there and the other way round.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from io import RawIOBase

HASH_TYPE = "git_lfs_concat"

# Each file is read straight into one reusable buffer (no buffered layer, no new bytes
# object per read); 1 MiB stays in the CPU cache between the read and the hash.
_CHUNK = 1 << 20  # 1 MiB


def git_blob_id(data: bytes) -> str:
    """The git blob SHA-1 of ``data`` (what ``git hash-object`` prints)."""
    digest = hashlib.sha1(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def git_blob_id_of_file(path: str | os.PathLike[str]) -> str:
    """The git blob SHA-1 of a file's content, read in 1 MiB chunks."""
    with open(path, "rb", buffering=0) as file:
        size = os.fstat(file.fileno()).st_size
        digest = hashlib.sha1(b"blob %d\0" % size)
        if _feed(digest, file, size) != size:
            # The header promised ``size`` bytes; a file that grew or shrank meanwhile
            # would give an id that names no blob at all.
            raise OSError(f"{os.fspath(path)}: file changed size while it was being hashed")
    return digest.hexdigest()


def sha256_of_file(path: str | os.PathLike[str]) -> str:
    """The SHA-256 hex digest of a file's content, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as file:
        _feed(digest, file, os.fstat(file.fileno()).st_size)
    return digest.hexdigest()


def is_hashed_path(rel_path: str) -> bool:
    """Whether a variant file counts in its hash: not ``*.pyc``, not under ``__pycache__``."""
    return not rel_path.endswith(".pyc") and "__pycache__" not in rel_path.split("/")


def variant_hash(entries: Iterable[tuple[str, str]]) -> str:
    """The ``git_lfs_concat`` hash of (POSIX path in the variant, content hash hex) pairs."""
    pairs = sorted((path.encode("utf-8"), content_hash) for path, content_hash in entries if is_hashed_path(path))
    digest = hashlib.sha256()
    for path_bytes, content_hash in pairs:
        digest.update(path_bytes)
        digest.update(bytes.fromhex(content_hash))
    return f"sha256-{digest.hexdigest()}"


def _feed(digest: hashlib._Hash, file: RawIOBase, size_hint: int) -> int:
    """Update ``digest`` with the rest of ``file``; returns the number of bytes read.

    ``size_hint`` (the size ``fstat`` gave) only sizes the buffer, so a small file does
    not allocate a full chunk; a file that grew meanwhile is still read to its end.
    """
    buffer = bytearray(min(_CHUNK, max(size_hint + 1, 4096)))
    view = memoryview(buffer)
    total = 0
    while read := file.readinto(buffer):
        # hashlib releases the GIL while it hashes a buffer this large, so other files
        # are read and hashed on other cores meanwhile.
        digest.update(view[:read])
        total += read
    return total

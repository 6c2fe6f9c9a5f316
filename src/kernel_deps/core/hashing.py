"""Content hashes: git blob ids, streaming file hashes, and the ``git_lfs_concat`` variant hash.

``variant_hash`` must equal, byte for byte, what the Hugging Face ``kernels`` library
computes for a build variant (``kernels.lockfile.get_kernel_locks`` online and
``kernels.utils.validate_kernel`` over a cache snapshot, in kernels 0.16), so a lock
written here verifies there and the other way round.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from hashlib import _Hash
    from io import RawIOBase

HASH_TYPE = "git_lfs_concat"

# OpenSSL's SHA-1 and SHA-256 (hashlib's) hash six to eight times as fast as the
# interpreter's own (``_sha1``, ``_sha256``: the same digests), but loading them (libcrypto)
# costs 2 to 4 ms, more than the interpreter's take on the few small files of a small
# project. The first bytes a process hashes, up to this many, are hashed by the
# interpreter's own, unless hashlib is loaded already; hashlib hashes the rest and any file
# larger than that (nothing is hashed twice).
_BUILTIN_BYTES = 256 << 10  # 256 KiB: about 1.5 ms more than OpenSSL, at the most
_builtin_left = _BUILTIN_BYTES

# Each file is read straight into one reusable buffer (no buffered layer, no new bytes
# object per read); 1 MiB stays in the CPU cache between the read and the hash.
_CHUNK = 1 << 20  # 1 MiB


def git_blob_id(data: bytes) -> str:
    """The git blob SHA-1 of ``data`` (what ``git hash-object`` prints)."""
    digest = _new("sha1", len(data))
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def git_blob_id_of_file(path: str | os.PathLike[str]) -> str:
    """The git blob SHA-1 of a file's content, read in 1 MiB chunks."""
    with open(path, "rb", buffering=0) as file:
        size = os.fstat(file.fileno()).st_size
        digest = _new("sha1", size)
        digest.update(b"blob %d\0" % size)
        if _feed(digest, file, size) != size:
            # The header promised ``size`` bytes; a file that grew or shrank meanwhile
            # would give an id that names no blob at all.
            raise OSError(f"{os.fspath(path)}: file changed size while it was being hashed")
    return digest.hexdigest()


def sha256_of_file(path: str | os.PathLike[str]) -> str:
    """The SHA-256 hex digest of a file's content, read in 1 MiB chunks."""
    with open(path, "rb", buffering=0) as file:
        size = os.fstat(file.fileno()).st_size
        digest = _new("sha256", size)
        _feed(digest, file, size)
    return digest.hexdigest()


def is_hashed_path(rel_path: str) -> bool:
    """Whether a variant file counts in its hash: not ``*.pyc``, not under ``__pycache__``."""
    return not rel_path.endswith(".pyc") and "__pycache__" not in rel_path.split("/")


def variant_hash(entries: Iterable[tuple[str, str]]) -> str:
    """The ``git_lfs_concat`` hash of (POSIX path in the variant, content hash hex) pairs."""
    pairs = sorted((path.encode("utf-8"), content_hash) for path, content_hash in entries if is_hashed_path(path))
    digest = _new("sha256", sum(len(path) + len(content_hash) // 2 for path, content_hash in pairs))
    for path_bytes, content_hash in pairs:
        digest.update(path_bytes)
        digest.update(bytes.fromhex(content_hash))
    return f"sha256-{digest.hexdigest()}"


def sha256_hex(data: bytes) -> str:
    """The SHA-256 hex digest of ``data``."""
    digest = _new("sha256", len(data))
    digest.update(data)
    return digest.hexdigest()


def _new(name: Literal["sha1", "sha256"], size: int) -> _Hash:
    """An empty SHA-1 or SHA-256 hash for about ``size`` bytes: the interpreter's own while
    the first ``_BUILTIN_BYTES`` of the process last and hashlib is not loaded, else hashlib's."""
    global _builtin_left
    if size <= _builtin_left and "hashlib" not in sys.modules:
        _builtin_left -= size  # a race between threads only moves the switch to hashlib
        try:
            if name == "sha1":
                from _sha1 import sha1 as builtin
            elif sys.version_info >= (3, 12):
                from _sha2 import sha256 as builtin  # where 3.12 moved it
            else:
                from _sha256 import sha256 as builtin
        except ImportError:  # an interpreter built with OpenSSL's hashes alone
            pass
        else:
            return builtin()
    import hashlib

    return hashlib.sha1() if name == "sha1" else hashlib.sha256()


def _feed(digest: _Hash, file: RawIOBase, size_hint: int) -> int:
    """Update ``digest`` with the rest of ``file``; returns the number of bytes read.

    ``size_hint`` (the size ``fstat`` gave) only sizes the buffer, so a small file does
    not allocate a full chunk; a file that grew meanwhile is still read to its end.
    """
    buffer = bytearray(min(_CHUNK, max(size_hint + 1, 4096)))
    view = memoryview(buffer)
    total = 0
    while read := file.readinto(buffer):
        # hashlib releases the GIL while it hashes a buffer this large, so other files
        # are read and hashed on other cores meanwhile (the interpreter's own hashes only
        # the first few small files, see _new).
        digest.update(view[:read])
        total += read
    return total

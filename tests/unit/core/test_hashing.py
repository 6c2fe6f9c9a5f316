"""kernel_deps.core.hashing: git blob ids, streaming file hashes, the git_lfs_concat variant hash;
a file whose size changes while it is hashed gives an error, never a git blob id of nothing."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel_deps.core import hashing
from kernel_deps.core.hashing import (
    HASH_TYPE,
    git_blob_id,
    git_blob_id_of_file,
    is_hashed_path,
    sha256_of_file,
    variant_hash,
)

MIB = 1 << 20


def plain_variant_hash(entries: list[tuple[str, str]]) -> str:
    """git_lfs_concat written out from docs/locking.md, independently of the module under test."""
    kept = []
    for path, content_hash in entries:
        if path.endswith(".pyc"):
            continue
        if "__pycache__" in path.split("/"):
            continue
        kept.append((path.encode("utf-8"), content_hash))
    kept.sort()
    sha = hashlib.sha256()
    for path_bytes, content_hash in kept:
        sha.update(path_bytes + bytes.fromhex(content_hash))
    return "sha256-" + sha.hexdigest()


def git_hash_object(path) -> str:
    """What git itself says the blob id of a file is."""
    return subprocess.run(
        ["git", "hash-object", "--no-filters", str(path)], check=True, capture_output=True, text=True
    ).stdout.strip()


SIZES = [0, 1, 4095, MIB - 1, MIB, MIB + 1, 3 * MIB + 17]


@pytest.mark.parametrize("size", SIZES)
def test_file_hashes_equal_hashlib_and_git(tmp_path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    assert sha256_of_file(path) == hashlib.sha256(data).hexdigest()
    assert git_blob_id_of_file(path) == hashlib.sha1(b"blob %d\0" % size + data).hexdigest()
    assert git_blob_id_of_file(str(path)) == git_hash_object(path)
    assert git_blob_id(data) == git_hash_object(path)


def test_known_blob_ids() -> None:
    # The empty blob and "hello\n" have famous ids.
    assert git_blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    assert git_blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


@pytest.mark.parametrize("hash_file", [sha256_of_file, git_blob_id_of_file])
def test_files_are_read_into_one_reused_1_mib_buffer(tmp_path, monkeypatch, hash_file) -> None:
    path = tmp_path / "big.bin"
    data = os.urandom(2 * MIB + 5)
    path.write_bytes(data)
    buffers: list[int] = []
    sizes: list[int] = []

    class Spy(io.FileIO):
        def read(self, size: int = -1) -> bytes:
            raise AssertionError("a new bytes object per chunk; readinto a reused buffer instead")

        def readinto(self, buffer) -> int:
            buffers.append(id(buffer))
            sizes.append(len(buffer))
            return super().readinto(buffer)

    monkeypatch.setattr(hashing, "open", lambda p, mode, buffering=-1: Spy(p, "r"), raising=False)
    got = hash_file(path)
    assert sizes and all(size == MIB for size in sizes)
    assert len(set(buffers)) == 1
    expected = hashlib.sha256(data) if hash_file is sha256_of_file else hashlib.sha1(b"blob %d\0" % len(data) + data)
    assert got == expected.hexdigest()


def test_missing_file_raises_oserror(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        sha256_of_file(tmp_path / "absent")
    with pytest.raises(FileNotFoundError):
        git_blob_id_of_file(tmp_path / "absent")


# The kernel reports size 0 for /proc files, then serves their content: to the hash, the
# file changed size between the size it was given for the blob header and the end of the read.
GROWS_WHILE_READ = Path("/proc/self/status")


@pytest.mark.skipif(not GROWS_WHILE_READ.exists(), reason="needs Linux /proc")
def test_a_file_that_changed_size_is_an_oserror_naming_it() -> None:
    assert os.stat(GROWS_WHILE_READ).st_size == 0 and GROWS_WHILE_READ.read_bytes()
    with pytest.raises(OSError, match=r"^/proc/self/status: file changed size while it was being hashed$"):
        git_blob_id_of_file(GROWS_WHILE_READ)
    # A plain SHA-256 has no header to keep true: it hashes what it read.
    assert len(sha256_of_file(GROWS_WHILE_READ)) == 64


@pytest.mark.parametrize(
    ("path", "hashed"),
    [
        ("__init__.py", True),
        ("layers/__init__.py", True),
        ("_ops_abc.abi3.so", True),
        ("metadata.json", True),
        ("__init__.cpython-311.pyc", False),
        ("layers/x.pyc", False),
        ("__pycache__/__init__.cpython-311.pyc", False),
        ("__pycache__/notes.txt", False),
        ("layers/__pycache__/x.py", False),
        ("not__pycache__/x.py", True),
        ("__pycache__x/y.py", True),
        ("x.pyc.txt", True),
        ("x.py", True),
    ],
)
def test_is_hashed_path(path: str, hashed: bool) -> None:
    assert is_hashed_path(path) is hashed


BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
LFS = hashlib.sha256(b"shared object").hexdigest()
ENTRIES = [
    ("metadata.json", git_blob_id(b"{}\n")),
    ("__init__.py", BLOB),
    ("layers/__init__.py", git_blob_id(b"def f(): pass\n")),
    ("layers.py", git_blob_id(b"x = 1\n")),
    ("_ops_abc.abi3.so", LFS),
    ("données/ü.txt", git_blob_id(b"unicode\n")),
]


def test_variant_hash_equals_the_plain_computation() -> None:
    got = variant_hash(ENTRIES)
    assert got == plain_variant_hash(ENTRIES)
    assert got.startswith("sha256-") and len(got) == len("sha256-") + 64
    assert HASH_TYPE == "git_lfs_concat"


def test_variant_hash_golden_value() -> None:
    # Pinned so an accidental change of the algorithm cannot go unnoticed; kernels 0.16
    # agrees with this function on real repos (tests/unit/lock/test_lockfile.py).
    entries = [("a.py", BLOB), ("b/c.so", "00" * 32)]
    expected = hashlib.sha256(b"a.py" + bytes.fromhex(BLOB) + b"b/c.so" + bytes(32)).hexdigest()
    assert variant_hash(entries) == "sha256-" + expected


def test_variant_hash_of_nothing_is_sha256_of_nothing() -> None:
    assert variant_hash([]) == "sha256-" + hashlib.sha256(b"").hexdigest()


def test_bytecode_is_excluded() -> None:
    with_bytecode = ENTRIES + [
        ("__pycache__/__init__.cpython-311.pyc", git_blob_id(b"\xa7\r\r\n")),
        ("layers/__pycache__/x.cpython-311.pyc", BLOB),
        ("stray.pyc", BLOB),
        ("__pycache__/README", BLOB),
    ]
    assert variant_hash(with_bytecode) == variant_hash(ENTRIES)
    assert variant_hash(ENTRIES + [("extra.py", BLOB)]) != variant_hash(ENTRIES)


def test_sorting_is_by_utf8_bytes_of_the_path() -> None:
    # 'layers.py' < 'layers/...' because '.' (0x2e) < '/' (0x2f); a walk order would differ.
    assert variant_hash(ENTRIES) == variant_hash(sorted(ENTRIES, reverse=True))
    swapped = [("a", BLOB), ("b", LFS)]
    assert variant_hash(swapped) != variant_hash([("a", LFS), ("b", BLOB)])


def test_variant_hash_accepts_any_iterable() -> None:
    assert variant_hash(iter(ENTRIES)) == variant_hash(tuple(ENTRIES))


paths = st.lists(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1, max_size=8),
    min_size=1,
    max_size=4,
).map("/".join) | st.sampled_from(["__pycache__/x.pyc", "a.pyc", "x/__pycache__/y"])
hashes = st.binary(min_size=20, max_size=20).map(bytes.hex) | st.binary(min_size=32, max_size=32).map(bytes.hex)


@given(st.lists(st.tuples(paths, hashes), max_size=12, unique_by=lambda e: e[0]), st.randoms())
def test_variant_hash_property(entries, rnd) -> None:
    shuffled = list(entries)
    rnd.shuffle(shuffled)
    assert variant_hash(entries) == plain_variant_hash(entries) == variant_hash(shuffled)


def test_hash_threads_comes_from_the_environment_or_the_cores(monkeypatch) -> None:
    from kernel_deps.core.errors import UsageError
    from kernel_deps.core.settings import MAX_HASH_THREADS, hash_threads

    monkeypatch.delenv("KERNELS_HASH_THREADS", raising=False)
    assert 1 <= hash_threads() <= MAX_HASH_THREADS
    monkeypatch.setenv("KERNELS_HASH_THREADS", "3")
    assert hash_threads() == 3
    for bad in ("0", "two"):
        monkeypatch.setenv("KERNELS_HASH_THREADS", bad)
        with pytest.raises(UsageError, match="KERNELS_HASH_THREADS"):
            hash_threads()


def test_the_first_small_files_are_hashed_without_openssl_to_the_same_digests(tmp_path: Path, monkeypatch) -> None:
    # Until hashlib is loaded, the first 256 KiB a process hashes go through the interpreter's
    # own SHA-1 and SHA-256; what comes after, and a larger file, through hashlib (OpenSSL).
    small, large = b"def answer():\n    return 42\n", os.urandom(hashing._BUILTIN_BYTES + 1)
    (tmp_path / "small").write_bytes(small)
    (tmp_path / "large").write_bytes(large)
    expected = {
        "blob": hashlib.sha1(b"blob %d\0" % len(small) + small).hexdigest(),
        "sha256": hashlib.sha256(small).hexdigest(),
        "large blob": hashlib.sha1(b"blob %d\0" % len(large) + large).hexdigest(),
        "large sha256": hashlib.sha256(large).hexdigest(),
    }
    monkeypatch.delitem(sys.modules, "hashlib")  # as in a fresh `kernels verify`
    monkeypatch.setattr(hashing, "_builtin_left", hashing._BUILTIN_BYTES)
    kinds = []
    original = hashing._new
    monkeypatch.setattr(hashing, "_new",
                        lambda name, size: kinds.append(type(h := original(name, size)).__module__) or h)  # fmt: skip
    assert git_blob_id(small) == git_blob_id_of_file(tmp_path / "small") == expected["blob"]
    assert sha256_of_file(tmp_path / "small") == hashing.sha256_hex(small) == expected["sha256"]
    assert git_blob_id_of_file(tmp_path / "large") == expected["large blob"]
    assert sha256_of_file(tmp_path / "large") == expected["large sha256"]
    assert kinds == ["_sha1", "_sha1", "_sha256", "_sha256", "_hashlib", "_hashlib"]
    # Once hashlib is loaded, it hashes everything.
    assert git_blob_id(small) == expected["blob"] and kinds[-1] == "_hashlib"

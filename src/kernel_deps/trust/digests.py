"""The per-file digest a build variant's ``metadata.json`` may carry (kernel-builder's format).

``"digest": {"algorithm": "sha256" | "sha512", "files": {"<path>": "<base64 hash>"}}``
covers every file of the variant folder except the top-level ``metadata.json`` and
``metadata.json.sigstore`` (the digest sits in the first and the second signs it), every
path with a part named ``__pycache__`` (a folder, or a file of that name) and every file
whose extension is ``pyc`` (``x.pyc``, ``..pyc``; a file named ``.pyc`` alone has no
extension and is covered); a nested ``metadata.json`` is covered. This is the rule of the
Hugging Face library's ``Digest.hash_variant`` (kernels 0.17.2), path for path. Each value
is the standard base64 (with padding) of the file's SHA-256 or SHA-512; keys of the
``digest`` beyond ``algorithm`` and ``files`` are ignored, as that library ignores them.

Pure: callers pass what they know of each file (its bytes' hash, or only that it exists),
and get every mismatch back at once (:func:`compare`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kernel_deps.core.records import Record

METADATA_NAME = "metadata.json"
BUNDLE_NAME = "metadata.json.sigstore"
ALGORITHMS = ("sha256", "sha512")
_DIGEST_BYTES = {"sha256": 32, "sha512": 64}


class InvalidDigest(ValueError):
    """A ``digest`` field that is not one kernel-builder writes; the message says what is wrong."""


class Digest(Record):
    """A variant's declared digest: the algorithm and each covered file's base64 hash."""

    __slots__ = ("algorithm", "files")
    algorithm: str
    files: Mapping[str, str]

    def __init__(self, algorithm: str, files: Mapping[str, str]) -> None:
        self._init(algorithm, files)


class Mismatch(Record):
    """One file that does not match the digest: ``expected`` None (not declared) or ``got`` None (missing)."""

    __slots__ = ("path", "expected", "got")
    path: str
    expected: str | None
    got: str | None

    def __init__(self, path: str, expected: str | None, got: str | None) -> None:
        self._init(path, expected, got)

    def describe(self) -> str:
        if self.got is None:
            return f"{self.path}: declared {self.expected} but the file is missing"
        if self.expected is None:
            return f"{self.path}: present (Got {self.got}) but not in the digest"
        return f"{self.path}: Expected {self.expected}, Got {self.got}"


def is_covered(path: str) -> bool:
    """Whether the digest covers ``path`` (relative to the variant folder, POSIX)."""
    parts = path.split("/")
    if path in (METADATA_NAME, BUNDLE_NAME) or "__pycache__" in parts:
        return False
    # A ``pyc`` extension as a path library tells it: a name that is only ``.pyc`` has none.
    return not (parts[-1].endswith(".pyc") and parts[-1] != ".pyc")


def parse_digest(metadata: Mapping[str, object]) -> Digest | None:
    """The ``digest`` of a parsed ``metadata.json``, None when it has none; InvalidDigest when malformed."""
    if "digest" not in metadata:
        return None
    raw = metadata["digest"]
    if not isinstance(raw, dict) or not {"algorithm", "files"} <= raw.keys():
        raise InvalidDigest('expected "digest": {"algorithm": "sha256" or "sha512", "files": {path: base64 hash}}')
    algorithm, files = raw["algorithm"], raw["files"]
    if algorithm not in ALGORITHMS:
        raise InvalidDigest(f"digest algorithm {algorithm!r:.40} is neither sha256 nor sha512")
    if not isinstance(files, dict):
        raise InvalidDigest("digest.files is not an object of path -> base64 hash")
    for path, value in files.items():
        if not path or path.startswith("/") or ".." in path.split("/") or not is_covered(path):
            raise InvalidDigest(f"digest.files names {path!r:.80}, which a digest never covers")
        if not isinstance(value, str) or _decoded_length(value) != _DIGEST_BYTES[algorithm]:
            raise InvalidDigest(f"digest.files[{path!r:.80}] is not a base64 {algorithm} hash")
    return Digest(algorithm, dict(sorted(files.items())))


def _decoded_length(value: str) -> int:
    import base64  # base64 and binascii only for a metadata.json that has a digest
    import binascii

    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        return -1


def file_digest(algorithm: str, data: bytes) -> str:
    """The digest value of one file's bytes."""
    import base64
    import hashlib  # a metadata.json that declares a digest: every file of its variant

    return base64.b64encode(hashlib.new(algorithm, data).digest()).decode()


def from_hex(hex_digest: str) -> str:
    """The digest value of a file whose hash is known as hex (an LFS object's SHA-256)."""
    import base64

    return base64.b64encode(bytes.fromhex(hex_digest)).decode()


def compare(digest: Digest, found: Mapping[str, str | None], kept: Callable[[str], bool] | None = None) -> list[Mismatch]:
    """Every file of ``found`` (covered path -> its digest value, or None when only its
    presence is known) against ``digest``: missing, undeclared and differing files, by path.
    ``kept`` says which paths ``found`` can hold at all (a cache keeps only the files the
    lock's hash covers): a declared file outside it is not called missing."""
    mismatches = []
    for path in sorted(digest.files.keys() | found.keys()):
        expected, got = digest.files.get(path), found.get(path)
        if path not in found:
            if kept is None or kept(path):
                mismatches.append(Mismatch(path, expected, None))
        elif expected is None:
            mismatches.append(Mismatch(path, None, got or "a file"))
        elif got is not None and got != expected:
            mismatches.append(Mismatch(path, expected, got))
    return mismatches

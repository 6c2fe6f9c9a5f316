"""A Hub tree listing's files, checked: the Hub's answers are untrusted input.

Every file of a tree listing is checked here, once, for every command that reads listings
(lock, download, verify --online): its path must be one the cache can hold
(:func:`path_problem`), its ids well-formed hex, its size a count, and no path may be both
a file and a folder. A listing that breaks a rule is refused with one error naming the
kernel and the path. Pure: nothing here makes a request.
"""

from __future__ import annotations

import re

from kernel_deps.core.errors import HubError, UnsafeRepoContentError
from kernel_deps.core.records import Record

# A listed path must fit the cache on common file systems: each name at most NAME_MAX
# bytes, the whole path well inside PATH_MAX once below the cache folder.
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 1024
MAX_PATH_PARTS = 64
_GIT_OID = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_REFUSE = "refusing to lock or download this kernel"


class TreeFile(Record):
    """A file of a repo at a commit, as the Hub lists it."""

    __slots__ = ("path", "size", "blob_id", "lfs_sha256")
    path: str
    size: int
    blob_id: str
    lfs_sha256: str | None

    def __init__(self, path: str, size: int, blob_id: str, lfs_sha256: str | None) -> None:
        self._init(path, size, blob_id, lfs_sha256)

    @property
    def content_hash(self) -> str:
        """The hash that names this file's content: LFS SHA-256, else git blob SHA-1."""
        return self.lfs_sha256 or self.blob_id


def shown_path(path: object) -> str:
    """``path`` quoted for a one-line message: escaped, and shortened when long."""
    text = "null" if path is None else repr(path)  # JSON's null, as the Hub wrote it
    return text if len(text) <= 120 else f"{text[:80]}...{text[-30:]} ({len(text)} characters)"


def path_problem(path: object) -> str | None:
    """Why ``path`` (a repo path, or one relative to a variant folder) cannot be placed
    in the cache safely; None when it can."""
    if not isinstance(path, str) or not path:
        return "a path must be non-empty text"
    try:
        raw = path.encode("utf-8")
    except UnicodeEncodeError:
        return "it is not valid UTF-8 (a lone surrogate)"
    if "\\" in path:
        return "it contains a backslash"
    if _CONTROL.search(path):
        return "it contains a control character"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "it has an empty, '.' or '..' part, or starts with '/'"
    if len(parts) > MAX_PATH_PARTS:
        return f"it is {len(parts)} folders deep (at most {MAX_PATH_PARTS})"
    if len(raw) > MAX_PATH_BYTES:
        return f"it is {len(raw)} bytes long (at most {MAX_PATH_BYTES})"
    longest = max(len(part.encode("utf-8")) for part in parts)
    if longest > MAX_NAME_BYTES:
        return f"it has a name {longest} bytes long (at most {MAX_NAME_BYTES})"
    return None


def check_listing(repo_id: str, commit: str, folder: str, entries: list[dict]) -> list[TreeFile]:
    """The files of a tree listing of ``folder``, each checked; one error naming the kernel
    and path for the first entry that cannot be placed in the cache as listed."""
    where = f"{repo_id}@{commit[:12]}"
    files: list[TreeFile] = []
    folders: set[str] = set()
    for entry in entries:
        path = entry["path"]
        if problem := path_problem(path):
            raise UnsafeRepoContentError(
                f"the repo lists an unsafe path {shown_path(path)}: {problem}; {_REFUSE}",
                subject=where,
            )
        if not path.startswith(f"{folder}/"):
            raise HubError(
                f"the Hub's listing of {folder} names {shown_path(path)}, outside it; {_REFUSE}",
                subject=where,
            )
        parts = path.split("/")
        folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
        kind = entry.get("type")
        if kind == "directory":
            folders.add(path)
        elif kind == "file":
            files.append(_tree_file(where, entry))
    seen: set[str] = set()
    for file in files:
        if file.path in folders or file.path in seen:
            what = "both a file and a folder" if file.path in folders else "more than once"
            raise UnsafeRepoContentError(f"the repo lists {shown_path(file.path)} {what}; {_REFUSE}", subject=where)
        seen.add(file.path)
    return files


def _tree_file(where: str, entry: dict) -> TreeFile:
    """One file entry of a tree listing as a TreeFile; HubError when a field is malformed."""
    path = entry["path"]

    def malformed(what: str, value: object) -> HubError:
        return HubError(
            f"the Hub lists {shown_path(path)} with a malformed {what} {shown_path(value)}; "
            f"{_REFUSE} (is HF_ENDPOINT a Hugging Face Hub?)",
            subject=where,
        )

    oid, lfs, size = entry.get("oid"), entry.get("lfs"), entry.get("size")
    if not isinstance(oid, str) or not _GIT_OID.fullmatch(oid):
        raise malformed("git blob id", oid)
    lfs_sha256 = None
    if lfs:
        if not isinstance(lfs, dict):
            raise malformed("LFS record", lfs)
        lfs_sha256, size = lfs.get("oid"), lfs.get("size")
        if not isinstance(lfs_sha256, str) or not _SHA256.fullmatch(lfs_sha256):
            raise malformed("LFS SHA-256", lfs_sha256)
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise malformed("size", size)
    return TreeFile(path=path, size=size, blob_id=oid, lfs_sha256=lfs_sha256)

"""Where things live in the Hugging Face cache: the cache root (as huggingface_hub finds it),
a repo's folder, a variant's, its manifest, a blob, a partial download and the lock files,
and the hash that names a blob. Pure paths: nothing here reads or writes the cache.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from kernel_deps.core.hashing import git_blob_id, git_blob_id_of_file, sha256_hex, sha256_of_file
from kernel_deps.core.settings import BUILD_DIR, KERNEL, REPO_TYPE_PLURALS

# kernel-deps' own records in a repo folder: manifests, staging, partial downloads.
OWN = ".kernel-deps"


def cache_root() -> Path:
    """``KERNELS_CACHE``, else the Hugging Face Hub cache as huggingface_hub locates it.

    That is ``HF_HUB_CACHE``, else the legacy ``HUGGINGFACE_HUB_CACHE``, else ``hub`` in
    ``HF_HOME``, else in ``$XDG_CACHE_HOME/huggingface``, else in ``~/.cache/huggingface``:
    the rule of ``huggingface_hub.constants``, computed here (and read now, not at
    import) so that commands which never reach the Hub do not import its client.
    """
    value = os.environ.get("KERNELS_CACHE")
    if value:
        return Path(value).expanduser()
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        value = os.environ.get(name)
        if value:
            return Path(_expanded(value))
    hf_home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface"
    )
    return Path(_expanded(hf_home)) / "hub"


def _expanded(path: str) -> str:
    """A path with ``~`` and environment variables expanded, as huggingface_hub expands them."""
    return os.path.expandvars(os.path.expanduser(path))


def repo_dir(repo_id: str, repo_type: str = KERNEL, root: Path | None = None) -> Path:
    """The cache folder of a repo (``kernels--org--name`` or ``models--org--name``)."""
    plural = REPO_TYPE_PLURALS[repo_type]
    return (root or cache_root()) / "--".join([plural, *repo_id.split("/")])


def find_repo_dir(repo_id: str, root: Path | None = None) -> Path | None:
    """The existing cache folder of ``repo_id`` (kernel repo first, then legacy model repo)."""
    for repo_type in REPO_TYPE_PLURALS:
        candidate = repo_dir(repo_id, repo_type, root)
        if candidate.is_dir():
            return candidate
    return None


def variant_dir(repo: Path, commit: str, variant: str) -> Path:
    """``snapshots/<commit>/build/<variant>`` of a repo folder."""
    return repo / "snapshots" / commit / BUILD_DIR / variant


def manifest_path(repo: Path, commit: str, variant: str) -> Path:
    """Where kernel-deps records the files of a placed variant."""
    return repo / OWN / commit / f"{variant}.json"


def content_hash_of(path: Path, kind: Literal["sha256", "sha1"]) -> str:
    """The hash that names a file's content: SHA-256 (LFS files) or git blob SHA-1."""
    return sha256_of_file(path) if kind == "sha256" else git_blob_id_of_file(path)


def hash_kind(content_hash: str) -> Literal["sha256", "sha1"]:
    """Which algorithm a blob name or tree hash uses, by its length."""
    return "sha256" if len(content_hash) == 64 else "sha1"


def content_hash_of_bytes(data: bytes, kind: Literal["sha256", "sha1"]) -> str:
    """The hash that names ``data`` as a blob: SHA-256 (LFS files) or git blob SHA-1."""
    return sha256_hex(data) if kind == "sha256" else git_blob_id(data)


def blob_path(repo: Path, content_hash: str) -> Path:
    """Where the blob named ``content_hash`` lives."""
    return repo / "blobs" / content_hash


def partial_path(repo: Path, content_hash: str) -> Path:
    """Where the blob ``content_hash`` is downloaded, outside ``blobs/`` and ``snapshots/``.

    The name depends on the content only, so a run resumes what an interrupted one left;
    the download holds :func:`partial_lock_path` while it writes there.
    """
    folder = repo / OWN / "tmp"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{content_hash}.part"


def lock_dir(repo: Path) -> Path:
    """Where the lock files of a repo's downloads live (``<cache>/.locks/<repo folder>``)."""
    return repo.parent / ".locks" / repo.name


def partial_lock_path(repo: Path, content_hash: str) -> Path:
    """The lock file a download of blob ``content_hash`` holds (one writer per blob, any process)."""
    folder = lock_dir(repo)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{content_hash}.part.kernel-deps.lock"


def variant_lock_path(repo: Path, commit: str, variant: str) -> Path:
    """The lock file held while a variant is placed in (or removed from) ``snapshots/``: by a
    download from before it looks at the cache until it has checked what it placed, and by
    ``kernels cache prune`` while it decides what of the repo goes."""
    return lock_dir(repo) / f"{commit}.{variant}.kernel-deps.lock"

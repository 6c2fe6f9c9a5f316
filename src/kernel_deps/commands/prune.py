"""`kernels cache prune` as a library function: what no project's lock pins, out of the cache.

Only kernel repos (``kernels--<org>--<name>``) are touched; a shared Hugging Face cache's
models, datasets and spaces (legacy kernels in model repos included) are left as they are.
In each kernel repo, every commit that none of the given projects' locks pins goes (its
snapshot and kernel-deps' record of it), then every blob no kept snapshot links; a repo
no lock pins goes whole. Partial downloads and download lock files untouched for a day
go too (a download running now keeps its own, as the next download's own cleanup does).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from kernel_deps.cache import store as cache
from kernel_deps.core.errors import FileWriteError
from kernel_deps.core.settings import KERNEL, LOCK_NAME, REPO_TYPE_PLURALS
from kernel_deps.lock.read import read_lock

SCHEMA_VERSION = 1  # of docs/schemas/prune.schema.json; see docs/ci.md


@dataclass(frozen=True, slots=True)
class PrunedPath:
    """One thing removed (or, with ``dry_run``, that would be): its path, why, and its size on disk."""

    path: Path
    kind: str  # "repo", "commit", "blob", "partial", "lock-file"
    size: int


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What a prune removed (or would remove), and what it kept."""

    cache_root: Path
    lockfiles: tuple[Path, ...]
    removed: tuple[PrunedPath, ...]
    kept: tuple[tuple[str, str], ...]  # (repo id, commit) pinned by a lock and present
    dry_run: bool

    @property
    def bytes(self) -> int:
        return sum(p.size for p in self.removed)

    def to_json(self) -> dict:
        """The report as docs/schemas/prune.schema.json describes it."""
        return {
            "schema_version": SCHEMA_VERSION,
            "cache": str(self.cache_root),
            "lockfiles": [str(p) for p in self.lockfiles],
            "dry_run": self.dry_run,
            "bytes": self.bytes,
            "removed": [{"path": str(p.path), "kind": p.kind, "bytes": p.size} for p in self.removed],
            "kept": [{"repo_id": repo_id, "commit": commit} for repo_id, commit in self.kept],
        }


def prune_cache(
    project_dirs: Sequence[Path] = (Path("."),), *, dry_run: bool = False, root: Path | None = None
) -> PruneReport:
    """Remove from the cache every kernel commit no ``project_dirs``' kernels.lock pins, the
    blobs only they used, and stale partial downloads and lock files (``dry_run``: list them)."""
    root = Path(root or cache.cache_root())
    lockfiles = tuple(Path(d) / LOCK_NAME for d in project_dirs or (Path("."),))
    pinned: dict[str, set[str]] = {}  # kernel repo folder name -> pinned commits
    for path in lockfiles:  # every lock read first: a bad one stops the run before anything goes
        for kernel in read_lock(path, purpose="use").lock.kernels:
            pinned.setdefault(cache.repo_dir(kernel.repo_id, root=root).name, set()).add(kernel.sha)
    prefix = REPO_TYPE_PLURALS[KERNEL] + "--"
    removed: list[PrunedPath] = []
    kept: list[tuple[str, str]] = []
    repos = sorted(p for p in root.iterdir() if p.name.startswith(prefix) and p.is_dir()) if root.is_dir() else []
    for repo in repos:
        commits = pinned.get(repo.name)
        if commits is None:
            removed.append(PrunedPath(repo, "repo", _size(repo)))
            removed += _stale(cache.lock_dir(repo).glob("*.kernel-deps.lock"), "lock-file")
            continue
        removed += _prune_repo(repo, commits, kept)
    removed += _stale_lock_files(root, prefix, {r.name for r in repos})
    if not dry_run:
        for entry in removed:
            _remove(entry.path)
    return PruneReport(root, lockfiles, tuple(removed), tuple(kept), dry_run)


def _prune_repo(repo: Path, commits: set[str], kept: list[tuple[str, str]]) -> list[PrunedPath]:
    removed: list[PrunedPath] = []
    repo_id = "/".join(repo.name.split("--")[1:])
    linked: set[str] = set()
    snapshots = repo / "snapshots"
    for commit in sorted(snapshots.iterdir()) if snapshots.is_dir() else []:
        if commit.name not in commits:
            removed.append(PrunedPath(commit, "commit", _size(commit)))
            record = cache.manifest_path(repo, commit.name, "x").parent
            if record.is_dir():
                removed.append(PrunedPath(record, "commit", _size(record)))
            continue
        kept.append((repo_id, commit.name))
        for dirpath, _, names in os.walk(commit):
            for name in names:
                link = Path(dirpath) / name
                if link.is_symlink():
                    linked.add(Path(os.readlink(link)).name)
    blobs = repo / "blobs"
    for blob in sorted(blobs.iterdir()) if blobs.is_dir() else []:
        if blob.name not in linked:
            removed.append(PrunedPath(blob, "blob", _size(blob)))
    removed += _stale((repo / ".kernel-deps" / "tmp").glob("*.part"), "partial")
    removed += _stale(cache.lock_dir(repo).glob("*.kernel-deps.lock"), "lock-file")
    return removed


def _stale_lock_files(root: Path, prefix: str, repos: set[str]) -> list[PrunedPath]:
    """Lock files of kernel repos no longer in the cache at all, untouched for a day."""
    locks = root / ".locks"
    if not locks.is_dir():
        return []
    folders = [f for f in sorted(locks.iterdir()) if f.name.startswith(prefix) and f.name not in repos]
    return [entry for folder in folders for entry in _stale(folder.glob("*.kernel-deps.lock"), "lock-file")]


def _stale(paths, kind: str) -> list[PrunedPath]:
    cutoff = time.time() - cache.STALE_PARTIAL_SECONDS
    found = []
    for path in sorted(paths):
        try:
            info = path.lstat()
        except OSError:
            continue
        if info.st_mtime < cutoff:
            found.append(PrunedPath(path, kind, info.st_size))
    return found


def _size(path: Path) -> int:
    """Bytes on disk under ``path`` (links not followed)."""
    if not path.is_dir() or path.is_symlink():
        return path.lstat().st_size
    return sum((Path(d) / n).lstat().st_size for d, _, names in os.walk(path) for n in names)


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    except OSError as exc:
        raise FileWriteError(
            f"{path}: cannot remove it from the kernel cache ({exc.strerror or exc}); check its permissions"
        ) from None

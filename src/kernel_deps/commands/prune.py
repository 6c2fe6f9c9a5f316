"""`kernels cache prune` as a library function: what no project's lock pins, out of the cache.

Only kernel repos (``kernels--<org>--<name>``) are touched; a shared Hugging Face cache's
models, datasets and spaces (legacy kernels in model repos included) are left as they are.
In each kernel repo, every commit that none of the given projects' locks pins goes (its
snapshot and kernel-deps' record of it), then every blob no kept snapshot links; a repo
no lock pins goes whole. Partial downloads and download lock files untouched for a day
go too (a download running now keeps its own, as the next download's own cleanup does).

Two rules keep a prune from destroying what it does not own:

- nothing is removed through a symbolic link (:mod:`kernel_deps.core.ownedfs`): a link
  in the cache is removed as a link, and a folder reached through one (``blobs -> ~``,
  ``snapshots -> /data``, ``.locks -> ...``) is skipped and reported, never looked into;
- a repo is decided on and pruned while prune holds the lock of every variant download
  of it (``store.variant_lock_path``, taken without waiting): a variant whose download is
  running now keeps its commit, and its repo keeps every blob no snapshot links yet (the
  download may have just placed them), each reported as skipped with the reason; so does
  a partial download whose own lock is held.
"""

from __future__ import annotations

import os
import re
import stat
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Callable, Sequence

from kernel_deps.cache import store as cache
from kernel_deps.core import ownedfs
from kernel_deps.core.errors import FileWriteError, LinkedPathError
from kernel_deps.core.records import Record
from kernel_deps.core.settings import KERNEL, LOCK_NAME, REPO_TYPE_PLURALS
from kernel_deps.lock.read import read_lock

SCHEMA_VERSION = 3  # of docs/schemas/prune.schema.json; see docs/ci.md

_LOCK_SUFFIX = ".kernel-deps.lock"
_VARIANT_LOCK = re.compile(r"(?P<commit>[0-9a-f]{40})\.(?P<variant>.+)")
_PART_LOCK = re.compile(r"(?P<hash>[0-9a-f]{40}|[0-9a-f]{64})\.part")
_LINK = "a symbolic link: prune removes nothing through a link, nor looks into one"


class PrunedPath(Record):
    """One thing removed (or, with ``dry_run``, that would be): its path, why, and its size on disk."""

    __slots__ = ("path", "kind", "size")
    path: Path
    kind: str  # "repo", "commit", "blob", "partial", "lock-file"
    size: int

    def __init__(self, path: Path, kind: str, size: int) -> None:
        self._init(path, kind, size)


class SkippedPath(Record):
    """Something prune would have removed, or looked into, and did not: its path and why."""

    __slots__ = ("path", "reason")
    path: Path
    reason: str

    def __init__(self, path: Path, reason: str) -> None:
        self._init(path, reason)


class PruneReport(Record):
    """What a prune removed (or would remove), what it kept, and what it skipped and why."""

    __slots__ = ("cache_root", "lockfiles", "removed", "kept", "dry_run", "skipped")
    cache_root: Path
    lockfiles: tuple[Path, ...]
    removed: tuple[PrunedPath, ...]
    kept: tuple[tuple[str, str], ...]  # (repo id, commit) pinned by a lock and present
    dry_run: bool
    skipped: tuple[SkippedPath, ...]

    def __init__(
        self, cache_root: Path, lockfiles: tuple[Path, ...], removed: tuple[PrunedPath, ...],
        kept: tuple[tuple[str, str], ...], dry_run: bool, skipped: tuple[SkippedPath, ...] = (),
    ) -> None:  # fmt: skip
        self._init(cache_root, lockfiles, removed, kept, dry_run, skipped)

    @property
    def bytes(self) -> int:
        return sum(p.size for p in self.removed)

    def to_json(self) -> dict:
        """The report as docs/schemas/prune.schema.json describes it."""
        return {
            "schema_version": SCHEMA_VERSION,
            "ok": not self.skipped,
            "cache": str(self.cache_root),
            "lockfiles": [str(p) for p in self.lockfiles],
            "dry_run": self.dry_run,
            "bytes": self.bytes,
            "removed": [{"path": str(p.path), "kind": p.kind, "bytes": p.size} for p in self.removed],
            "kept": [{"repo_id": repo_id, "commit": commit} for repo_id, commit in self.kept],
            "skipped": [{"path": str(s.path), "reason": s.reason} for s in self.skipped],
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
    run = _Run(root, dry_run)
    repos = [p for p in run.children(root) if p.name.startswith(prefix)] if root.is_dir() else []
    for repo in repos:
        info = os.lstat(repo)
        if stat.S_ISLNK(info.st_mode):
            if repo.name in pinned:
                run.skip(repo, _LINK)  # a pinned repo is never looked for through a link
            else:
                run.remove([PrunedPath(repo, "repo", info.st_size)])  # the link itself, as a link
            continue
        if stat.S_ISDIR(info.st_mode):
            _prune_repo(run, repo, pinned.get(repo.name))
    run.remove(_stale_lock_files(run, prefix, {r.name for r in repos}))
    return PruneReport(root, lockfiles, tuple(run.removed), tuple(run.kept), dry_run, tuple(run.skipped))


class _Run:
    """One prune: what it removed, kept and skipped so far, and how it removes."""

    def __init__(self, root: Path, dry_run: bool) -> None:
        self.root, self.dry_run = root, dry_run
        self.removed: list[PrunedPath] = []
        self.kept: list[tuple[str, str]] = []
        self.skipped: list[SkippedPath] = []

    def skip(self, path: Path, reason: str) -> None:
        if all(s.path != path for s in self.skipped):
            self.skipped.append(SkippedPath(path, reason))

    def children(self, folder: Path) -> list[Path]:
        """What ``folder`` holds, sorted; none (and ``folder`` skipped) when it is reached
        through a link or is one; none when it is absent or not a folder."""
        if folder != self.root:
            link = ownedfs.link_on_the_way(self.root, folder)
            if link is not None:
                self.skip(link, _LINK)
                return []
        try:
            with os.scandir(folder) as entries:
                return sorted(Path(entry.path) for entry in entries)
        except (FileNotFoundError, NotADirectoryError):
            return []

    def remove(self, entries: list[PrunedPath]) -> None:
        """Remove each of ``entries`` (unless a dry run), never through a link."""
        for entry in entries:
            if not self.dry_run:
                try:
                    ownedfs.remove(self.root, entry.path)
                except LinkedPathError as exc:  # a folder on the way became a link since it was looked at
                    self.skip(Path(str(exc.path)), _LINK)
                    continue
                except OSError as exc:
                    raise FileWriteError(f"{entry.path}: cannot remove it from the kernel cache "
                                         f"({exc.strerror or exc}); check its permissions") from None  # fmt: skip
            self.removed.append(entry)


def _prune_repo(run: _Run, repo: Path, commits: set[str] | None) -> None:
    """Prune one kernel repo while holding the lock of each of its variant downloads that
    is not running now; what a running one may be writing is kept and reported."""
    if (link := ownedfs.link_on_the_way(run.root, cache.lock_dir(repo))) is not None:
        run.skip(link, _LINK + f"; {repo} is left as it is, since its downloads lock there")
        return
    with ExitStack() as held:
        seen: set[Path] = set()
        busy, busy_parts = _take_locks(run, repo, held, seen)
        if commits is None:  # a repo no lock pins goes whole, unless a download in it is running
            if busy:
                (commit, variant), lock = next(iter(busy.items()))
                run.skip(repo, _running(commit, variant, lock))
                return
            run.remove([PrunedPath(repo, "repo", _size(repo))])
            run.remove(_stale(run, run.children(cache.lock_dir(repo)), "lock-file", busy_locks=set()))
            return
        _prune_pinned_repo(run, repo, commits, busy, busy_parts, lambda: _take_locks(run, repo, held, seen))


def _prune_pinned_repo(run: _Run, repo: Path, commits: set[str], busy: dict[tuple[str, str], Path],
                       busy_parts: dict[str, Path], more_locks: Callable[[], tuple[dict, dict]]) -> None:  # fmt: skip
    repo_id = "/".join(repo.name.split("--")[1:])
    linked: set[str] = set()
    snapshots = repo / "snapshots"
    links_known = ownedfs.link_on_the_way(run.root, snapshots) is None
    going: list[PrunedPath] = []
    for commit in run.children(snapshots):
        running = [(key, lock) for key, lock in busy.items() if key[0] == commit.name]
        if commit.name not in commits and not running:
            going.append(PrunedPath(commit, "commit", _size(commit)))
            record = cache.manifest_path(repo, commit.name, "x").parent
            if ownedfs.link_on_the_way(run.root, record) is not None:
                run.skip(ownedfs.link_on_the_way(run.root, record), _LINK)
            elif record.is_dir():
                going.append(PrunedPath(record, "commit", _size(record)))
            continue
        if commit.name in commits:
            run.kept.append((repo_id, commit.name))
        else:
            (_, variant), lock = running[0]
            run.skip(commit, _running(commit.name, variant, lock))
        if stat.S_ISLNK(os.lstat(commit).st_mode):
            continue  # a snapshot elsewhere links no blob of this repo
        for dirpath, _, names in os.walk(commit):
            for name in names:
                link = Path(dirpath) / name
                if link.is_symlink():
                    linked.add(Path(os.readlink(link)).name)
    run.remove(going)
    blobs = repo / "blobs"
    started, started_parts = more_locks()  # a download that began since: its lock taken too, or it is running
    busy |= started
    busy_parts |= started_parts
    if busy:  # a running download may have placed blobs that no snapshot links yet
        (commit, variant), lock = next(iter(busy.items()))
        if blobs.is_dir():
            run.skip(blobs, "the blobs no snapshot links: " + _running(commit, variant, lock))
    elif not links_known:
        if blobs.is_dir():
            run.skip(blobs, f"the blobs no snapshot links: {snapshots} cannot be looked into")
    else:
        unlinked = [PrunedPath(b, "blob", _size(b)) for b in run.children(blobs) if b.name not in linked]
        run.remove(unlinked)
    partials = [p for p in run.children(repo / ".kernel-deps" / "tmp") if p.name.endswith(".part")]
    run.remove(_stale(run, partials, "partial", busy_locks=set(), busy_parts=busy_parts))
    locks = [p for p in run.children(cache.lock_dir(repo)) if p.name.endswith(_LOCK_SUFFIX)]
    run.remove(_stale(run, locks, "lock-file", busy_locks=set(busy.values()) | set(busy_parts.values())))


def _take_locks(
    run: _Run, repo: Path, held: ExitStack, seen: set[Path]
) -> tuple[dict[tuple[str, str], Path], dict[str, Path]]:
    """Take, without waiting, every download lock of ``repo`` that a file exists for (and
    that is not in ``seen``: tried already); the (commit, variant) and partial blobs whose
    lock another process holds, with the lock. A lock taken where ``flock`` does not work
    may be its ``.held`` file alone."""
    from kernel_deps.core.filelocks import HELD_SUFFIX, HostLock, stale_after

    busy: dict[tuple[str, str], Path] = {}
    busy_parts: dict[str, Path] = {}
    for found in run.children(cache.lock_dir(repo)):
        path = found.with_name(found.name.removesuffix(HELD_SUFFIX))
        if path in seen or not path.name.endswith(_LOCK_SUFFIX) or not stat.S_ISREG(os.lstat(found).st_mode):
            continue
        seen.add(path)
        lock = HostLock(path, stale_after=stale_after())
        try:
            taken = lock.try_acquire()
        except OSError:
            continue  # cannot be opened: it guards nothing prune could race
        if not taken:
            stem = path.name[: -len(_LOCK_SUFFIX)]
            if part := _PART_LOCK.fullmatch(stem):
                busy_parts[part["hash"]] = path
            elif variant := _VARIANT_LOCK.fullmatch(stem):
                busy[(variant["commit"], variant["variant"])] = path
            continue
        held.callback(lock.release)
    return busy, busy_parts


def _running(commit: str, variant: str, lock: Path) -> str:
    return f"a download of {commit[:12]} {variant} is running (it holds {lock})"


def _stale_lock_files(run: _Run, prefix: str, repos: set[str]) -> list[PrunedPath]:
    """Lock files of kernel repos no longer in the cache at all, untouched for a day."""
    from kernel_deps.core.filelocks import HELD_SUFFIX, HostLock, stale_after

    found: list[PrunedPath] = []
    for folder in run.children(run.root / ".locks"):
        if not folder.name.startswith(prefix) or folder.name in repos:
            continue
        for entry in _stale(run, run.children(folder), "lock-file", busy_locks=set()):
            held = entry.path.name.endswith(HELD_SUFFIX)  # a lock taken without flock: the lock breaks it if stale
            lock = HostLock(entry.path.with_name(entry.path.name.removesuffix(HELD_SUFFIX)), stale_after=stale_after())
            try:
                taken = lock.try_acquire()
            except OSError:
                taken = False
            if not taken:
                run.skip(entry.path, "another process holds it")
                continue
            lock.release()
            if not held:
                found.append(entry)
    return found


def _stale(run: _Run, paths: list[Path], kind: str, *, busy_locks: set[Path],
           busy_parts: dict[str, Path] | None = None) -> list[PrunedPath]:  # fmt: skip
    cutoff = time.time() - cache.STALE_PARTIAL_SECONDS
    found = []
    for path in paths:
        try:
            info = path.lstat()
        except OSError:
            continue
        if info.st_mtime >= cutoff:
            continue
        lock = (busy_parts or {}).get(path.name[: -len(".part")]) if kind == "partial" else None
        if path in busy_locks or lock is not None:
            run.skip(path, f"its download is running (it holds {lock or path})")
            continue
        found.append(PrunedPath(path, kind, info.st_size))
    return found


def _size(path: Path) -> int:
    """Bytes on disk under ``path`` (links not followed)."""
    if not path.is_dir() or path.is_symlink():
        return path.lstat().st_size
    return sum((Path(d) / n).lstat().st_size for d, _, names in os.walk(path) for n in names)

"""Exactly some verified variants of the cache, in a folder of their own (``--into``).

The folder has the Hugging Face cache layout (``store``'s), so ``KERNELS_CACHE=<folder>``
with ``HF_HUB_OFFLINE=1`` loads from it; an image's builder stage copies it into the image.
Each blob is a hard link to the cache's where the file system allows, else a copy; each
variant is placed by ``store.place_variant`` (atomically, with its manifest); every
placed variant is then checked again from its files' contents.

The folder is kernel-deps' own only by its record, ``.kernel-deps-into.json``, of every
path it placed there: ``--into`` takes a new or empty folder (and writes the record first),
or one holding its record, and refuses any other (exit 2), as it refuses a folder that is,
holds or lies inside the project, the kernel cache, the Hugging Face home or its hub
cache. Inside its folder it removes only what its record says it placed, each only while
it is still of the kind placed (a blob a plain file, a variant a folder of links): a
user's file added there stays. The record is written with what a run is about to place
before anything is placed, so a kill at any moment leaves nothing the next run does not
know to be its own. Nothing is written or removed through a symbolic link it did not
create (:mod:`kernel_deps.core.ownedfs`): a link on the way is refused, naming it.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Sequence

from kernel_deps.cache import store
from kernel_deps.core import ownedfs
from kernel_deps.core.errors import FileWriteError, KernelCacheReadError, LinkedPathError, UsageError
from kernel_deps.core.records import Record
from kernel_deps.core.settings import BUILD_DIR

RECORD_NAME = ".kernel-deps-into.json"
_RECORD_KEY = "kernel-deps-into"
_OWN = ".kernel-deps"  # store's own records (manifests, staging)

# What a record may list: the four kinds of path --into places, nothing else.
_REPO = r"(?:kernels|models)--[^/]+"
_KINDS = {
    "blob": re.compile(rf"{_REPO}/blobs/(?:[0-9a-f]{{40}}|[0-9a-f]{{64}})"),
    "variant": re.compile(rf"{_REPO}/snapshots/[0-9a-f]{{40}}/{BUILD_DIR}/[^/]+"),
    "manifest": re.compile(rf"{_REPO}/{re.escape(_OWN)}/[0-9a-f]{{40}}/[^/]+\.json"),
    "staging": re.compile(rf"{_REPO}/{re.escape(_OWN)}/staging"),
}


class WantedVariant(Record):
    """One locked variant to place: its repo, commit, variant name and locked hash."""

    __slots__ = ("repo_id", "commit", "variant", "hash")
    repo_id: str
    commit: str
    variant: str
    hash: str

    def __init__(self, repo_id: str, commit: str, variant: str, hash: str) -> None:
        self._init(repo_id, commit, variant, hash)


class PlacedMismatch(Record):
    """A variant placed in the ``--into`` folder that does not check out there: its
    repo, variant and the files' problems (none when it was not found at all)."""

    KIND = "placed-mismatch"

    __slots__ = ("kind", "repo_id", "variant", "folder", "files")
    kind: str
    repo_id: str
    variant: str
    folder: Path
    files: tuple[store.FileProblem, ...]

    def __init__(self, repo_id: str, variant: str, folder: Path, files: tuple[store.FileProblem, ...]) -> None:
        self._init(self.KIND, repo_id, variant, folder, files)


def placed_mismatch_text(problem: PlacedMismatch) -> str:
    """The line saying what ``problem`` found (as ``sync`` prints it and its JSON holds it)."""
    files = ", ".join(f"{p.path} {p.kind}" for p in problem.files) or "missing"
    return (f"{problem.repo_id} {problem.variant}: placed in {problem.folder} but does not match kernels.lock "
            f"({files}); run it again")  # fmt: skip


class SubsetReport(Record):
    """What was placed in the folder, what was removed from it, and what its check found."""

    __slots__ = ("folder", "placed", "removed")
    folder: Path
    placed: tuple[store.VariantCheck, ...]  # each checked again in the folder after writing
    removed: tuple[Path, ...]

    def __init__(self, folder: Path, placed: tuple[store.VariantCheck, ...], removed: tuple[Path, ...]) -> None:
        self._init(folder, placed, removed)

    @property
    def problems(self) -> tuple[PlacedMismatch, ...]:
        """One per placed variant that does not check out in the folder."""
        return tuple(PlacedMismatch(c.repo_id, c.variant, self.folder, c.problems) for c in self.placed if not c.ok)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.placed)

    def to_json(self) -> dict:
        return {
            "folder": str(self.folder),
            "ok": self.ok,
            "variants": [{"repo_id": c.repo_id, "commit": c.commit, "variant": c.variant, "path": str(c.path)}
                         for c in self.placed],  # fmt: skip
            "removed": [str(p) for p in self.removed],
            "problems": [placed_mismatch_text(p) for p in self.problems],
        }


def check_folder(folder: Path, root: Path, *, project: Path | None = None) -> None:
    """UsageError unless ``folder`` can be a folder of ``--into``'s own: not the project,
    the kernel cache ``root``, the Hugging Face home or hub cache (nor inside or around
    one), not a link, and new, empty, or holding the record of an earlier ``--into``."""
    folder = Path(folder)
    if os.path.islink(folder):
        raise UsageError(
            "is a symbolic link",
            subject=f"--into {folder}",
            hint="name the folder itself (kernels --into writes through no link)",
        )
    if folder.exists() and not folder.is_dir():
        raise UsageError(
            "not a folder",
            subject=f"--into {folder}",
            hint="name a folder (it is created when missing)",
        )
    for what, place in _protected(Path(root), project):
        if ownedfs.is_within(folder, place):
            where = "is" if os.path.realpath(folder) == os.path.realpath(place) else "lies inside"
        elif ownedfs.is_within(place, folder):
            where = "holds"
        else:
            continue
        raise UsageError(
            f"{where} {what} ({place}), which --into would overwrite",
            subject=f"--into {folder}",
            hint="name a folder of its own, outside the project and the caches",
        )
    if folder.is_dir():
        _read_record(folder)


def _protected(root: Path, project: Path | None) -> list[tuple[str, Path]]:
    """The folders an ``--into`` folder may not be, hold or lie inside."""
    env = os.environ
    default_home = os.path.join(env.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
    home = _expanded(env.get("HF_HOME") or default_home)
    hub = _expanded(env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub"))
    places = [("the project folder", Path(project))] if project is not None else []
    places += [("the kernel cache", root), ("the kernel cache", store.cache_root())]
    return places + [("the Hugging Face home", home), ("the Hugging Face cache", hub)]


def _expanded(path: str) -> Path:
    """A path with ``~`` and environment variables expanded, as huggingface_hub expands them."""
    return Path(os.path.expandvars(os.path.expanduser(path)))


def _read_record(folder: Path) -> list[str]:
    """What an earlier ``--into`` placed in ``folder``; UsageError for a folder that is not
    empty and holds no record, or a record that is not one --into writes."""
    try:
        placed = ownedfs.read_record(folder, RECORD_NAME, _RECORD_KEY)
    except (OSError, ValueError) as exc:  # JSONDocumentError is a ValueError
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise UsageError(
            f"{RECORD_NAME} is not the record kernels --into writes ({reason})",
            subject=f"--into {folder}",
            hint="empty the folder, or name another one",
        ) from None
    if placed is None:
        with os.scandir(folder) as entries:
            if next(entries, None) is not None:
                raise UsageError(
                    f"not empty, and not a folder kernels --into wrote (no {RECORD_NAME})",
                    subject=f"--into {folder}",
                    hint="name a new or empty folder",
                )
        return []
    for path in placed:
        if _kind(path) is None:
            raise UsageError(
                f"{RECORD_NAME} lists {path!r}, which --into never places",
                subject=f"--into {folder}",
                hint="empty the folder, or name another one",
            )
    return placed


def _kind(path: str) -> str | None:
    return next((kind for kind, pattern in _KINDS.items() if pattern.fullmatch(path)), None)


def place_subset(
    wanted: Sequence[WantedVariant], folder: Path, *, root: Path | None = None, project: Path | None = None
) -> SubsetReport:
    """Place exactly ``wanted`` (verified in the cache ``root``) in ``folder``, remove what an
    earlier run placed there and is not wanted now, and check every placed variant again."""
    root = root or store.cache_root()
    folder = Path(folder)
    check_folder(folder, root, project=project)
    sources: dict[str, Path] = {}
    files: list[tuple[WantedVariant, dict[str, str]]] = []
    for want in wanted:  # every source is checked before anything is written
        check = store.check_variant(want.repo_id, want.commit, want.variant, want.hash, root=root)
        source = store.find_repo_dir(want.repo_id, root)
        if not check.ok or source is None:
            raise KernelCacheReadError(
                f"{want.repo_id} {want.variant}: not in the cache as kernels.lock pins it; run 'kernels download'"
            )
        sources[want.repo_id] = source
        files.append((want, dict(check.files)))
    earlier = set(_read_record(folder)) if folder.is_dir() else set()
    placing: dict[str, str] = {}  # relative path -> its kind, all this run places
    for want, variant_files in files:
        name = sources[want.repo_id].name
        placing |= {f"{name}/blobs/{digest}": "blob" for digest in variant_files.values()}
        placing[f"{name}/snapshots/{want.commit}/{BUILD_DIR}/{want.variant}"] = "variant"
        placing[f"{name}/{_OWN}/{want.commit}/{want.variant}.json"] = "manifest"
        placing[f"{name}/{_OWN}/staging"] = "staging"
    for rel, kind in sorted(placing.items()):  # nothing placed through a link, nor over what is not its own
        _check_place(folder, rel, kind, earlier)
    removed: list[Path] = []
    made = _missing_folders(folder)  # the folders this run makes: none is left empty if it stops
    staging = {rel for rel, kind in placing.items() if kind == "staging"}
    done = False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        ownedfs.write_record(folder, RECORD_NAME, _RECORD_KEY, earlier | set(placing))  # before anything is placed
        for want, variant_files in files:
            repo = folder / sources[want.repo_id].name
            real_variant = store.variant_dir(sources[want.repo_id], want.commit, want.variant)
            for rel, content_hash in variant_files.items():
                _place_blob(folder, real_variant / rel, store.blob_path(repo, content_hash))
            store.place_variant(repo, want.commit, want.variant, variant_files)
        removed += [folder / rel for rel in sorted(earlier - set(placing)) if _remove_placed(folder, rel)]
        done = True
    except OSError as exc:
        where = exc.filename or folder
        raise FileWriteError(f"cannot write {where} ({exc.strerror or exc})", subject=f"--into {folder}") from None
    finally:  # also when a write fails or Ctrl-C stops the run: no staging folder, nor one made empty, stays
        _tidy(folder, staging, set(placing) - staging if done else earlier | set(placing), [] if done else made)
    placed = tuple(store.check_variant(w.repo_id, w.commit, w.variant, w.hash, root=folder) for w in wanted)
    return SubsetReport(folder, placed, tuple(removed))


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and each folder above it that does not exist yet, innermost first."""
    missing = []
    while not os.path.lexists(folder) and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    return missing


def _tidy(folder: Path, staging: set[str], recorded: set[str], made: list[Path]) -> None:
    """After a run, finished or not: remove the store's staging folders (what a stopped
    placing leaves there; made again by the next) and every folder of what it places that is
    left empty, record ``recorded``, and, when this run made ``folder`` and placed nothing in
    it, remove it and the folders made above it."""
    try:
        if not folder.is_dir():
            return
        for rel in sorted(staging):
            _remove_placed(folder, rel)
        # A run stopped between making a folder and placing in it (a manifest's commit folder,
        # a variant's build folder, blobs/) leaves it empty: each goes, with those above it that it empties.
        for parent in sorted({(folder / rel).parent for rel in recorded | staging}, reverse=True):
            ownedfs.remove_empty_folders(folder, parent)
        with os.scandir(folder) as entries:
            names = {entry.name for entry in entries}
        if made and names <= {RECORD_NAME}:
            ownedfs.remove(folder, folder / RECORD_NAME)
            for path in made:  # innermost first; each only while empty
                os.rmdir(path)
            return
        ownedfs.write_record(folder, RECORD_NAME, _RECORD_KEY, recorded)
    except OSError:
        pass  # tidying is best effort: the record still names what the next run may remove


def _check_place(folder: Path, rel: str, kind: str, earlier: set[str]) -> None:
    """UsageError (LinkedPathError for a link) unless ``rel`` can be placed in ``folder``:
    no link on the way, and absent or placed there by an earlier run, still of its kind."""
    path = folder / rel
    blocked = next((p for p in (*reversed(path.parents), path) if len(p.parts) > len(folder.parts)
                    and os.path.lexists(p) and not os.path.islink(p) and not p.is_dir()), None)  # fmt: skip
    if blocked is not None and blocked != path:  # a file where a folder on the way is due: --into placed none
        raise UsageError(
            f"{blocked} is in the way and --into did not place it",
            subject=f"--into {folder}",
            hint="remove it, or name another folder",
        )
    link = ownedfs.link_on_the_way(folder, path) if folder.is_dir() else None
    if link is not None:
        raise LinkedPathError(
            f"{link} is a symbolic link, which --into did not create and writes nothing through",
            path=link,
            subject=f"--into {folder}",
            hint="remove it",
        )
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    if rel not in earlier:
        raise UsageError(
            f"{path} is in the way and --into did not place it",
            subject=f"--into {folder}",
            hint="remove it, or name another folder",
        )
    if not _of_kind(path, info, kind):
        raise UsageError(
            f"{path} is not what --into placed there",
            subject=f"--into {folder}",
            hint="remove it, or name another folder",
        )


def _of_kind(path: Path, info: os.stat_result, kind: str) -> bool:
    """True when ``path`` is still what --into places as ``kind``: a blob or manifest a plain
    file; a variant or the staging folder a folder of folders and links only."""
    if kind in ("blob", "manifest"):
        return stat.S_ISREG(info.st_mode)
    if not stat.S_ISDIR(info.st_mode):
        return False
    for dirpath, dirnames, filenames in os.walk(path):
        base = Path(dirpath)
        if any(not (base / name).is_symlink() for name in filenames):
            return False
        dirnames[:] = [d for d in dirnames if not (base / d).is_symlink()]
    return True


def _place_blob(folder: Path, source: Path, blob: Path) -> None:
    """``blob`` holds the bytes of ``source``: a hard link where possible, else a copy."""
    real = Path(os.path.realpath(source))
    try:
        info = os.lstat(blob)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        if os.path.samestat(os.stat(real), info):
            return  # the cache's own file, linked here before
        if store.content_hash_of(blob, store.hash_kind(blob.name)) == blob.name:
            return
    ownedfs.place_file(folder, blob, real)


def _remove_placed(folder: Path, rel: str) -> bool:
    """Remove ``rel``, placed by an earlier run, while it is still of the kind placed (and
    the folders it leaves empty); True when it went."""
    path = folder / rel
    kind = _kind(rel)
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    if kind is None or ownedfs.link_on_the_way(folder, path.parent) is not None or not _of_kind(path, info, kind):
        return False  # not what --into placed there any more: left as it is
    ownedfs.remove(folder, path)
    if kind == "blob":
        ownedfs.remove(folder, path.with_name(f".{path.name}.incoming"))  # a temporary a kill left
    ownedfs.remove_empty_folders(folder, path.parent)
    return True

"""Exactly some verified variants of the cache, in a folder of their own (``--into``).

The folder has the Hugging Face cache layout (``store``'s), so ``KERNELS_CACHE=<folder>``
with ``HF_HUB_OFFLINE=1`` loads from it; an image's builder stage copies it into the image.
Each blob is a hard link to the cache's where the file system allows, else a copy; each
variant is placed by ``store.place_variant`` (atomically, with its manifest). Whatever else
the folder holds (other repos, commits, variants, blobs no placed variant links) is
removed, then every placed variant is checked again from its files' contents.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from kernel_deps.cache import store
from kernel_deps.core.errors import FileWriteError, KernelCacheReadError, UsageError
from kernel_deps.core.settings import BUILD_DIR

_OWN = ".kernel-deps"  # store's own records (manifests, staging): kept


@dataclass(frozen=True, slots=True)
class WantedVariant:
    """One locked variant to place: its repo, commit, variant name and locked hash."""

    repo_id: str
    commit: str
    variant: str
    hash: str


@dataclass(frozen=True, slots=True)
class SubsetReport:
    """What was placed in the folder, what was removed from it, and what its check found."""

    folder: Path
    placed: tuple[store.VariantCheck, ...]  # each checked again in the folder after writing
    removed: tuple[Path, ...]

    @property
    def problems(self) -> list[str]:
        """One line per placed variant that does not check out in the folder."""
        return [f"{c.repo_id} {c.variant}: placed in {self.folder} but does not match kernels.lock "
                f"({', '.join(f'{p.path} {p.kind}' for p in c.problems) or 'missing'}); run it again"
                for c in self.placed if not c.ok]  # fmt: skip

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {
            "folder": str(self.folder),
            "ok": self.ok,
            "variants": [{"repo_id": c.repo_id, "commit": c.commit, "variant": c.variant, "path": str(c.path)}
                         for c in self.placed],  # fmt: skip
            "removed": [str(p) for p in self.removed],
            "problems": self.problems,
        }


def check_folder(folder: Path, root: Path) -> None:
    """UsageError unless ``folder`` can be a folder of its own beside the cache ``root``."""
    if folder.resolve() == Path(root).resolve():
        raise UsageError(f"--into {folder}: that is the kernel cache itself; name a folder of its own")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--into {folder}: not a folder; name a folder (it is created when missing)")


def place_subset(wanted: Sequence[WantedVariant], folder: Path, *, root: Path | None = None) -> SubsetReport:
    """Place exactly ``wanted`` (verified in the cache ``root``) in ``folder``, remove the rest,
    and check every placed variant again there."""
    root = root or store.cache_root()
    check_folder(folder, root)
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
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for want, variant_files in files:
            repo = folder / sources[want.repo_id].name
            real_variant = store.variant_dir(sources[want.repo_id], want.commit, want.variant)
            for rel, content_hash in variant_files.items():
                _link_or_copy(real_variant / rel, store.blob_path(repo, content_hash))
            store.place_variant(repo, want.commit, want.variant, variant_files)
        keep = _keep(wanted, sources)
        removed = unwanted(folder, keep)
        for path in removed:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    except OSError as exc:
        where = exc.filename or folder
        raise FileWriteError(f"--into {folder}: cannot write {where} ({exc.strerror or exc})") from None
    placed = tuple(store.check_variant(w.repo_id, w.commit, w.variant, w.hash, root=folder) for w in wanted)
    return SubsetReport(folder, placed, tuple(removed))


def _keep(wanted: Sequence[WantedVariant], sources: dict[str, Path]) -> dict[str, dict[str, set[str]]]:
    """Repo folder name -> commit -> the variant names to keep."""
    keep: dict[str, dict[str, set[str]]] = {}
    for want in wanted:
        keep.setdefault(sources[want.repo_id].name, {}).setdefault(want.commit, set()).add(want.variant)
    return keep


def _link_or_copy(source: Path, blob: Path) -> None:
    """``blob`` holds the bytes of ``source``: a hard link where possible, else a copy."""
    real = Path(os.path.realpath(source))
    if blob.is_file() and not blob.is_symlink():
        if os.path.samefile(real, blob) or store.content_hash_of(blob, store.hash_kind(blob.name)) == blob.name:
            return
    blob.parent.mkdir(parents=True, exist_ok=True)
    incoming = blob.with_name(f"{blob.name}.incoming")
    incoming.unlink(missing_ok=True)
    try:
        os.link(real, incoming)
    except OSError:
        shutil.copyfile(real, incoming)
    os.replace(incoming, blob)


def unwanted(folder: Path, keep: dict[str, dict[str, set[str]]]) -> list[Path]:
    """What ``folder`` holds beyond the variants in ``keep``: other repos, commits, variants,
    and blobs no kept variant links (``store``'s own records aside)."""
    if not folder.is_dir():
        return []
    found: list[Path] = []
    for repo in sorted(folder.iterdir()):
        commits = keep.get(repo.name)
        if commits is None or repo.is_symlink() or not repo.is_dir():
            found.append(repo)
            continue
        found += [p for p in sorted(repo.iterdir()) if p.name not in ("snapshots", "blobs", _OWN)]
        linked: set[str] = set()
        for commit in _children(repo / "snapshots"):
            variants = commits.get(commit.name)
            if variants is None or commit.is_symlink():
                found.append(commit)
                continue
            found += [p for p in sorted(commit.iterdir()) if p.name != BUILD_DIR]
            for variant in _children(commit / BUILD_DIR):
                if variant.name not in variants:
                    found.append(variant)
                    continue
                for dirpath, _, names in os.walk(variant):
                    links = (Path(dirpath) / name for name in names)
                    linked |= {Path(os.readlink(link)).name for link in links if link.is_symlink()}
        found += [blob for blob in _children(repo / "blobs") if blob.name not in linked]
    return found


def _children(folder: Path) -> list[Path]:
    return sorted(folder.iterdir()) if folder.is_dir() and not folder.is_symlink() else []

"""Placing a variant in ``snapshots/``: staged first in a folder of its own
(:func:`staged_variant`) for the caller's checks, renamed into place only after every blob
is verified and those checks pass, so nothing unverified is ever visible there; removed
only when kernel-deps placed it (:func:`remove_placed_variant`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from kernel_deps.cache.checks import read_manifest, walk_files
from kernel_deps.cache.layout import OWN, manifest_path, variant_dir
from kernel_deps.core import atomicfile

class StagedVariant:
    """A variant linked in a staging folder of its own, at the depth of its place in
    ``snapshots/`` (so its relative links already reach ``blobs/``): what a check reads
    before :meth:`place` makes it visible. Made by :func:`staged_variant`."""

    __slots__ = ("repo", "commit", "variant", "files", "folder", "placed")

    def __init__(self, repo: Path, commit: str, variant: str, files: Mapping[str, str], folder: Path) -> None:
        self.repo, self.commit, self.variant, self.files, self.folder = repo, commit, variant, dict(files), folder
        self.placed: Path | None = None

    def place(self) -> Path:
        """Write the manifest, then rename the staged folder into ``snapshots/<commit>/build/<variant>``,
        replacing any previous copy; a kill in between leaves a manifest that still matches the
        lock and no half-built folder under ``snapshots/``."""
        import secrets
        import shutil

        final = variant_dir(self.repo, self.commit, self.variant)
        manifest = manifest_path(self.repo, self.commit, self.variant)
        manifest.parent.mkdir(parents=True, exist_ok=True)
        atomicfile.write_text(manifest, json.dumps({"files": dict(sorted(self.files.items()))}, indent=1) + "\n")
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists() or final.is_symlink():
            trash = _staging_root(self.repo) / f"old-{self.variant}.{secrets.token_hex(6)}"
            os.replace(final, trash)
            shutil.rmtree(trash, ignore_errors=True)
        os.replace(self.folder, final)
        self.placed = final
        return final


def _staging_root(repo: Path) -> Path:
    return repo / OWN / "staging"


@contextmanager
def staged_variant(repo: Path, commit: str, variant: str, files: Mapping[str, str]) -> Iterator[StagedVariant]:
    """``files`` (relative path -> blob) linked in a staging folder; whatever is not placed
    (:meth:`StagedVariant.place`) by the end of the block is removed, so a refused or failed
    attempt leaves nothing under ``snapshots/`` and no half-built folder anywhere."""
    import secrets  # placing is for downloads; checking, what most commands do, needs neither
    import shutil

    final = variant_dir(repo, commit, variant)
    depth = len(final.relative_to(repo).parts)  # snapshots/<commit>/build/<variant>
    staging_root = _staging_root(repo)
    staging_root.mkdir(parents=True, exist_ok=True)
    attempt = staging_root / f"{variant}.{secrets.token_hex(6)}"
    folder = attempt / variant  # .kernel-deps/staging/<attempt>/<variant>: as deep as its place in snapshots/
    assert len(folder.relative_to(repo).parts) == depth
    try:
        folder.mkdir(parents=True)
        for rel, content_hash in files.items():
            link = folder / rel
            link.parent.mkdir(parents=True, exist_ok=True)
            up = "../" * (depth + rel.count("/"))
            os.symlink(f"{up}blobs/{content_hash}", link)
        yield StagedVariant(repo, commit, variant, files, folder)
    finally:
        shutil.rmtree(attempt, ignore_errors=True)  # a refused or failed attempt leaves no half-built folder


def place_variant(repo: Path, commit: str, variant: str, files: dict[str, str]) -> Path:
    """Make ``snapshots/<commit>/build/<variant>`` link ``files`` (relative path -> blob), with no
    check beyond what the caller made: for a folder of variants already verified in the cache
    (``--into``). A download admits what it fetched through its own checks instead
    (:func:`kernel_deps.fetch.gate.admit_variant`)."""
    with staged_variant(repo, commit, variant, files) as staged:
        return staged.place()


def remove_placed_variant(repo: Path, commit: str, variant: str, expected_hash: str) -> bool:
    """Remove ``snapshots/<commit>/build/<variant>`` and its manifest when kernel-deps placed it
    there: its manifest matches ``expected_hash`` and names exactly the links the folder holds,
    each a link into this repo's ``blobs/`` (which stay). Anything else (a folder another tool
    wrote, a real file in it) is left as it is; returns whether it was removed."""
    import secrets
    import shutil

    final = variant_dir(repo, commit, variant)
    recorded = read_manifest(repo, commit, variant, expected_hash)
    if recorded is None or final.is_symlink() or not final.is_dir():
        return False
    blobs = Path(os.path.realpath(repo / "blobs"))
    found = {}
    for rel, path in walk_files(final):
        if not path.is_symlink() or not Path(os.path.realpath(path)).is_relative_to(blobs):
            return False
        found[rel] = Path(os.readlink(path)).name
    if found != recorded:
        return False
    trash = _staging_root(repo) / f"old-{variant}.{secrets.token_hex(6)}"
    trash.parent.mkdir(parents=True, exist_ok=True)
    os.replace(final, trash)
    manifest_path(repo, commit, variant).unlink(missing_ok=True)
    shutil.rmtree(trash, ignore_errors=True)
    return True

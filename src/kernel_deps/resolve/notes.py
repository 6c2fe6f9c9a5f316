"""What a resolution did that the user should know, as records (the CLI renders each ``note:`` line).

Redirects followed, kernels held back below the newest version in range for a deployment
target or a signature policy (``PassedOver``: every version passed over and why), and
build folders skipped (names that are not build variants).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel_deps.core.records import Record
from kernel_deps.lock.diff import LockedPin

if TYPE_CHECKING:
    from kernel_deps.hub.index import KernelIndex
    from kernel_deps.lock.model import Lockfile
    from kernel_deps.resolve.resolver import Resolution


class PassedOver(Record):
    """A newer version in range that a kernel was held back from: it misses ``missing`` targets."""

    __slots__ = ("version", "commit", "missing", "signature")
    version: str  # its tag or branch (or short commit)
    commit: str
    missing: tuple[str, ...]
    signature: str | None  # held-back-unsigned: why its builds are refused

    def __init__(self, version: str, commit: str, missing: tuple[str, ...], signature: str | None = None) -> None:
        self._init(version, commit, missing, signature)

    def to_json(self) -> dict:
        if self.signature is not None:
            return {"version": self.version, "commit": self.commit, "signature": self.signature}
        return {"version": self.version, "commit": self.commit, "missing_targets": list(self.missing)}


NOTE_KINDS = ("redirect-followed", "held-back", "held-back-unsigned", "skipped-build-folders")


class LockNote(Record):
    """Something a lock run did that the user should know, as data (the CLI renders the ``note:`` line)."""

    __slots__ = ("kind", "repo_id", "locked", "redirects", "passed_over", "folders")
    kind: str  # one of NOTE_KINDS
    repo_id: str  # redirect-followed: the repo asked for; else the locked kernel
    locked: LockedPin | None  # held-back, held-back-unsigned, skipped-build-folders
    redirects: tuple[str, ...]  # redirect-followed: from the repo asked for to the one locked
    passed_over: tuple[PassedOver, ...]  # held-back: newest first, every one
    folders: tuple[str, ...]  # skipped-build-folders: the names under build/

    def __init__(
        self, kind: str, repo_id: str, locked: LockedPin | None = None, redirects: tuple[str, ...] = (),
        passed_over: tuple[PassedOver, ...] = (), folders: tuple[str, ...] = (),
    ) -> None:  # fmt: skip
        self._init(kind, repo_id, locked, redirects, passed_over, folders)

    def to_json(self) -> dict:
        data: dict = {"kind": self.kind, "repo_id": self.repo_id}
        if self.kind == "redirect-followed":
            data["redirects"] = list(self.redirects)
        else:
            data["locked"] = self.locked.to_json() if self.locked else None
        if self.kind in ("held-back", "held-back-unsigned"):
            data["passed_over"] = [p.to_json() for p in self.passed_over]
        if self.kind == "skipped-build-folders":
            data["folders"] = list(self.folders)
        return data


def resolution_notes(resolution: Resolution, lock: Lockfile, index: KernelIndex) -> list[LockNote]:
    """A note per kernel held back below the newest version in range for a deployment
    target (with every version passed over and the targets it misses), and per kernel
    whose build folders were skipped (names that are not build variants)."""
    notes: list[LockNote] = []
    for entry in lock.kernels:
        passed = resolution.held_back.get(entry.repo_id, ())
        if passed:
            over = tuple(PassedOver(c.ref_name, c.commit, tuple(missed)) for c, missed in passed)
            notes.append(LockNote("held-back", entry.repo_id, LockedPin.of(entry), passed_over=over))
        unsigned = resolution.held_back_unsigned.get(entry.repo_id, ())
        if unsigned:
            over = tuple(PassedOver(c.ref_name, c.commit, (), why) for c, why in unsigned)
            notes.append(LockNote("held-back-unsigned", entry.repo_id, LockedPin.of(entry), passed_over=over))
        skipped = index.tree(entry.repo_id, entry.sha).skipped
        if skipped:
            notes.append(LockNote("skipped-build-folders", entry.repo_id, LockedPin.of(entry), folders=tuple(skipped)))
    return notes

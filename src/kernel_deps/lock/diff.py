"""What changed between two locks, as records: one ``LockChange`` per difference, in repo id order.

``kernels lock`` (and ``--check``, ``--dry-run``, ``add``, ``remove``, ``sync``) reports these;
the CLI renders each as its ``+ - ~`` line (``render.change_line``).
"""

from __future__ import annotations

from kernel_deps.core.records import Record
from kernel_deps.lock.entries import LockedPin
from kernel_deps.lock.model import LockedKernel, Lockfile


# What a lock change says happened to one entry (``repo_id``), ``before`` and ``after`` being
# the entry's pin in the old and new lock (None where the entry is not in that lock).
CHANGE_ACTIONS = (
    "added", "removed", "updated", "variant-added", "variant-removed", "variant-hash-changed",
    "requirement-changed", "dependency-added", "dependency-removed", "requires-recorded", "requires-changed",
    "layout-changed",
)  # fmt: skip


class LockChange(Record):
    """One difference between the old and the new lock, as data (the CLI renders the ``+ - ~`` line)."""

    __slots__ = ("action", "repo_id", "before", "after", "variant", "dependency", "requirement", "requires")
    action: str  # one of CHANGE_ACTIONS
    repo_id: str | None  # None: the lock as a whole (layout-changed)
    before: LockedPin | None  # "from" in JSON
    after: LockedPin | None  # "to" in JSON
    variant: str | None  # variant-*
    dependency: str | None  # dependency-*, requires-*
    # requirement-changed: what pyproject.toml asks, before and after (None: transitive only).
    requirement: tuple[str | None, str | None] | None
    # requires-*: what this entry records that it requires of ``dependency``, before (None:
    # not recorded, an older lock) and after.
    requires: tuple[tuple[str, ...] | None, tuple[str, ...]] | None

    def __init__(
        self, action: str, repo_id: str | None, before: LockedPin | None, after: LockedPin | None,
        variant: str | None = None, dependency: str | None = None,
        requirement: tuple[str | None, str | None] | None = None,
        requires: tuple[tuple[str, ...] | None, tuple[str, ...]] | None = None,
    ) -> None:  # fmt: skip
        self._init(action, repo_id, before, after, variant, dependency, requirement, requires)

    def to_json(self) -> dict:
        data: dict = {
            "action": self.action,
            "repo_id": self.repo_id,
            "from": self.before.to_json() if self.before else None,
            "to": self.after.to_json() if self.after else None,
        }
        if self.variant is not None:
            data["variant"] = self.variant
        if self.dependency is not None:
            data["dependency"] = self.dependency
        if self.requirement is not None:
            data["requirement"] = {"from": self.requirement[0], "to": self.requirement[1]}
        if self.requires is not None:
            before, after = self.requires
            data["requires"] = {"from": list(before) if before is not None else None, "to": list(after)}
        return data


def diff_locks(old: Lockfile | None, new: Lockfile) -> list[LockChange]:
    """What changed from ``old`` to ``new``, entry by entry in repo id order; empty when equal."""
    before = {k.repo_id: k for k in old.kernels} if old is not None else {}
    after = {k.repo_id: k for k in new.kernels}
    changes: list[LockChange] = []
    for repo_id in sorted(before.keys() | after.keys()):
        a, b = before.get(repo_id), after.get(repo_id)
        if a is None or b is None:
            if a is None:
                changes.append(LockChange("added", repo_id, None, LockedPin.of(b)))
            else:
                changes.append(LockChange("removed", repo_id, LockedPin.of(a), None))
            continue
        pins = (LockedPin.of(a), LockedPin.of(b))
        if (a.sha, a.version) != (b.sha, b.version):
            changes.append(LockChange("updated", repo_id, *pins))
        for name in sorted(a.variants.keys() | b.variants.keys()):
            if name not in a.variants or name not in b.variants:
                action = "variant-added" if name in b.variants else "variant-removed"
                changes.append(LockChange(action, repo_id, *pins, variant=name))
            elif a.sha == b.sha and a.variants[name] != b.variants[name]:
                # A new commit is expected to change hashes; the same commit is not.
                changes.append(LockChange("variant-hash-changed", repo_id, *pins, variant=name))
        if a.requirement != b.requirement:
            requirement = (a.requirement, b.requirement)
            changes.append(LockChange("requirement-changed", repo_id, *pins, requirement=requirement))
        added = [d for d in b.dependencies if d not in a.dependencies]
        dropped = [d for d in a.dependencies if d not in b.dependencies]
        changes += [LockChange("dependency-added", repo_id, *pins, dependency=d) for d in added]
        changes += _requirement_changes(repo_id, a, b, pins)
        changes += [LockChange("dependency-removed", repo_id, *pins, dependency=d) for d in dropped]
    return changes


def _requirement_changes(
    repo_id: str, a: LockedKernel, b: LockedKernel, pins: tuple[LockedPin, LockedPin]
) -> list[LockChange]:
    """What ``b`` records that a kept dependency of ``a`` must meet, where it differs."""
    changes = []
    for dep in (d for d in b.dependencies if d in a.dependencies and b.kernel_depends is not None):
        after = tuple(b.kernel_depends[dep])
        if a.kernel_depends is None:
            changes.append(LockChange("requires-recorded", repo_id, *pins, dependency=dep, requires=(None, after)))
        elif a.kernel_depends[dep] != b.kernel_depends[dep]:
            before = tuple(a.kernel_depends[dep])
            changes.append(LockChange("requires-changed", repo_id, *pins, dependency=dep, requires=(before, after)))
    return changes

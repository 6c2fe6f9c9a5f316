"""`kernels tree` as a library function: the locked kernels as a dependency tree, and the
build that serves each declared deployment target and this machine. No network.

The tree starts at the project's requirements; each kernel's children are the kernels it
depends on, as the lock records them. A kernel met again further down is marked
``repeated`` and not expanded twice (``uv tree`` and ``cargo tree`` print ``(*)``).
The requirement of a direct kernel is the one pyproject.toml declares; the requirement a
kernel states for its dependency is the one the lock records (its ``kernel_depends``;
None for a lock written before they were recorded). The lock is judged against the
project as every command judges it (:func:`kernel_deps.lock.freshness.judge_lock`): a pin
that does not meet the requirement shown is marked ``unmet``, a requirement the lock lacks
is listed in ``missing``, and ``warning`` says the lock no longer agrees with pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from kernel_deps.core.records import FrozenMap, Record
from kernel_deps.core.system import SystemInfo, detect_system
from kernel_deps.core.targets import Target, serving_variant
from kernel_deps.lock.freshness import judge_lock, rules_of, use_warning
from kernel_deps.lock.model import LockedKernel, Lockfile, VariantSigner, lock_path
from kernel_deps.lock.read import read_lock
from kernel_deps.project.record import read_project_record

SCHEMA_VERSION = 3  # of docs/schemas/tree.schema.json; see docs/ci.md
# The kinds of judge_lock that say a pin does not meet the requirement shown beside it.
_UNMET_KINDS = frozenset({"unsatisfied", "version-not-recorded", "dependency-unsatisfied"})


class TreeNode(Record):
    """One locked kernel where it sits in the tree."""

    __slots__ = ("repo_id", "version", "commit", "requirement", "required_by", "dependencies", "repeated", "unmet")
    repo_id: str
    version: str | None
    commit: str
    requirement: str | None  # as its parent (or pyproject.toml) states it; None when unknown
    required_by: str | None  # the parent kernel; None for the project
    dependencies: tuple[TreeNode, ...]
    repeated: bool  # shown in full higher up
    unmet: bool  # the locked pin does not meet ``requirement``

    def __init__(
        self, repo_id: str, version: str | None, commit: str, requirement: str | None, required_by: str | None,
        dependencies: tuple[TreeNode, ...] = (), repeated: bool = False, unmet: bool = False,
    ) -> None:  # fmt: skip
        self._init(repo_id, version, commit, requirement, required_by, dependencies, repeated, unmet)

    def to_json(self) -> dict:
        return {
            "repo_id": self.repo_id,
            "requirement": self.requirement,
            "required_by": self.required_by,
            "version": self.version,
            "commit": self.commit,
            "repeated": self.repeated,
            "unmet": self.unmet,
            "dependencies": [child.to_json() for child in self.dependencies],
        }


class Serving(Record):
    """For one machine (a declared target, or this one): the build that serves each kernel."""

    __slots__ = ("name", "system", "variants", "signers")
    name: str | None  # the target's name; None for this machine
    system: SystemInfo
    variants: FrozenMap  # repo id -> the variant serving it (None: no build does)
    # Who signed each serving build's metadata.json, as the lock records it (None: unsigned or no build).
    signers: FrozenMap  # repo id -> VariantSigner | None

    def __init__(
        self, name: str | None, system: SystemInfo, variants: Mapping[str, str | None],
        signers: Mapping[str, VariantSigner | None] | None = None,
    ) -> None:  # fmt: skip
        self._init(name, system, FrozenMap(variants.items()), FrozenMap(() if signers is None else signers.items()))

    def to_json(self) -> dict:
        signers = {repo_id: s.to_dict() if s else None for repo_id, s in self.signers.items()}
        variants = dict(self.variants)
        return {"name": self.name, "system": self.system.describe(), "variants": variants, "signers": signers}

    @property
    def unserved(self) -> list[str]:
        """The kernels with no build for this machine."""
        return [repo_id for repo_id, variant in self.variants.items() if variant is None]


class TreeReport(Record):
    """What `kernels tree` shows."""

    __slots__ = ("lockfile", "roots", "targets", "this_machine", "missing", "warning")
    lockfile: Path
    roots: tuple[TreeNode, ...]
    targets: tuple[Serving, ...]
    this_machine: Serving
    missing: tuple[tuple[str, str], ...]  # (repo id, requirement) pyproject.toml declares and the lock lacks
    warning: str | None  # the lock no longer agrees with pyproject.toml: what to run

    def __init__(
        self, lockfile: Path, roots: tuple[TreeNode, ...], targets: tuple[Serving, ...], this_machine: Serving,
        missing: tuple[tuple[str, str], ...] = (), warning: str | None = None,
    ) -> None:  # fmt: skip
        self._init(lockfile, roots, targets, this_machine, tuple(missing), warning)

    def to_json(self) -> dict:
        """The report as docs/schemas/tree.schema.json describes it."""
        return {
            "schema_version": SCHEMA_VERSION,
            "ok": self.warning is None,
            "lockfile": str(self.lockfile),
            "warning": self.warning,
            "missing": [{"repo_id": repo_id, "requirement": text} for repo_id, text in self.missing],
            "kernels": [node.to_json() for node in self.roots],
            "targets": [serving.to_json() for serving in self.targets],
            "this_machine": self.this_machine.to_json(),
        }


def tree_project(project_dir: Path, *, system: SystemInfo | None = None, cache_root: Path | None = None) -> TreeReport:
    """The lock of ``project_dir`` as a tree, with the build serving each target and this
    machine, judged against the project (``cache_root`` is not read: the lock holds the tree)."""
    project_dir = Path(project_dir)
    project = read_project_record(project_dir)
    requirements = project.requirements
    path = lock_path(project_dir)
    found = read_lock(path, purpose="use")
    lock = found.lock
    problems = judge_lock(found, rules_of(project))
    unmet = {(p.repo_id, p.facts.get("by")) for p in problems if p.kind in _UNMET_KINDS}
    direct = {req.repo_id: req.text for req in requirements}
    roots = [k for k in lock.kernels if k.repo_id in direct]
    reachable = _reachable(lock, [k.repo_id for k in roots])
    roots += [k for k in lock.kernels if k.repo_id not in reachable]  # left over: still shown
    shown: set[str] = set()
    nodes = tuple(_node(lock, kernel, direct.get(kernel.repo_id), None, shown, (), unmet) for kernel in roots)
    missing = tuple((p.repo_id, p.facts.get("asked") or direct.get(p.repo_id, "")) for p in problems
                    if p.kind == "not-locked")  # fmt: skip
    served = tuple(_serving(lock, t.name, t.system) for t in project.targets)
    return TreeReport(path, nodes, served, _serving(lock, None, system or detect_system()), missing,
                      use_warning(found, problems, str(path)))  # fmt: skip


def _node(
    lock: Lockfile,
    kernel: LockedKernel,
    requirement: str | None,
    parent: str | None,
    shown: set[str],
    path: tuple[str, ...],
    unmet: set[tuple[str | None, str | None]],
) -> TreeNode:
    breaks = (kernel.repo_id, parent) in unmet
    if kernel.repo_id in shown or kernel.repo_id in path:
        return TreeNode(kernel.repo_id, kernel.version, kernel.sha, requirement, parent, (), True, breaks)
    shown.add(kernel.repo_id)
    stated = kernel.kernel_depends or {}
    children = tuple(
        _node(lock, child, " and ".join(stated[name]) if name in stated else None, kernel.repo_id, shown,
              (*path, kernel.repo_id), unmet)  # fmt: skip
        for name, child in ((d, lock.get(d)) for d in kernel.dependencies)
        if child is not None
    )
    return TreeNode(kernel.repo_id, kernel.version, kernel.sha, requirement, parent, children, False, breaks)


def _reachable(lock: Lockfile, start: Sequence[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        repo_id = todo.pop()
        entry = lock.get(repo_id)
        if entry is not None and repo_id not in seen:
            seen.add(repo_id)
            todo += entry.dependencies
    return seen


def _serving(lock: Lockfile, name: str | None, system: SystemInfo) -> Serving:
    target = Target(name or "this machine", system)
    variants = {k.repo_id: serving_variant(target, k.variants) for k in lock.kernels}
    signers = {k.repo_id: k.signatures.get(variants[k.repo_id] or "") for k in lock.kernels}
    return Serving(name, system, variants, signers)

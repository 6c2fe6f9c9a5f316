"""`kernels tree` as a library function: the locked kernels as a dependency tree, and the
build that serves each declared deployment target and this machine. No network.

The tree starts at the project's requirements; each kernel's children are the kernels it
depends on, as the lock records them. A kernel met again further down is marked
``repeated`` and not expanded twice (``uv tree`` and ``cargo tree`` print ``(*)``).
The requirement of a direct kernel is the one pyproject.toml declares; the lock records
only which kernels a kernel depends on, so the requirement a kernel states for its
dependency is read from its ``metadata.json`` when one of its variants is in the cache
(None otherwise).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from kernel_deps.cache import store as cache
from kernel_deps.core import jsondoc
from kernel_deps.core.errors import InvalidKernelMetadataError, PyprojectError
from kernel_deps.core.records import FrozenMap, Record
from kernel_deps.core.settings import BUILD_DIR
from kernel_deps.core.spec import parse_kernel_depends
from kernel_deps.core.system import SystemInfo, detect_system
from kernel_deps.core.targets import Target, serving_variant
from kernel_deps.lock.model import LockedKernel, Lockfile, VariantSigner, lock_path
from kernel_deps.lock.read import read_lock
from kernel_deps.project.pyproject import read_project

SCHEMA_VERSION = 2  # of docs/schemas/tree.schema.json; see docs/ci.md
_CHECK_CACHE = "run 'kernels verify' to check the cached files against the lock"


class TreeNode(Record):
    """One locked kernel where it sits in the tree."""

    __slots__ = ("repo_id", "version", "commit", "requirement", "required_by", "dependencies", "repeated")
    repo_id: str
    version: str | None
    commit: str
    requirement: str | None  # as its parent (or pyproject.toml) states it; None when unknown
    required_by: str | None  # the parent kernel; None for the project
    dependencies: tuple[TreeNode, ...]
    repeated: bool  # shown in full higher up

    def __init__(
        self, repo_id: str, version: str | None, commit: str, requirement: str | None, required_by: str | None,
        dependencies: tuple[TreeNode, ...] = (), repeated: bool = False,
    ) -> None:  # fmt: skip
        self._init(repo_id, version, commit, requirement, required_by, dependencies, repeated)

    def to_json(self) -> dict:
        return {
            "repo_id": self.repo_id,
            "requirement": self.requirement,
            "required_by": self.required_by,
            "version": self.version,
            "commit": self.commit,
            "repeated": self.repeated,
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

    __slots__ = ("lockfile", "roots", "targets", "this_machine")
    lockfile: Path
    roots: tuple[TreeNode, ...]
    targets: tuple[Serving, ...]
    this_machine: Serving

    def __init__(
        self, lockfile: Path, roots: tuple[TreeNode, ...], targets: tuple[Serving, ...], this_machine: Serving,
    ) -> None:  # fmt: skip
        self._init(lockfile, roots, targets, this_machine)

    def to_json(self) -> dict:
        """The report as docs/schemas/tree.schema.json describes it."""
        return {
            "schema_version": SCHEMA_VERSION,
            "lockfile": str(self.lockfile),
            "kernels": [node.to_json() for node in self.roots],
            "targets": [serving.to_json() for serving in self.targets],
            "this_machine": self.this_machine.to_json(),
        }


def tree_project(project_dir: Path, *, system: SystemInfo | None = None, cache_root: Path | None = None) -> TreeReport:
    """The lock of ``project_dir`` as a tree, with the build serving each target and this machine."""
    project_dir = Path(project_dir)
    requirements, targets = read_project(project_dir)
    path = lock_path(project_dir)
    lock = read_lock(path, purpose="use").lock
    direct = {req.repo_id: req.text for req in requirements}
    roots = [k for k in lock.kernels if k.repo_id in direct]
    reachable = _reachable(lock, [k.repo_id for k in roots])
    roots += [k for k in lock.kernels if k.repo_id not in reachable]  # left over: still shown
    shown: set[str] = set()
    nodes = tuple(
        _node(lock, kernel, direct.get(kernel.repo_id), None, shown, (), cache_root) for kernel in roots
    )
    served = tuple(_serving(lock, t.name, t.system) for t in targets)
    return TreeReport(path, nodes, served, _serving(lock, None, system or detect_system()))


def _node(
    lock: Lockfile,
    kernel: LockedKernel,
    requirement: str | None,
    parent: str | None,
    shown: set[str],
    path: tuple[str, ...],
    cache_root: Path | None,
) -> TreeNode:
    if kernel.repo_id in shown or kernel.repo_id in path:
        return TreeNode(kernel.repo_id, kernel.version, kernel.sha, requirement, parent, (), repeated=True)
    shown.add(kernel.repo_id)
    stated = _stated_requirements(kernel, cache_root) if kernel.dependencies else {}
    children = tuple(
        _node(lock, child, stated.get(child.repo_id), kernel.repo_id, shown, (*path, kernel.repo_id), cache_root)
        for child in (lock.get(d) for d in kernel.dependencies)
        if child is not None
    )
    return TreeNode(kernel.repo_id, kernel.version, kernel.sha, requirement, parent, children)


def _stated_requirements(kernel: LockedKernel, cache_root: Path | None) -> dict[str, str]:
    """What ``kernel`` requires of each dependency, from a cached variant's metadata.json;
    InvalidKernelMetadataError naming the file when one is there but cannot be read as one."""
    repo = cache.find_repo_dir(kernel.repo_id, cache_root)
    if repo is None:
        return {}
    for variant in sorted(kernel.variants):
        metadata = cache.variant_dir(repo, kernel.sha, variant) / "metadata.json"
        source = f"{kernel.repo_id}@{kernel.sha[:12]}: {BUILD_DIR}/{variant}/metadata.json in the cache"
        try:
            data = metadata.read_bytes()
        except OSError:
            continue  # not cached, or not readable: the requirement is shown as unknown
        try:
            parsed = jsondoc.loads(data)
            if not isinstance(parsed, dict):
                raise jsondoc.JSONDocumentError("not a JSON object")
            requirements = parse_kernel_depends(parsed.get("kernel-depends", []), source=source)
        except jsondoc.JSONDocumentError as exc:
            raise InvalidKernelMetadataError(f"{source} cannot be read: {exc}; {_CHECK_CACHE}") from None
        except PyprojectError as exc:
            raise InvalidKernelMetadataError(exc.reason, subject=exc.subject, hint=_CHECK_CACHE) from exc
        return {req.repo_id: req.text for req in requirements}
    return {}


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

"""`kernels lock` as a library function: pyproject + prior lock + Hub -> kernels.lock."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from kernel_deps.errors import FileWriteError, LockfileError
from kernel_deps.hub import HubClient
from kernel_deps.index import KernelIndex
from kernel_deps.lockfile import (
    LockedKernel,
    Lockfile,
    VariantLock,
    atomic_write_text,
    diff_locks,
    read_lock_text,
    read_prior_pins,
    write_lockfile,
)
from kernel_deps.settings import LOCK_NAME
from kernel_deps.resolver import Resolution, reject_unknown_upgrades, resolve, version_name
from kernel_deps.spec import KernelRequirement, read_pyproject_text, read_requirements


@dataclass(frozen=True, slots=True)
class LockOutcome:
    """What a lock run found: the new lock, the old one, and what changed."""

    path: Path
    lock: Lockfile
    previous: Lockfile | None
    changes: list[str]
    up_to_date: bool
    written: bool


def lock_path(project_dir: Path) -> Path:
    """Where a project's lock lives."""
    return Path(project_dir) / LOCK_NAME


def read_previous_lock(path: Path) -> tuple[Lockfile | None, dict[str, str], bytes | None]:
    """The prior lock (None when absent or in the kernels 0.17 format), its pins, its bytes."""
    text = read_lock_text(path, missing_ok=True)
    if text is None:
        return None, {}, None
    pins = read_prior_pins(text, source=str(path))  # strict for every format it accepts
    try:
        previous = Lockfile.from_json(text, source=str(path))
    except LockfileError:
        previous = None  # a kernels 0.17 lock: its pins are kept, its layout is replaced
    return previous, pins, text.encode("utf-8")


def lock_project(
    project_dir: Path,
    *,
    hub: HubClient | None = None,
    requirements: Sequence[KernelRequirement] | None = None,
    upgrade: bool = False,
    upgrade_packages: Iterable[str] = (),
    write: bool = True,
) -> LockOutcome:
    """Resolve the project's kernels and (unless ``write`` is False) write kernels.lock."""
    project_dir = Path(project_dir)
    if requirements is None:
        requirements = read_requirements(project_dir)
    path = lock_path(project_dir)
    previous, pins, raw = read_previous_lock(path)
    upgrade_packages = list(upgrade_packages)
    reject_unknown_upgrades(upgrade_packages, {r.repo_id for r in requirements} | set(pins))
    if upgrade:
        pins = {}
    for repo_id in upgrade_packages:
        pins.pop(repo_id, None)

    hub = hub or HubClient()
    with hub.operation(), KernelIndex(hub) as index:  # one time budget for the whole resolution
        resolution = resolve(requirements, index, pins=pins)
        lock = build_lockfile(resolution, requirements, index)

    new_bytes = lock.to_json().encode()
    up_to_date = raw == new_bytes
    changes = diff_locks(previous, lock)
    if not up_to_date and not changes:
        changes = [f"~ {LOCK_NAME}: layout differs from what kernels lock writes"]
    written = write and not up_to_date and write_lockfile(path, lock)
    return LockOutcome(path, lock, previous, changes, up_to_date, written)


def build_lockfile(resolution: Resolution, requirements: Sequence[KernelRequirement], index: KernelIndex) -> Lockfile:
    """Hash every variant of every pinned commit and assemble the lock entries."""
    direct = {req.repo_id: req for req in requirements}
    entries = []
    for repo_id, candidate in sorted(resolution.pins.items()):
        tree = index.tree(repo_id, candidate.commit)
        variants = {variant: VariantLock(hash=tree.variant_hash(variant)) for variant in tree.files}
        requirement = direct.get(repo_id)
        entries.append(
            LockedKernel(
                repo_id=repo_id,
                sha=candidate.commit,
                variants=variants,
                version=version_name(candidate, resolution.requirements.get(repo_id, ())),
                requirement=requirement.text if requirement else None,
                dependencies=resolution.dependencies.get(repo_id, ()),
            )
        )
    return Lockfile(kernels=tuple(entries))


def edit_and_relock(project_dir: Path, edit: Callable[[str], str], *, hub: HubClient | None = None) -> LockOutcome:
    """Apply ``edit`` to pyproject.toml and relock; on any failure restore pyproject.toml.

    kernels.lock is only replaced by the final atomic write of a successful lock, so a
    failed relock leaves both files as they were.
    """
    pyproject = Path(project_dir) / "pyproject.toml"
    original = read_pyproject_text(project_dir)
    updated = edit(original)
    if updated == original:
        return lock_project(project_dir, hub=hub)
    _write_pyproject(pyproject, updated)
    try:
        return lock_project(project_dir, hub=hub)
    except BaseException:
        _write_pyproject(pyproject, original)
        raise


def _write_pyproject(path: Path, text: str) -> None:
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise FileWriteError(f"{path}: cannot write ({exc.strerror or exc}); check permissions and free space") from None

"""`kernels lock` as a library function: pyproject + prior lock + Hub -> kernels.lock, and what changed."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from kernel_deps import atomicfile
from kernel_deps.lockfile import (
    LockedKernel,
    Lockfile,
    VariantLock,
    lock_path,
    write_lockfile,
)
from kernel_deps.lockread import read_lock
from kernel_deps.projectedit import editing
from kernel_deps.pyproject import project_from_text, read_project, read_pyproject_text, read_targets
from kernel_deps.resolver import Pin, Resolution, reject_unknown_upgrades, resolve, version_name
from kernel_deps.errors import UsageError
from kernel_deps.settings import BUILD_DIR, EDIT_JOURNAL_NAME, KERNEL_STATUS_NAME, LOCK_NAME, PYPROJECT_NAME, is_offline
from kernel_deps.spec import KernelRequirement
from kernel_deps.sync import Problem, check_sync, check_targets
from kernel_deps.targets import Target

if TYPE_CHECKING:  # imported when locking: verify and outdated read locks without the Hub client
    from kernel_deps.hub import HubClient
    from kernel_deps.index import KernelIndex


@dataclass(frozen=True, slots=True)
class LockOutcome:
    """What a lock run found: the new lock, the old one, and what changed."""

    path: Path
    lock: Lockfile
    previous: Lockfile | None
    changes: list[str]
    up_to_date: bool
    written: bool
    # Why a kernel was held back for a deployment target, build folders skipped, redirects followed.
    notes: list[str] = field(default_factory=list)
    # Declared targets the prior lock does not serve (the targets changed since it was made).
    uncovered: list[Problem] = field(default_factory=list)
    targets: tuple[Target, ...] = ()
    # The other tool whose lock this run replaced with ours, keeping its pins (None: ours or none).
    converted_from: str | None = None
    # Why the prior lock is out of date, as ``lock --check`` and ``verify`` judge it without the Hub
    # (sync.check_sync): a requirement it does not meet, a dependency pin its parent does not accept.
    problems: list[Problem] = field(default_factory=list)


def lock_project(
    project_dir: Path,
    *,
    hub: HubClient | None = None,
    requirements: Sequence[KernelRequirement] | None = None,
    targets: Sequence[Target] | None = None,
    upgrade: bool = False,
    upgrade_packages: Iterable[str] = (),
    write: bool = True,
    notice: Callable[[str], None] | None = None,
    explain_offline: bool = False,
) -> LockOutcome:
    """Resolve the project's kernels and (unless ``write`` is False) write kernels.lock.

    ``requirements`` and ``targets`` default to the project's pyproject.toml; with targets
    declared, every locked kernel has a build for each of them, or nothing is written.
    Writing holds the project's edit lock from before the files are read until the lock
    is written (:func:`kernel_deps.projectedit.editing`, which tells ``notice`` when it
    waits for another command); without ``write``, a pending edit journal is a
    PendingEditError, never applied.
    With ``explain_offline`` (``lock --check`` and ``--dry-run``, which write nothing), a
    prior lock that breaks a rule it can be judged by alone is, while HF_HUB_OFFLINE is
    set, out of date with its ``problems`` and no changes, instead of an OfflineError.
    """
    if not write:
        return _lock_project(project_dir, hub=hub, requirements=requirements, targets=targets, upgrade=upgrade,
                             upgrade_packages=upgrade_packages, write=False, explain_offline=explain_offline)  # fmt: skip
    from kernel_deps.hub import HubClient

    hub = hub or HubClient()
    with hub.operation(), editing(Path(project_dir), hub=hub, notice=notice):
        return _lock_project(project_dir, hub=hub, requirements=requirements, targets=targets, upgrade=upgrade,
                             upgrade_packages=upgrade_packages, write=True, explain_offline=False)  # fmt: skip


def _lock_project(
    project_dir: Path,
    *,
    hub: HubClient | None,
    requirements: Sequence[KernelRequirement] | None,
    targets: Sequence[Target] | None,
    upgrade: bool,
    upgrade_packages: Iterable[str],
    write: bool,
    explain_offline: bool,
) -> LockOutcome:
    """:func:`lock_project`, with the edit lock held when ``write``."""
    project_dir = Path(project_dir)
    if requirements is None:
        requirements, read = read_project(project_dir)
        targets = read if targets is None else targets
    elif targets is None:
        targets = read_targets(project_dir)
    targets = tuple(targets)
    path = lock_path(project_dir)
    prior = read_lock(path, purpose="lock")  # any tool's lock: its commits are kept, its layout replaced
    previous, raw, foreign = (prior.lock, prior.raw, prior.written_by) if prior else (None, None, None)
    pins = {repo_id: Pin(pin.commit, pin.version) for repo_id, pin in prior.pins.items()} if prior else {}
    uncovered = check_targets(targets, previous) if previous is not None else []
    upgrade_packages = list(upgrade_packages)
    reject_unknown_upgrades(upgrade_packages, {r.repo_id for r in requirements} | set(pins))
    if upgrade:
        pins = {}
    for repo_id in upgrade_packages:
        pins.pop(repo_id, None)

    if not write and not upgrade and not upgrade_packages and not uncovered and _holds(previous, raw, requirements):
        # Every requirement is met by its pin and every target served by it, so resolving
        # would keep every pin, and a pinned commit's variants and dependencies cannot
        # change: no Hub needed.
        return LockOutcome(path, previous, previous, [], True, False, targets=targets)
    # What the prior lock breaks, judged by what it records (a foreign lock records no requirements).
    problems = check_sync(requirements, previous) if previous is not None and foreign is None else []
    if explain_offline and not write and (problems or uncovered) and is_offline():
        # Out of date whatever the Hub would answer; what would change is not known without it.
        return LockOutcome(path, previous, previous, [], False, False, uncovered=uncovered, targets=targets,
                           converted_from=foreign, problems=problems)  # fmt: skip
    from kernel_deps.hub import HubClient
    from kernel_deps.index import KernelIndex, describe_redirects

    hub = hub or HubClient()
    # One time budget for the whole resolution. Pins hold: a redirect added upstream since
    # the lock was made moves a pinned repo only once --upgrade releases its pin.
    with hub.operation(), KernelIndex(hub, held=pins) as index:
        followed = index.follow_redirects(requirements)
        redirected_from = _redirected_from(requirements, followed)
        resolution = resolve(followed, index, pins=pins, targets=targets)
        lock = build_lockfile(resolution, followed, index, pins=pins, redirected_from=redirected_from)
        notes = [
            f"{describe_redirects([source, *(hop.destination for hop in hops)])}; locked {hops[-1].destination}"
            for source, hops in sorted(index.redirects_followed.items())
        ]
        notes += resolution_notes(resolution, lock, index)

    new_bytes = lock.to_json().encode()
    up_to_date = raw == new_bytes
    changes = diff_locks(previous, lock)
    if not up_to_date and not changes:
        changes = [f"~ {LOCK_NAME}: layout differs from what kernels lock writes"]
    written = write and not up_to_date and write_lockfile(path, lock)
    return LockOutcome(
        path, lock, previous, changes, up_to_date, written,
        notes=notes, uncovered=uncovered, targets=targets, converted_from=foreign, problems=problems,
    )


# How many passed-over versions a held-back note names.
_HELD_BACK_SHOWN = 3


def resolution_notes(resolution: Resolution, lock: Lockfile, index: KernelIndex) -> list[str]:
    """One line per kernel held back below the newest version in range for a deployment
    target (``org/x v1.1.0 (v1.2.0 has no build for T)``), and per build folder skipped."""
    notes: list[str] = []
    for entry in lock.kernels:
        passed = resolution.held_back.get(entry.repo_id, ())
        if passed:
            reasons = [f"{c.ref_name} has no build for {', '.join(missed)}" for c, missed in passed[:_HELD_BACK_SHOWN]]
            if len(passed) > _HELD_BACK_SHOWN:
                reasons.append(f"{len(passed) - _HELD_BACK_SHOWN} more newer versions neither")
            notes.append(f"{entry.repo_id} {entry.version or entry.sha[:12]} ({'; '.join(reasons)})")
        skipped = index.tree(entry.repo_id, entry.sha).skipped
        if skipped:
            names = ", ".join(f"{BUILD_DIR}/{name}" for name in skipped)
            why = "not a build variant name kernel-deps knows; not locked"
            notes.append(f"{entry.repo_id} {_describe(entry)}: skipped {names} ({why})")
    return notes


def _redirected_from(requirements: Sequence[KernelRequirement], followed: Sequence[KernelRequirement]) -> dict[str, tuple[str, ...]]:
    """Destination -> the repo ids pyproject.toml names that redirect to it; UsageError when
    pyproject.toml also names the destination itself (two requirements for one entry)."""
    named = {req.repo_id for req in requirements}
    found: dict[str, list[str]] = {}
    for before, after in zip(requirements, followed):
        if before.repo_id == after.repo_id:
            continue
        if after.repo_id in named or after.repo_id in found:
            other = after.repo_id if after.repo_id in named else found[after.repo_id][0]
            raise UsageError(
                f"{PYPROJECT_NAME}: {before.repo_id} redirects to {after.repo_id} ({KERNEL_STATUS_NAME}), "
                f"which [tool.kernels.dependencies] also asks for as {other}; keep one entry, for {after.repo_id}"
            )
        found[after.repo_id] = [before.repo_id]
    return {destination: tuple(sources) for destination, sources in found.items()}


def _holds(previous: Lockfile | None, raw: bytes | None, requirements: Sequence[KernelRequirement]) -> bool:
    """Whether the prior lock is exactly what resolving with its pins would write."""
    return previous is not None and raw == previous.to_json().encode() and not check_sync(requirements, previous)


def build_lockfile(
    resolution: Resolution,
    requirements: Sequence[KernelRequirement],
    index: KernelIndex,
    *,
    pins: Mapping[str, Pin] | None = None,
    redirected_from: Mapping[str, tuple[str, ...]] | None = None,
) -> Lockfile:
    """Hash every variant of every resolved commit and assemble the lock entries; a kept
    pin keeps the tag or branch name it was locked under; each entry records what its
    kernel-depends require of each dependency (the union over its variants, as resolved);
    ``redirected_from`` names, per destination, the repos pyproject.toml asks for that
    redirect to it."""
    direct = {req.repo_id: req for req in requirements}
    pins = pins or {}
    entries = []
    for repo_id, candidate in sorted(resolution.pins.items()):
        tree = index.tree(repo_id, candidate.commit)
        variants = {variant: VariantLock(hash=tree.variant_hash(variant)) for variant in tree.files}
        requirement = direct.get(repo_id)
        pin = pins.get(repo_id)
        recorded = pin.version if pin is not None and pin.commit == candidate.commit else None
        dependencies = resolution.dependencies.get(repo_id, ())
        asks: dict[str, set[str]] = {dep: set() for dep in dependencies}
        for dep in index.dependencies(repo_id, candidate.commit):  # read while resolving: no request
            if dep.repo_id in asks:
                asks[dep.repo_id].add(dep.text)
        entries.append(
            LockedKernel(
                repo_id=repo_id,
                sha=candidate.commit,
                variants=variants,
                version=version_name(candidate, resolution.requirements.get(repo_id, ()), recorded),
                requirement=requirement.text if requirement else None,
                dependencies=dependencies,
                kernel_depends={dep: tuple(texts) for dep, texts in asks.items()},
                redirected_from=(redirected_from or {}).get(repo_id, ()),
            )
        )
    return Lockfile(kernels=tuple(entries))


def diff_locks(old: Lockfile | None, new: Lockfile) -> list[str]:
    """Human-readable lines for what changed from ``old`` to ``new``; empty when equal."""
    before = {k.repo_id: k for k in old.kernels} if old is not None else {}
    after = {k.repo_id: k for k in new.kernels}
    lines: list[str] = []
    for repo_id in sorted(before.keys() | after.keys()):
        a, b = before.get(repo_id), after.get(repo_id)
        if a is None or b is None:
            lines.append(f"+ {repo_id} {_describe(b)}" if a is None else f"- {repo_id} {_describe(a)}")
            continue
        if (a.sha, a.version) != (b.sha, b.version):
            lines.append(f"~ {repo_id} {_describe(a)} -> {_describe(b)}")
        for name in sorted(a.variants.keys() | b.variants.keys()):
            if name not in a.variants or name not in b.variants:
                lines.append(f"~ {repo_id}: variant {name} {'added' if name in b.variants else 'removed'}")
            elif a.sha == b.sha and a.variants[name] != b.variants[name]:
                # A new commit is expected to change hashes; the same commit is not.
                lines.append(f"~ {repo_id}: variant {name} hash changed")
        if a.requirement != b.requirement:
            lines.append(f"~ {repo_id}: requirement {_spec(a.requirement)} -> {_spec(b.requirement)}")
        lines += [f"~ {repo_id}: now depends on {d}" for d in b.dependencies if d not in a.dependencies]
        lines += _requirement_changes(repo_id, a, b)
        lines += [f"~ {repo_id}: no longer depends on {d}" for d in a.dependencies if d not in b.dependencies]
    return lines


def _requirement_changes(repo_id: str, a: LockedKernel, b: LockedKernel) -> list[str]:
    """Lines for what ``b`` records that a kept dependency of ``a`` must meet, where it differs."""
    lines = []
    for dep in (d for d in b.dependencies if d in a.dependencies and b.kernel_depends is not None):
        after = " and ".join(map(repr, b.kernel_depends[dep]))
        if a.kernel_depends is None:
            lines.append(f"~ {repo_id}: records that it requires {dep} {after} (its kernel-depends)")
        elif a.kernel_depends[dep] != b.kernel_depends[dep]:
            lines.append(f"~ {repo_id}: requires {dep} {' and '.join(map(repr, a.kernel_depends[dep]))} -> {after}")
    return lines


def _describe(kernel: LockedKernel | None) -> str:
    if kernel is None:
        return ""
    return f"{kernel.version} ({kernel.sha[:12]})" if kernel.version else f"({kernel.sha[:12]})"


def _spec(requirement: str | None) -> str:
    return repr(requirement) if requirement is not None else "(none, transitive)"


def edit_and_relock(
    project_dir: Path,
    edit: Callable[[str], str],
    *,
    hub: HubClient | None = None,
    notice: Callable[[str], None] | None = None,
) -> LockOutcome:
    """Apply ``edit`` to pyproject.toml and relock, as one change.

    The project's edit lock is held throughout, so ``edit`` sees what the last command
    wrote and no other command writes before this one is done (``notice`` is told when it
    waits). The new requirements are resolved before anything is written; then
    pyproject.toml and kernels.lock are replaced together
    (:func:`atomicfile.write_together`), so a failure or a kill at any moment leaves both
    old or both new, never an edited pyproject.toml beside an old lock. Links are written
    through, at their target.
    """
    from kernel_deps.hub import HubClient

    project_dir = Path(project_dir)
    pyproject = project_dir / PYPROJECT_NAME
    hub = hub or HubClient()
    with hub.operation(), editing(project_dir, hub=hub, notice=notice):
        original = read_pyproject_text(project_dir)
        updated = edit(original)
        if updated == original:
            return _lock_project(project_dir, hub=hub, requirements=None, targets=None, upgrade=False,
                                 upgrade_packages=(), write=True, explain_offline=False)  # fmt: skip
        requirements, targets = project_from_text(updated, source=str(pyproject))
        outcome = _lock_project(project_dir, hub=hub, requirements=requirements, targets=targets, upgrade=False,
                                upgrade_packages=(), write=False, explain_offline=False)  # fmt: skip
        files = {pyproject: updated}
        if not outcome.up_to_date:
            files[outcome.path] = outcome.lock.to_json()
        atomicfile.write_together(files, journal=project_dir / EDIT_JOURNAL_NAME)
    return replace(outcome, written=not outcome.up_to_date)

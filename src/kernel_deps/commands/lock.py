"""`kernels lock` as a library function: pyproject + prior lock + Hub -> kernels.lock, and what changed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from kernel_deps.core.errors import UsageError
from kernel_deps.core.settings import KERNEL_STATUS_NAME, PYPROJECT_NAME, is_offline
from kernel_deps.trust.signers import SignaturePolicy
from kernel_deps.core.spec import KernelRequirement
from kernel_deps.core.targets import Target
from kernel_deps.lock.freshness import Problem, check_signatures, check_sync, check_targets, check_trust
from kernel_deps.lock.model import (
    LockedKernel,
    Lockfile,
    VariantLock,
    lock_path,
    write_lockfile,
)
from kernel_deps.lock.read import read_lock
from kernel_deps.trust.signatures import candidate_refusal, sign_lock
from kernel_deps.trust.publishers import judge_publishers, refusal
from kernel_deps.project.edit import editing
from kernel_deps.project.pyproject import read_project, read_signature_policy, read_targets, read_trust
from kernel_deps.resolve.resolver import (
    PROJECT,
    KernelProvider,
    Pin,
    Requester,
    Resolution,
    reject_unknown_upgrades,
    resolve,
    version_name,
)

if TYPE_CHECKING:  # imported when locking: verify and outdated read locks without the Hub client
    from kernel_deps.hub.client import HubClient
    from kernel_deps.hub.index import KernelIndex


SCHEMA_VERSION = 3  # of docs/schemas/lock.schema.json; see docs/ci.md


@dataclass(frozen=True, slots=True)
class LockedPin:
    """Where a lock entry points: the tag or branch it was locked under (None: a commit pin) and the commit."""

    version: str | None
    commit: str

    @classmethod
    def of(cls, kernel: LockedKernel) -> LockedPin:
        return cls(kernel.version, kernel.sha)

    def to_json(self) -> dict:
        return {"version": self.version, "commit": self.commit}


# What a lock change says happened to one entry (``repo_id``), ``before`` and ``after`` being
# the entry's pin in the old and new lock (None where the entry is not in that lock).
CHANGE_ACTIONS = (
    "added", "removed", "updated", "variant-added", "variant-removed", "variant-hash-changed",
    "requirement-changed", "dependency-added", "dependency-removed", "requires-recorded", "requires-changed",
    "layout-changed",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class LockChange:
    """One difference between the old and the new lock, as data (the CLI renders the ``+ - ~`` line)."""

    action: str  # one of CHANGE_ACTIONS
    repo_id: str | None  # None: the lock as a whole (layout-changed)
    before: LockedPin | None  # "from" in JSON
    after: LockedPin | None  # "to" in JSON
    variant: str | None = None  # variant-*
    dependency: str | None = None  # dependency-*, requires-*
    # requirement-changed: what pyproject.toml asks, before and after (None: transitive only).
    requirement: tuple[str | None, str | None] | None = None
    # requires-*: what this entry records that it requires of ``dependency``, before (None:
    # not recorded, an older lock) and after.
    requires: tuple[tuple[str, ...] | None, tuple[str, ...]] | None = None

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


@dataclass(frozen=True, slots=True)
class PassedOver:
    """A newer version in range that a kernel was held back from: it misses ``missing`` targets."""

    version: str  # its tag or branch (or short commit)
    commit: str
    missing: tuple[str, ...]
    signature: str | None = None  # held-back-unsigned: why its builds are refused

    def to_json(self) -> dict:
        if self.signature is not None:
            return {"version": self.version, "commit": self.commit, "signature": self.signature}
        return {"version": self.version, "commit": self.commit, "missing_targets": list(self.missing)}


NOTE_KINDS = ("redirect-followed", "held-back", "held-back-unsigned", "skipped-build-folders")


@dataclass(frozen=True, slots=True)
class LockNote:
    """Something a lock run did that the user should know, as data (the CLI renders the ``note:`` line)."""

    kind: str  # one of NOTE_KINDS
    repo_id: str  # redirect-followed: the repo asked for; else the locked kernel
    locked: LockedPin | None = None  # held-back, held-back-unsigned, skipped-build-folders
    redirects: tuple[str, ...] = ()  # redirect-followed: from the repo asked for to the one locked
    passed_over: tuple[PassedOver, ...] = ()  # held-back: newest first, every one
    folders: tuple[str, ...] = ()  # skipped-build-folders: the names under build/

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


@dataclass(frozen=True, slots=True)
class LockReport:
    """What a lock run found: the new lock, the old one, and what changed."""

    path: Path
    lock: Lockfile
    previous: Lockfile | None
    changes: list[LockChange]
    up_to_date: bool
    written: bool
    # Why a kernel was held back for a deployment target, build folders skipped, redirects followed.
    notes: list[LockNote] = field(default_factory=list)
    # Declared targets the prior lock does not serve (the targets changed since it was made).
    uncovered: list[Problem] = field(default_factory=list)
    targets: tuple[Target, ...] = ()
    # The other tool whose lock this run replaced with ours, keeping its pins (None: ours or none).
    converted_from: str | None = None
    # Why the prior lock is out of date, as ``lock --check`` and ``verify`` judge it without the Hub
    # (sync.check_sync): a requirement it does not meet, a dependency pin its parent does not accept.
    problems: list[Problem] = field(default_factory=list)
    # Whether there was a kernels.lock before the run (in any format).
    existed: bool = True

    def to_json(self) -> dict:
        """The report as docs/schemas/lock.schema.json describes it."""
        return {
            "schema_version": SCHEMA_VERSION,
            "lockfile": str(self.path),
            "up_to_date": self.up_to_date,
            "written": self.written,
            "changes": [change.to_json() for change in self.changes],
            "notes": [note.to_json() for note in self.notes],
            "targets": [t.name for t in self.targets],
            "uncovered_targets": [{"repo_id": p.repo_id, "target": p.expected} for p in self.uncovered],
            "converted_from": self.converted_from,
            "problems": [{"kind": p.kind, "repo_id": p.repo_id, "message": p.message} for p in self.problems],
            "kernels": [
                {"repo_id": k.repo_id, "version": k.version, "sha": k.sha, "variants": len(k.variants)}
                for k in self.lock.kernels
            ],
        }


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
    resolve_stale: bool = True,
) -> LockReport:
    """Resolve the project's kernels and (unless ``write`` is False) write kernels.lock.

    ``requirements`` and ``targets`` default to the project's pyproject.toml; with targets
    declared, every locked kernel has a build for each of them, or nothing is written.
    Writing holds the project's edit lock from before the files are read until the lock
    is written (:func:`kernel_deps.project.edit.editing`, which tells ``notice`` when it
    waits for another command); without ``write``, a pending edit journal is a
    PendingEditError, never applied.
    With ``explain_offline`` (``lock --check`` and ``--dry-run``, which write nothing), a
    prior lock that breaks a rule it can be judged by alone is, while HF_HUB_OFFLINE is
    set, out of date with its ``problems`` and no changes, instead of an OfflineError.
    ``resolve_stale=False`` (only without ``write``) judges the prior lock by those rules alone and
    never asks the Hub: a lock that does not hold is out of date, with no changes or new lock
    worked out (``kernels sync`` relocks it then, resolving once).
    """
    if not write:
        return lock_while_editing(project_dir, hub=hub, requirements=requirements, targets=targets, upgrade=upgrade,
                                  upgrade_packages=upgrade_packages, write=False, explain_offline=explain_offline,
                                  resolve_stale=resolve_stale)  # fmt: skip
    if not resolve_stale:
        raise ValueError("lock_project(write=True) resolves: resolve_stale=False is only for a judgement that writes nothing")
    from kernel_deps.hub.client import HubClient

    hub = hub or HubClient()
    with hub.operation(), editing(Path(project_dir), hub=hub, notice=notice):
        return lock_while_editing(project_dir, hub=hub, requirements=requirements, targets=targets, upgrade=upgrade,
                                  upgrade_packages=upgrade_packages, write=True, explain_offline=False)  # fmt: skip


def lock_while_editing(
    project_dir: Path,
    *,
    hub: HubClient | None,
    requirements: Sequence[KernelRequirement] | None,
    targets: Sequence[Target] | None,
    upgrade: bool,
    upgrade_packages: Iterable[str],
    write: bool,
    explain_offline: bool,
    resolve_stale: bool = True,
) -> LockReport:
    """:func:`lock_project`'s work; the caller holds the project's edit lock when ``write``
    (:func:`kernel_deps.commands.edit.edit_and_relock` holds it around an edit and this)."""
    project_dir = Path(project_dir)
    if requirements is None:
        requirements, read = read_project(project_dir)
        targets = read if targets is None else targets
    elif targets is None:
        targets = read_targets(project_dir)
    targets = tuple(targets)
    publishers = read_trust(project_dir)
    policy = read_signature_policy(project_dir)
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

    # Allowances the prior lock relied on that pyproject.toml no longer lists (judged offline).
    withdrawn = check_trust(publishers, previous) if previous is not None and foreign is None else []
    # Signers the prior lock records that the signature policy no longer allows (judged offline).
    withdrawn += check_signatures(policy, previous) if previous is not None and foreign is None else []
    if (not write and not upgrade and not upgrade_packages and not uncovered and not withdrawn
            and _holds(previous, raw, requirements)):  # fmt: skip
        # Every requirement is met by its pin and every target served by it, so resolving
        # would keep every pin, and a pinned commit's variants and dependencies cannot
        # change: no Hub needed.
        return LockReport(path, previous, previous, [], True, False, targets=targets)
    # What the prior lock breaks, judged by what it records (a foreign lock records no requirements).
    problems = check_sync(requirements, previous) if previous is not None and foreign is None else []
    problems += withdrawn
    if not resolve_stale:  # judged without the Hub: out of date, what would change not worked out
        return LockReport(path, previous or Lockfile(kernels=()), previous, [], False, False, uncovered=uncovered,
                          targets=targets, converted_from=foreign, problems=problems, existed=raw is not None)  # fmt: skip
    if explain_offline and not write and (problems or uncovered) and is_offline():
        # Out of date whatever the Hub would answer; what would change is not known without it.
        return LockReport(path, previous, previous, [], False, False, uncovered=uncovered, targets=targets,
                          converted_from=foreign, problems=problems)  # fmt: skip
    from kernel_deps.hub.client import HubClient

    def judge(lock: Lockfile, index: KernelIndex) -> Lockfile:
        judged, untrusted = judge_publishers(lock, publishers, lambda org: hub_trusts(index, org))
        if untrusted:
            raise refusal(untrusted)
        return judged

    lock, notes = resolve_in_memory(hub or HubClient(), requirements, publishers=publishers, judge=judge,
                                    policy=policy, pins=pins, targets=targets, follow_redirects=True)  # fmt: skip
    new_bytes = lock.to_text().encode()
    up_to_date = raw == new_bytes
    changes = diff_locks(previous, lock)
    if not up_to_date and not changes:
        changes = [LockChange("layout-changed", None, None, None)]
    written = write and not up_to_date and write_lockfile(path, lock)
    return LockReport(
        path, lock, previous, changes, up_to_date, written,
        notes=notes, uncovered=uncovered, targets=targets, converted_from=foreign, problems=problems,
        existed=raw is not None,
    )


def resolve_in_memory(
    hub: HubClient,
    requirements: Sequence[KernelRequirement],
    *,
    publishers: Sequence[str] | None,
    judge: Callable[[Lockfile, KernelIndex], Lockfile],
    policy: SignaturePolicy | None,
    pins: Mapping[str, Pin] | None = None,
    targets: Sequence[Target] = (),
    requester: Requester = PROJECT,
    follow_redirects: bool = False,
) -> tuple[Lockfile, list[LockNote]]:
    """A lock of ``requirements`` and their kernel dependencies, held in memory: the one way
    `kernels lock`, ``get_kernel`` and `kernels to-wheel ORG/NAME@REVISION` resolve.

    Pins are kept and targets served (:func:`resolve`); every variant is hashed; ``judge``
    (the lock, the index -> the lock with each entry's trust recorded, or an error raised
    for a kernel it refuses) decides publishers, the Hub being asked in the background
    about each organization ``publishers`` does not allow (None: about none); then, unless
    ``policy`` is None, each build's digest is checked and its signature verified under
    ``policy`` (:func:`sign_lock`). With ``follow_redirects``, a requirement whose repo
    redirects (``kernel-status.toml``) is locked at its destination. One time budget for
    all of it. Also returns the notes `kernels lock` prints (redirects followed, kernels
    held back, folders skipped)."""
    from kernel_deps.hub.index import KernelIndex

    pins = dict(pins or {})
    prepare = _preparer(policy) if policy is not None else None
    # Pins hold: a redirect added upstream since the lock was made moves a pinned repo only
    # once --upgrade releases its pin.
    with hub.operation(), KernelIndex(hub, held=pins, publishers=publishers, on_signed=prepare) as index:
        signed = None
        if targets and policy is not None:
            signed = lambda repo_id, commit: candidate_refusal(index, policy, repo_id, commit)  # noqa: E731
        provider = KernelProvider(index, pins, targets, signed)
        followed = list(requirements)
        if follow_redirects:
            # Each kernel's likely pick is fetched while redirects are looked for, so its
            # files follow its own listing rather than wait for every kernel's.
            index.prefetch(requirements, provider.likely_pick, unless_redirected=True)
            followed = index.follow_redirects(requirements)
        redirected_from = _redirected_from(requirements, followed)
        resolution = resolve(followed, index, provider=provider, requester=requester)
        lock = build_lockfile(resolution, followed, index, pins=pins, redirected_from=redirected_from)
        lock = judge(lock, index)
        if policy is not None:
            lock = sign_lock(lock, policy, index)
        notes = [
            LockNote("redirect-followed", source, redirects=(source, *(hop.destination for hop in hops)))
            for source, hops in sorted(index.redirects_followed.items())
        ]
        notes += resolution_notes(resolution, lock, index)
    return lock, notes


def _preparer(policy: SignaturePolicy) -> Callable[[], None]:
    """What the index runs once it meets a signed variant: sigstore imported and the verifier built."""

    def prepare() -> None:
        from kernel_deps.trust.bundles import prepare as prepare_verifier

        prepare_verifier(policy.trusted_root)

    return prepare


def hub_trusts(index: KernelIndex, org: str) -> tuple[bool, str]:
    """Whether the Hub trusts ``org`` as a kernel publisher, and what it said (for judge_publishers)."""
    answer = index.publisher(org)
    return answer.trusted, answer.reason


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
    return previous is not None and raw == previous.to_text().encode() and not check_sync(requirements, previous)


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



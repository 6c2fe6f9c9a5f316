"""`kernels outdated` as a library function: how far each pin is from what upstream offers.

For every locked kernel: the locked version and commit; what ``kernels lock --upgrade``
would pick within the requirements (at the repo its redirects lead to, when the locked repo,
or the one pyproject.toml names for it, redirects now); the newest release outside them;
and whether the tag or branch the lock recorded has moved since, with the variants whose
hashes differ at its new commit. The upgrade is judged as ``kernels lock`` judges it: a
newer version in range that a deployment target lacks a build for, or whose builds the
project's signature policy (``[tool.kernels.trust]``) refuses, is held back, with why, and
not offered as the upgrade. Nothing is written and nothing fails on drift: the report says
what is there.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kernel_deps.core.records import Record
from kernel_deps.core.spec import KernelRequirement
from kernel_deps.core.versions import KernelVersion, satisfies, versions_from_refs
from kernel_deps.hub.client import HubClient
from kernel_deps.hub.index import KernelIndex
from kernel_deps.lock.model import LockedKernel, lock_path
from kernel_deps.lock.read import read_lock
from kernel_deps.project.record import read_project_record
from kernel_deps.resolve.candidates import Candidate, version_name
from kernel_deps.resolve.resolver import KernelProvider, Resolution, resolve

if TYPE_CHECKING:
    from kernel_deps.trust.signers import SignaturePolicy

SCHEMA_VERSION = 2  # of docs/schemas/outdated.schema.json; see docs/ci.md


class HeldBack(Record):
    """A newer version in range that ``kernels lock --upgrade`` would not take, and why."""

    __slots__ = ("version", "commit", "reason")
    version: str  # its tag or branch (or short commit)
    commit: str
    reason: str  # the targets it has no build for, or why its builds' signatures are refused

    def __init__(self, version: str, commit: str, reason: str) -> None:
        self._init(version, commit, reason)

    def to_json(self) -> dict:
        return {"version": self.version, "commit": self.commit, "reason": self.reason}


class KernelDrift(Record):
    """One locked kernel beside what upstream offers now."""

    __slots__ = (
        "repo_id", "requirement", "locked_version", "locked_commit", "upgrade_version", "upgrade_commit", "redirects",
        "latest_version", "latest_commit", "ref_moved_to", "changed_variants", "held_back",
    )  # fmt: skip
    repo_id: str
    requirement: str | None  # None: required only by other kernels
    locked_version: str | None
    locked_commit: str
    upgrade_version: str | None  # what --upgrade would lock (within the requirements)
    upgrade_commit: str | None  # ... in the last repo of ``redirects`` when there are any
    # The way redirects lead now, from the repo asked for (this one, or the one in its
    # redirected_from) to another than this: (A, B) for A -> B. Empty when they lead here.
    redirects: tuple[str, ...]
    latest_version: str | None  # the newest release the requirements exclude, if newer
    latest_commit: str | None
    ref_moved_to: str | None  # where the recorded tag or branch points now, if elsewhere
    changed_variants: tuple[str, ...]  # variants whose hash differs there (added, removed, changed)
    held_back: tuple[HeldBack, ...]  # newer versions in range that lock would refuse, newest first

    def __init__(
        self, repo_id: str, requirement: str | None, locked_version: str | None, locked_commit: str,
        upgrade_version: str | None, upgrade_commit: str | None, redirects: tuple[str, ...],
        latest_version: str | None, latest_commit: str | None, ref_moved_to: str | None,
        changed_variants: tuple[str, ...], held_back: tuple[HeldBack, ...] = (),
    ) -> None:  # fmt: skip
        self._init(repo_id, requirement, locked_version, locked_commit, upgrade_version, upgrade_commit, redirects,
                   latest_version, latest_commit, ref_moved_to, changed_variants, tuple(held_back))  # fmt: skip

    @property
    def upgradable(self) -> bool:
        """Whether ``kernels lock --upgrade`` would move this pin (to another commit or repo)."""
        return self.upgrade_commit is not None and (self.upgrade_commit != self.locked_commit or bool(self.redirects))

    @property
    def upgrade_repo_id(self) -> str:
        """The repo ``kernels lock --upgrade`` would lock in this one's place."""
        return self.redirects[-1] if self.redirects else self.repo_id

    @property
    def drifted(self) -> bool:
        """Whether anything upstream differs from the pin."""
        moved = self.latest_version is not None or self.ref_moved_to is not None or bool(self.redirects)
        return self.upgradable or moved or bool(self.held_back)


class OutdatedReport(Record):
    """Every locked kernel's drift, sorted by repo id."""

    __slots__ = ("lockfile", "kernels")
    lockfile: Path
    kernels: tuple[KernelDrift, ...]

    def __init__(self, lockfile: Path, kernels: tuple[KernelDrift, ...]) -> None:
        self._init(lockfile, kernels)

    @property
    def drifted(self) -> bool:
        return any(kernel.drifted for kernel in self.kernels)

    def to_json(self) -> dict:
        """The report as docs/schemas/outdated.schema.json describes it."""
        kernels = [{**k.to_dict(), "held_back": [h.to_json() for h in k.held_back], "upgradable": k.upgradable,
                    "drifted": k.drifted} for k in self.kernels]  # fmt: skip
        return {"schema_version": SCHEMA_VERSION, "ok": not self.drifted, "lockfile": str(self.lockfile),
                "drifted": self.drifted, "kernels": kernels}


def outdated_project(project_dir: Path, *, hub: HubClient | None = None) -> OutdatedReport:
    """Compare ``<project_dir>/kernels.lock`` with what the Hub offers now (reads only)."""
    from kernel_deps.trust.signatures import candidate_refusal

    project = read_project_record(Path(project_dir))
    assert project is not None
    requirements, targets, policy = project.requirements, project.targets, project.policy
    path = lock_path(project_dir)
    lock = read_lock(path, purpose="use").lock  # ours, or kernels <= 0.16's (it records no versions)
    hub = hub or HubClient()
    with hub.operation(), KernelIndex(hub, on_signed=_preparer(policy)) as index:  # one time budget for all
        refused = lambda repo_id, commit: candidate_refusal(index, policy, repo_id, commit)  # noqa: E731
        # As `kernels lock --upgrade` would: with targets, a version refused is passed over for an older one.
        provider = KernelProvider(index, {}, targets, refused)
        upgraded = resolve(index.follow_redirects(requirements), index, provider=provider)
        found = []
        for entry in lock.kernels:
            way = _redirects(entry, index)
            there = way[-1] if way else entry.repo_id
            pick = upgraded.pins.get(there)
            held = _held_back(upgraded, provider, there)
            if pick is not None and not targets and pick.commit != entry.sha:
                # Without targets `kernels lock --upgrade` takes the newest and refuses it: not an upgrade.
                why = refused(there, pick.commit)
                if why is not None:
                    held, pick = (HeldBack(pick.ref_name, pick.commit, why),), None
            found.append(_drift(entry, way, upgraded.requirements.get(there, ()), pick, index, held))
    return OutdatedReport(path, tuple(found))


def _preparer(policy: SignaturePolicy):
    """What the index runs once it meets a signed build: the signature verifier built."""

    def prepare() -> None:
        from kernel_deps.trust.bundles import prepare as prepare_verifier

        prepare_verifier(policy.trusted_root)

    return prepare


def _held_back(resolution: Resolution, provider: KernelProvider, repo_id: str) -> tuple[HeldBack, ...]:
    """The newer versions in range the resolution passed over for ``repo_id``, newest first:
    those a declared target has no build for, and those whose signatures are refused."""
    held = [(c, "no build for " + ", ".join(missed)) for c, missed in resolution.held_back.get(repo_id, ())]
    held += list(resolution.held_back_unsigned.get(repo_id, ()))
    order = {c.commit: n for n, c in enumerate(provider.all_candidates(repo_id, ()))}  # newest first
    return tuple(HeldBack(c.ref_name, c.commit, why) for c, why in sorted(held, key=lambda h: order[h[0].commit]))


def _redirects(entry: LockedKernel, index: KernelIndex) -> tuple[str, ...]:
    """Where the redirects of the repos the entry answers for lead now, when not to the entry
    itself: the ones pyproject.toml names for it first, then its own (by the rule `kernels
    lock` follows, with no pin held)."""
    for repo_id in (*entry.redirected_from, entry.repo_id):
        hops = index.redirects_from(repo_id)
        if hops and hops[-1].destination != entry.repo_id:
            return (repo_id, *(hop.destination for hop in hops))
    return ()


def _drift(
    entry: LockedKernel,
    redirects: tuple[str, ...],
    asked: tuple[KernelRequirement, ...],
    pick: Candidate | None,
    index: KernelIndex,
    held_back: tuple[HeldBack, ...] = (),
) -> KernelDrift:
    refs = index.refs(entry.repo_id).refs
    there = redirects[-1] if redirects else entry.repo_id
    latest = _newest_outside(versions_from_refs(index.refs(there).refs), asked)
    moved = next((r.commit for r in refs if r.name == entry.version and r.commit != entry.sha), None)
    changed: tuple[str, ...] = ()
    if moved is not None:
        tree = index.tree(entry.repo_id, moved)
        there = {name: tree.variant_hash(name) for name in tree.files}
        here = {name: lock.hash for name, lock in entry.variants.items()}
        changed = tuple(sorted(name for name in here.keys() | there.keys() if here.get(name) != there.get(name)))
    return KernelDrift(
        repo_id=entry.repo_id,
        requirement=entry.requirement,
        locked_version=entry.version,
        locked_commit=entry.sha,
        upgrade_version=version_name(pick, asked) if pick is not None else None,
        upgrade_commit=pick.commit if pick is not None else None,
        redirects=redirects,
        latest_version=latest.ref.name if latest is not None else None,
        latest_commit=latest.ref.commit if latest is not None else None,
        ref_moved_to=moved,
        changed_variants=changed,
        held_back=held_back,
    )


def _newest_outside(found: list[KernelVersion], asked: tuple[KernelRequirement, ...]) -> KernelVersion | None:
    """The newest final release tag, when the requirements do not allow it."""
    tags = [v for v in found if not v.is_branch and not v.version.is_prerelease]
    if not tags:
        return None
    newest = max(tags, key=lambda v: v.version)
    allowed = all(satisfies(req, newest.ref.commit, (newest.ref,)) for req in asked)
    return None if allowed else newest

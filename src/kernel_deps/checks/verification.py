"""One verification of a project: pyproject, kernels.lock, the cache (and, online, the Hub) agree.

Offline by default, it makes no network request: (a) the lock parses, (b) it is in sync
with ``pyproject.toml`` (the static form of ``lock --check``), (c) every locked variant
present in the cache hashes, from its files' contents, to its locked value. ``online``
also asks the Hub whether each locked commit still exists with the locked content and
whether the tag or branch named in the lock still points at it. Every problem is
collected, none is printed: the CLI renders the report. ``kernels verify`` and
``kernels sync`` run it (:func:`verify_lock`) with the project read once.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from kernel_deps.cache import store as cache
from kernel_deps.checks.cache import (
    FILE_KINDS,
    WHEEL_KINDS,
    check_cache_tiers,
    check_signed_cache,
    check_targets_cached,
    check_this_machine,
    check_wheels,
)
from kernel_deps.core.errors import UsageError
from kernel_deps.core.records import Record, replaceable
from kernel_deps.core.settings import LOCAL_KERNELS_ENV, describe_overrides, is_offline, local_overrides, offline_env
from kernel_deps.core.system import SystemInfo, detect_system
from kernel_deps.core.targets import targets_from_options
from kernel_deps.lock.freshness import (
    AGREEMENT_KINDS, POLICY_KINDS, Problem, judge_lock, rules_of, unrecorded_requirements,
)  # fmt: skip
from kernel_deps.lock.model import Lockfile, lock_path
from kernel_deps.lock.read import newer_lock_error, read_lock

if TYPE_CHECKING:  # imported by --online only: an offline verify never loads the Hub client
    from kernel_deps.hub.client import HubClient
    from kernel_deps.lock.read import LockRead
    from kernel_deps.project.record import Project
    from kernel_deps.trust.signers import SignaturePolicy

__all__ = [
    "CACHE_KINDS", "FILE_KINDS", "HUB_KINDS", "LOCAL_KINDS", "NOTICE_KINDS", "SIGNED_KINDS", "SYNC_KINDS",
    "WHEEL_KINDS", "VerifyReport", "verify_inputs", "verify_lock",
]  # fmt: skip

SYNC_KINDS = AGREEMENT_KINDS
# The lock's recorded signers against the policy; a cached variant, its files the locked bytes,
# against its digest and its bundle verified again.
SIGNED_KINDS = frozenset({"signer-not-allowed", "signature-missing", "digest-mismatch", "signature-invalid"})
CACHE_KINDS = FILE_KINDS | {"unreadable", "unlocked-variant", "not-cached", "no-variant", "target-not-cached"}
HUB_KINDS = frozenset({"repo-missing", "commit-missing", "ref-missing", "ref-moved", "hub-hash-mismatch",
                       "variant-not-on-hub", "variant-not-locked", "hub-error"})  # fmt: skip
# Reported, but not a disagreement: the lock still holds, upstream has something newer.
NOTICE_KINDS = frozenset({"ref-advanced", "foreign-lock", "requirements-not-recorded"})
# LOCAL_KERNELS is set: a development override that must not ship.
LOCAL_KINDS = frozenset({"local-override"})


SCHEMA_VERSION = 4  # of docs/schemas/verify.schema.json; see docs/ci.md


@replaceable  # sync copies one with dataclasses.replace
class VerifyReport(Record):
    """What verify found: every problem, every notice, every cached variant it recomputed."""

    __slots__ = ("lockfile", "kernels", "problems", "checked", "online", "notices", "wheels", "signers", "tiers")
    lockfile: Path
    kernels: int
    problems: list[Problem]
    checked: list[cache.VariantCheck]
    online: bool
    notices: list[Problem]
    wheels: list[cache.VariantCheck]  # installed kernel wheels checked
    # (repo id, variant) -> who signed it, as the lock records it (and verified again from the cache).
    signers: dict[tuple[str, str], dict]
    # (repo id, variant) -> the cache tier it was checked in: ("shared", a KERNELS_CACHE_SHARED
    # folder) or ("writable", the writable cache's root).
    tiers: dict[tuple[str, str], tuple[str, Path]]

    def __init__(
        self, lockfile: Path, kernels: int, problems: list[Problem], checked: list[cache.VariantCheck], online: bool,
        notices: list[Problem] | None = None, wheels: list[cache.VariantCheck] | None = None,
        signers: dict[tuple[str, str], dict] | None = None, tiers: dict[tuple[str, str], tuple[str, Path]] | None = None,
    ) -> None:  # fmt: skip
        self._init(lockfile, kernels, problems, checked, online, [] if notices is None else notices,
                   [] if wheels is None else wheels, {} if signers is None else signers,
                   {} if tiers is None else tiers)  # fmt: skip

    @property
    def ok(self) -> bool:
        """True when nothing disagrees."""
        return not self.problems

    @property
    def verified(self) -> list[cache.VariantCheck]:
        """The cached variants whose contents match their locked hash."""
        return [check for check in self.checked if check.ok]

    def _tier(self, check: cache.VariantCheck) -> dict:
        tier, root = self.tiers.get((check.repo_id, check.variant)) or ("writable", cache.cache_root())
        return {"tier": tier, "tier_root": str(root)}

    def to_json(self) -> dict:
        """The report as docs/schemas/verify.schema.json describes it."""
        return {
            "schema_version": SCHEMA_VERSION,
            "ok": self.ok,
            "lockfile": str(self.lockfile),
            "online": self.online,
            "kernels": self.kernels,
            "problems": [problem.to_dict() for problem in self.problems],
            "notices": [notice.to_dict() for notice in self.notices],
            "verified": [
                {"repo_id": c.repo_id, "commit": c.commit, "variant": c.variant, "hash": c.actual_hash,
                 "path": str(c.path), "signer": self.signers.get((c.repo_id, c.variant)), **self._tier(c)}
                for c in self.verified
            ],
            "wheels": [
                {"repo_id": c.repo_id, "commit": c.commit, "variant": c.variant, "hash": c.actual_hash,
                 "path": str(c.path)}
                for c in self.wheels if c.ok
            ],  # fmt: skip
        }


def verify_inputs(*, online: bool) -> Mapping[str, Path]:
    """What a verification reads before the project: UsageError for ``online`` while offline,
    and ``LOCAL_KERNELS`` (a malformed one is bad input), its overrides returned."""
    if online and is_offline():
        raise UsageError(f"--online needs the Hub but {offline_env()} is set; unset {offline_env()} or drop --online")
    return local_overrides()


def _lock_of_pins(
    found: LockRead, hub: HubClient | None, policy: SignaturePolicy, publishers: Sequence[str]
) -> tuple[Lockfile, HubClient]:
    """The lock of a kernels 0.17 lock's pins (:func:`kernel_deps.resolve.pinned.lock_of_pins`),
    which needs the Hub: LockfileError saying so when offline."""
    from kernel_deps.core.errors import LockfileError
    from kernel_deps.hub.client import HubClient
    from kernel_deps.resolve.pinned import lock_of_pins

    if is_offline():
        raise LockfileError(
            f"{found.source}: written by {found.written_by}, which records commits but no variant hashes, so the "
            f"cache can be checked against it only with the Hub's listings, and {offline_env()} is set; "
            "run 'kernels lock' to convert it (its pins are kept)"
        )
    hub = hub or HubClient()
    return lock_of_pins(found, hub, policy, publishers, doing="refusing to verify"), hub


def verify_lock(
    project: Project,
    *,
    overrides: Mapping[str, Path],
    online: bool = False,
    require_cached: bool = False,
    hub: HubClient | None = None,
    cache_root: Path | None = None,
    system: SystemInfo | None = None,
    targets: Sequence[str] = (),
    all_targets: bool = False,
    shared: bool = True,
) -> VerifyReport:
    """Check ``project`` (its record), its lock and the cache (and, ``online``, the Hub).

    Every target the project declares must be served by the lock. With ``targets`` (exact
    build names) or ``all_targets``, the build serving each of them must also be in the
    cache, instead of this machine's (which ``require_cached`` adds); ``overrides`` are
    :func:`verify_inputs`' answer. Without ``shared``, no ``KERNELS_CACHE_SHARED`` folder
    stands in for ``cache_root`` (a folder ``--into`` built is checked as it is).
    """
    project.requirements  # noqa: B018  (a project without a dependencies table is refused before anything else)
    rules = rules_of(project)
    wanted = targets_from_options(targets, all_targets, rules.targets, project.path)
    path = lock_path(project.folder)
    found = read_lock(path, purpose="fetch")
    if found.unknown_keys:  # a pass vouches for all the lock records, and this version cannot read all of it
        raise newer_lock_error(str(path), found.unknown_keys)
    lock, written_by = found.lock, found.written_by
    notices: list[Problem] = []
    local_problems = []
    if overrides:
        # A development override must not ship: loads would bypass the lock.
        local_problems.append(Problem("local-override", None, None, None, variable=LOCAL_KERNELS_ENV,
                                      overrides=describe_overrides(overrides), lock=path.name))  # fmt: skip
    policy = rules.policy
    # The one judgement of a lock against its project, whichever tool wrote it.
    problems = judge_lock(found, rules)
    against_hub = {}  # for a kernels 0.17 lock: whether its builds were checked against the Hub
    if lock is None:  # kernels 0.17: its builds hashed from the Hub's listing at each pinned commit,
        # unless the policy already refuses it (it records no signer): then those findings are all.
        refused = any(p.kind in POLICY_KINDS for p in problems)
        lock, hub = (Lockfile(kernels=()), hub) if refused else _lock_of_pins(found, hub, rules.policy, rules.publishers)
        against_hub = {"checked": not refused}
    if written_by is None:
        notices += filter(None, [unrecorded_requirements(lock)])  # an older lock: what 'kernels lock' adds
    else:
        # A kernels 0.17 lock the policy refused was not checked against the Hub: the notice says which.
        notices.append(Problem("foreign-lock", None, None, None, lock=str(path), written_by=written_by,
                               **against_hub))  # fmt: skip
    problems = local_problems + problems
    cache_problems, checked, tiers = check_cache_tiers(lock, cache_root=cache_root, shared=shared)
    problems += cache_problems + check_signed_cache(lock, checked, policy)
    wheel_problems, wheels = check_wheels(lock)
    problems += wheel_problems
    present = {(c.repo_id, c.variant) for c in checked} | {(c.repo_id, c.variant) for c in wheels}
    present |= {(p.repo_id, p.variant) for p in cache_problems if p.kind == "unreadable"}
    if require_cached:
        problems += check_this_machine(lock, present, system or detect_system(), cache_root)
    if wanted:
        problems += check_targets_cached(lock, present, wanted, cache_root)
    if online:
        from kernel_deps.checks.hub import check_hub
        from kernel_deps.hub.client import HubClient

        hub = hub or HubClient()
        with hub.operation():  # one time budget for every question to the Hub
            for found in check_hub(lock, hub):
                (notices if found.kind in NOTICE_KINDS else problems).append(found)
    signers = {(k.repo_id, name): signer.to_dict() for k in lock.kernels for name, signer in k.signatures.items()}
    return VerifyReport(path, len(lock.kernels), problems, checked, online, notices, wheels, signers, tiers)

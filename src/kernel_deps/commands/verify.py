"""`kernels verify` as a library function: prove that pyproject, kernels.lock and the cache agree.

Offline by default, it makes no network request: (a) the lock parses, (b) it is in sync
with ``pyproject.toml`` (the static form of ``lock --check``), (c) every locked variant
present in the cache hashes, from its files' contents, to its locked value. ``online``
also asks the Hub whether each locked commit still exists with the locked content and
whether the tag or branch named in the lock still points at it. Every problem is
collected, none is printed: the CLI renders the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from kernel_deps.cache import store as cache
from kernel_deps.cache.pools import worker_pool
from kernel_deps.core.errors import (
    HubError,
    RepoNotFoundError,
    RevisionNotFoundError,
    UnsafeRepoContentError,
    UsageError,
)
from kernel_deps.core.records import Record, replaceable
from kernel_deps.core.settings import (
    BUILD_DIR,
    HUB_WORKERS,
    LOCAL_KERNELS_ENV,
    PYPROJECT_NAME,
    describe_overrides,
    hash_threads,
    is_offline,
    local_overrides,
    offline_env,
)
from kernel_deps.core.system import SystemInfo, detect_system
from kernel_deps.core.targets import Target, serving_variant, targets_from_options
from kernel_deps.core.variants import NoMatchingVariantError, select_variant
from kernel_deps.core.versions import GitRef
from kernel_deps.lock.freshness import (
    AGREEMENT_KINDS,
    RELOCK_HINT,
    Problem,
    judge_lock,
    rules_from_table,
    unrecorded_requirements,
)
from kernel_deps.lock.model import LockedKernel, Lockfile, lock_path
from kernel_deps.lock.read import read_lock
from kernel_deps.trust.signers import SignaturePolicy
from kernel_deps.project.pyproject import project_from_text, read_kernels_source

if TYPE_CHECKING:  # imported by --online only: an offline verify never loads the Hub client
    from kernel_deps.hub.client import HubClient
    from kernel_deps.hub.index import KernelIndex

_FILE_MESSAGES = {
    "modified": "{path} was modified",
    "missing": "{path} is missing",
    "extra": "{path} was added; it is not part of the locked variant",
    "not-a-file": "{path} is not a regular file (a broken link or a link to a folder)",
    "outside-cache": "{path} links outside the cache (to {got}); the loader refuses it, run 'kernels download' to replace it",
    "hash-mismatch": "the cached files hash to a different value than kernels.lock records",
}
SYNC_KINDS = AGREEMENT_KINDS
# The lock's recorded signers against the policy; a cached variant, its files the locked bytes,
# against its digest and its bundle verified again.
SIGNED_KINDS = frozenset({"signer-not-allowed", "signature-missing", "digest-mismatch", "signature-invalid"})
FILE_KINDS = frozenset(_FILE_MESSAGES)  # a cached variant's files differ: a fresh download repairs them
CACHE_KINDS = FILE_KINDS | {"unreadable", "unlocked-variant", "not-cached", "no-variant", "target-not-cached"}
HUB_KINDS = frozenset({"repo-missing", "commit-missing", "ref-missing", "ref-moved", "hub-hash-mismatch",
                       "variant-not-on-hub", "variant-not-locked", "hub-error"})  # fmt: skip
# An installed kernel wheel (kernels to-wheel) differs from the lock: reinstalling it repairs it.
WHEEL_KINDS = frozenset({f"wheel-{kind}" for kind in _FILE_MESSAGES} | {"wheel-record", "wheel-not-locked"})
# Reported, but not a disagreement: the lock still holds, upstream has something newer.
NOTICE_KINDS = frozenset({"ref-advanced", "foreign-lock", "requirements-not-recorded"})
# LOCAL_KERNELS is set: a development override that must not ship.
LOCAL_KINDS = frozenset({"local-override"})


SCHEMA_VERSION = 3  # of docs/schemas/verify.schema.json; see docs/ci.md


@replaceable  # sync copies one with dataclasses.replace
class VerifyReport(Record):
    """What verify found: every problem, every notice, every cached variant it recomputed."""

    __slots__ = ("lockfile", "kernels", "problems", "checked", "online", "notices", "wheels", "signers")
    lockfile: Path
    kernels: int
    problems: list[Problem]
    checked: list[cache.VariantCheck]
    online: bool
    notices: list[Problem]
    wheels: list[cache.VariantCheck]  # installed kernel wheels checked
    # (repo id, variant) -> who signed it, as the lock records it (and verified again from the cache).
    signers: dict[tuple[str, str], dict]

    def __init__(
        self, lockfile: Path, kernels: int, problems: list[Problem], checked: list[cache.VariantCheck], online: bool,
        notices: list[Problem] | None = None, wheels: list[cache.VariantCheck] | None = None,
        signers: dict[tuple[str, str], dict] | None = None,
    ) -> None:  # fmt: skip
        self._init(lockfile, kernels, problems, checked, online, [] if notices is None else notices,
                   [] if wheels is None else wheels, {} if signers is None else signers)  # fmt: skip

    @property
    def ok(self) -> bool:
        """True when nothing disagrees."""
        return not self.problems

    @property
    def verified(self) -> list[cache.VariantCheck]:
        """The cached variants whose contents match their locked hash."""
        return [check for check in self.checked if check.ok]

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
                 "path": str(c.path), "signer": self.signers.get((c.repo_id, c.variant))}
                for c in self.verified
            ],
            "wheels": [
                {"repo_id": c.repo_id, "commit": c.commit, "variant": c.variant, "hash": c.actual_hash,
                 "path": str(c.path)}
                for c in self.wheels if c.ok
            ],  # fmt: skip
        }


def verify_project(
    project_dir: Path,
    *,
    online: bool = False,
    require_cached: bool = False,
    hub: HubClient | None = None,
    cache_root: Path | None = None,
    system: SystemInfo | None = None,
    targets: Sequence[str] = (),
    all_targets: bool = False,
) -> VerifyReport:
    """Check pyproject, lock and cache (and, ``online``, the Hub); UsageError on bad input.

    Every target pyproject.toml declares must be served by the lock. With ``targets``
    (exact build names) or ``all_targets``, the build serving each of them must also be
    in the cache, instead of this machine's (which ``require_cached`` adds).
    """
    if online and is_offline():
        raise UsageError(f"--online needs the Hub but {offline_env()} is set; unset {offline_env()} or drop --online")
    overrides = local_overrides()  # read first: a malformed LOCAL_KERNELS is bad input
    # pyproject.toml read and parsed once; each of its tables is judged where its check comes.
    source = str(Path(project_dir) / PYPROJECT_NAME)
    text, kernels_table, requirements = read_kernels_source(project_dir)
    if requirements is None:
        project_from_text(text, source=source)  # raises read_project's error for a missing dependencies table
    rules = rules_from_table(text, kernels_table, requirements, Path(project_dir))
    wanted = targets_from_options(targets, all_targets, rules.targets, Path(project_dir) / PYPROJECT_NAME)
    path = lock_path(project_dir)
    found = read_lock(path, purpose="use")
    lock, written_by = found.lock, found.written_by
    notices: list[Problem] = []
    local_problems = []
    if overrides:
        # A development override must not ship: loads would bypass the lock.
        message = (f"{LOCAL_KERNELS_ENV} is set ({describe_overrides(overrides)}): loads of those kernels use the "
                   f"local builds instead of {path.name}; unset {LOCAL_KERNELS_ENV} to ship")  # fmt: skip
        local_problems.append(Problem("local-override", None, None, None, message))
    policy = rules.policy
    # The one judgement of a lock against its project, whichever tool wrote it.
    problems = judge_lock(found, rules)
    if written_by is None:
        notices += filter(None, [unrecorded_requirements(lock)])  # an older lock: what 'kernels lock' adds
    else:
        message = (f"{path} was written by {written_by}: it records no requirements, no versions and no signers, "
                   "so only what it records is judged against pyproject.toml; 'kernels lock' converts it, "
                   "keeping its pins")  # fmt: skip
        notices.append(Problem("foreign-lock", None, None, None, message))
    problems = local_problems + problems
    cache_problems, checked = check_cache(lock, cache_root=cache_root)
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
        from kernel_deps.hub.client import HubClient

        hub = hub or HubClient()
        with hub.operation():  # one time budget for every question to the Hub
            for found in check_hub(lock, hub):
                (notices if found.kind in NOTICE_KINDS else problems).append(found)
    signers = {(k.repo_id, name): signer.to_dict() for k in lock.kernels for name, signer in k.signatures.items()}
    return VerifyReport(path, len(lock.kernels), problems, checked, online, notices, wheels, signers)


def check_signed_cache(lock: Lockfile, checked: Sequence[cache.VariantCheck], policy: SignaturePolicy) -> list[Problem]:
    """Each cached variant that holds the locked bytes against its metadata.json digest and,
    when the lock records its signer, its bundle verified again offline; no network."""
    from kernel_deps.trust.signatures import check_cached_variant

    problems = []
    for check in (c for c in checked if c.ok):
        kernel = lock.get(check.repo_id)
        assert kernel is not None
        try:
            found = check_cached_variant(kernel, check.variant, check.path, check.files, policy)
        except OSError as exc:
            message = f"{check.repo_id} {check.variant}: cannot read the cached copy ({exc.strerror or exc})"
            problems.append(Problem("unreadable", check.repo_id, check.variant, None, message))
            continue
        for refused in found:
            kind = "digest-mismatch" if refused.kind == "digest" else "signature-invalid"
            path = refused.expected.partition(" = ")[0] if refused.kind == "digest" else None
            problems.append(Problem(kind, check.repo_id, check.variant, path, refused.describe(), refused.expected,
                                    refused.found))  # fmt: skip
    return problems


# -- (c) lock <-> cache ---------------------------------------------------------------


def check_cache(lock: Lockfile, *, cache_root: Path | None = None) -> tuple[list[Problem], list[cache.VariantCheck]]:
    """Recompute every locked variant present in the cache; name each file that differs.

    Variants are checked at once (their files share the hashing threads, when they are large
    enough to pay for threads); the problems and results come in lock order, exactly as
    checking one variant after another gives.
    """
    hash_threads()  # a malformed KERNELS_HASH_THREADS is bad input, whatever is cached
    tasks = [(kernel, name, locked.hash) for kernel in lock.kernels for name, locked in kernel.variants.items()]
    outcomes = cache.check_variants([(kernel.repo_id, kernel.sha, name, expected) for kernel, name, expected in tasks],
                                    root=cache_root)  # fmt: skip
    by_variant = {(id(kernel), name): outcome for (kernel, name, _), outcome in zip(tasks, outcomes)}

    problems: list[Problem] = []
    checked: list[cache.VariantCheck] = []
    for kernel in lock.kernels:
        for name in kernel.variants:
            where = f"{kernel.repo_id} {name}"
            result = by_variant[(id(kernel), name)]
            if isinstance(result, OSError):
                message = f"{where}: cannot read the cached copy ({result.strerror or result}); check its permissions"
                problems.append(Problem("unreadable", kernel.repo_id, name, None, message))
                continue
            if not result.present:
                continue
            checked.append(result)
            for found in result.problems:
                message = f"{where}: " + _FILE_MESSAGES[found.kind].format(path=found.path, got=found.got)
                path = None if found.kind == "hash-mismatch" else found.path
                problems.append(Problem(found.kind, kernel.repo_id, name, path, message, found.expected, found.got))
        problems += _unlocked_variants(kernel, cache_root)
    return problems, checked


def check_wheels(lock: Lockfile) -> tuple[list[Problem], list[cache.VariantCheck]]:
    """Every installed kernel wheel of a locked kernel (``kernels to-wheel``), checked file by
    file against the lock as the loader checks it; one that holds no locked commit and variant
    is a problem too, since the loader passes it over."""
    from kernel_deps.cache.installed import check_installed, dist_info_names, installed_wheels

    problems: list[Problem] = []
    checked: list[cache.VariantCheck] = []
    on_path = dist_info_names()  # sys.path listed once for every kernel
    for kernel in lock.kernels:
        for wheel in installed_wheels(kernel.repo_id, on_path=on_path):
            if wheel.problem is not None:
                message = f"{kernel.repo_id}: {wheel.label}: kernel_deps.json {wheel.problem}; the loader skips it"
                problems.append(Problem("wheel-record", kernel.repo_id, None, str(wheel.folder), message))
                continue
            where = f"{kernel.repo_id} {wheel.variant}: {wheel.label}"
            if wheel.commit != kernel.sha or wheel.variant not in kernel.variants:
                message = (f"{where} holds commit {wheel.commit[:12]}, not a variant kernels.lock pins at "
                           f"{kernel.sha[:12]}; install the wheels 'kernels to-wheel' writes from this "
                           "lock")  # fmt: skip
                problems.append(Problem("wheel-not-locked", kernel.repo_id, wheel.variant, str(wheel.folder), message,
                                        kernel.sha, wheel.commit))  # fmt: skip
                continue
            try:
                result = check_installed(wheel, kernel.variants[wheel.variant].hash)
            except OSError as exc:
                message = f"{where}: cannot read it ({exc.strerror or exc}); check its permissions"
                problems.append(Problem("unreadable", kernel.repo_id, wheel.variant, str(wheel.folder), message))
                continue
            checked.append(result)
            for found in result.problems:
                text = _FILE_MESSAGES[found.kind].format(path=found.path, got=found.got)
                if found.kind == "hash-mismatch":
                    text = "its kernel_deps.json records files that hash to a different value than kernels.lock records"
                reinstall = "pip install --force-reinstall --require-hashes -r requirements.txt"
                message = f"{where}: {text}; reinstall it ({reinstall})"
                problems.append(Problem(f"wheel-{found.kind}", kernel.repo_id, wheel.variant, found.path, message,
                                        found.expected, found.got))  # fmt: skip
    return problems, checked


def _unlocked_variants(kernel: LockedKernel, root: Path | None) -> list[Problem]:
    """Variant folders in the cache at the locked commit that the lock does not list."""
    repo = cache.find_repo_dir(kernel.repo_id, root)
    build = repo / "snapshots" / kernel.sha / BUILD_DIR if repo else None
    try:
        names = sorted(p.name for p in build.iterdir() if p.is_dir()) if build and build.is_dir() else []
    except OSError:
        return []  # an unreadable snapshot folder shows up as unreadable variants above
    return [
        Problem("unlocked-variant", kernel.repo_id, name, None,
                f"{kernel.repo_id} {name}: in the cache at the locked commit {kernel.sha[:12]}, but kernels.lock "
                f"does not list it; delete {build / name}")
        for name in names if name not in kernel.variants
    ]  # fmt: skip


def check_this_machine(
    lock: Lockfile, present: set[tuple[str, str]], system: SystemInfo, cache_root: Path | None = None
) -> list[Problem]:
    """For each kernel, this machine's best locked variant must be among the ``present`` ones."""
    problems: list[Problem] = []
    for kernel in lock.kernels:
        try:
            name = select_variant(kernel.repo_id, kernel.variants, system)
        except NoMatchingVariantError:
            locked = ", ".join(kernel.variants) or "none"
            message = (f"{kernel.repo_id}: kernels.lock has no variant for this machine ({system.describe()}); "
                       f"locked: {locked}")  # fmt: skip
            problems.append(Problem("no-variant", kernel.repo_id, None, None, message))
            continue
        if (kernel.repo_id, name) not in present:
            folder = cache.variant_dir(cache.repo_dir(kernel.repo_id, root=cache_root), kernel.sha, name)
            message = f"{kernel.repo_id} {name}: this machine's variant is not in the cache ({folder})"
            problems.append(Problem("not-cached", kernel.repo_id, name, None, f"{message}; run 'kernels download'"))
    return problems


def check_targets_cached(
    lock: Lockfile, present: set[tuple[str, str]], targets: Sequence[Target], cache_root: Path | None = None
) -> list[Problem]:
    """For each kernel and target, the locked build serving that target must be among the ``present`` ones."""
    problems: list[Problem] = []
    for target in targets:
        for kernel in lock.kernels:
            name = serving_variant(target, kernel.variants)
            if name is None:
                locked = ", ".join(kernel.variants) or "none"
                message = (f"{kernel.repo_id}: kernels.lock has no variant for the target {target.name}; "
                           f"locked: {locked}")  # fmt: skip
                problems.append(Problem("no-variant", kernel.repo_id, None, None, message, target.name, None))
            elif (kernel.repo_id, name) not in present:
                folder = cache.variant_dir(cache.repo_dir(kernel.repo_id, root=cache_root), kernel.sha, name)
                message = (f"{kernel.repo_id} {name}: the variant for the target {target.name} is not in the cache "
                           f"({folder}); run 'kernels download --target {target.name}'")  # fmt: skip
                problems.append(Problem("target-not-cached", kernel.repo_id, name, None, message, target.name, None))
    return problems


# -- online: lock <-> Hub -------------------------------------------------------------


def check_hub(lock: Lockfile, hub: HubClient) -> list[Problem]:
    """Ask the Hub: does each locked commit exist as locked, does its named ref still point at it?"""
    from kernel_deps.hub.index import KernelIndex

    with KernelIndex(hub) as index, worker_pool(HUB_WORKERS, "kernel-deps-verify") as pool:
        found = list(pool.map(lambda kernel: _check_remote(kernel, index), lock.kernels))
    return [problem for problems in found for problem in problems]


def _check_remote(kernel: LockedKernel, index: KernelIndex) -> list[Problem]:
    repo_id, sha = kernel.repo_id, kernel.sha
    try:
        refs = index.refs(repo_id).refs
    except RepoNotFoundError as exc:
        return [Problem("repo-missing", repo_id, None, None, f"{exc.message} (kernels.lock pins it at {sha[:12]})")]
    except HubError as exc:
        return [Problem("hub-error", repo_id, None, None, exc.message)]
    moved = _ref_problem(kernel, refs, index.hub) if kernel.version else None
    problems = [moved] if moved else []
    try:
        tree = index.tree(repo_id, sha)
    except RevisionNotFoundError:
        message = (f"{repo_id}: the locked commit {sha[:12]} no longer exists on the Hub (history rewritten?); "
                   f"run 'kernels lock --upgrade-package {repo_id}' to pin a commit that exists")  # fmt: skip
        return problems + [Problem("commit-missing", repo_id, None, None, message, sha, None)]
    except (HubError, UnsafeRepoContentError) as exc:  # a listing that cannot be locked or placed
        return problems + [Problem("hub-error", repo_id, None, None, exc.message)]
    remote = {name: tree.variant_hash(name) for name in tree.files}
    at = f"at {sha[:12]}; kernels.lock does not match the Hub (edited by hand?); {RELOCK_HINT}"
    for name in sorted(kernel.variants.keys() | remote.keys()):
        locked = kernel.variants[name].hash if name in kernel.variants else None
        got = remote.get(name)
        if got == locked:
            continue
        if got is None:
            kind, what = "variant-not-on-hub", "not on the Hub"
        elif locked is None:
            kind, what = "variant-not-locked", "on the Hub but not in kernels.lock"
        else:
            kind, what = "hub-hash-mismatch", "the Hub's files hash differently"
        problems.append(Problem(kind, repo_id, name, None, f"{repo_id} {name}: {what} {at}", locked, got))
    return problems


def _ref_problem(kernel: LockedKernel, refs: Sequence[GitRef], hub: HubClient) -> Problem | None:
    """A problem when the tag or branch the lock names is gone or points elsewhere.

    A branch that moved forward (the locked commit is in its history) is how ``vN``
    branches get new releases: the lock keeps its commit, and a ``ref-advanced`` notice
    says what an upgrade would take. A tag that points elsewhere, or a branch whose
    history no longer holds the locked commit (a force-push), is a problem.
    """
    repo_id, sha, name = kernel.repo_id, kernel.sha, kernel.version
    named = [ref for ref in refs if ref.name == name]
    upgrade = f"run 'kernels lock --upgrade-package {repo_id}'"
    if not named:
        message = f"{repo_id}: {name} no longer exists on the Hub (locked at {sha[:12]}); {upgrade} to pin one that does"
        return Problem("ref-missing", repo_id, None, None, message, sha, None)
    if any(ref.commit == sha for ref in named):
        return None
    ref = named[0]
    if ref.kind == "branch" and sha in hub.commit_history(repo_id, ref.commit):
        message = (f"{repo_id}: branch {name} has moved on to {ref.commit[:12]} since it was locked at {sha[:12]}; "
                   f"the lock keeps {sha[:12]}; {upgrade} to take the new build")  # fmt: skip
        return Problem("ref-advanced", repo_id, None, None, message, sha, ref.commit)
    how = "the tag was moved" if ref.kind == "tag" else "history rewritten by a force-push"
    message = f"{repo_id}: {ref.kind} {name} now points at {ref.commit[:12]}, not the locked {sha[:12]} ({how})"
    message += f"; review the change, then {upgrade} to take it"
    return Problem("ref-moved", repo_id, None, None, message, sha, ref.commit)

"""`kernels verify` as a library function: prove that pyproject, kernels.lock and the cache agree.

Offline by default, it makes no network request: (a) the lock parses, (b) it is in sync
with ``pyproject.toml`` (the static form of ``lock --check``), (c) every locked variant
present in the cache hashes, from its files' contents, to its locked value. ``online``
also asks the Hub whether each locked commit still exists with the locked content and
whether the tag or branch named in the lock still points at it. Every problem is
collected, none is printed: the CLI renders the report.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from kernel_deps import cache
from kernel_deps.errors import HubError, RepoNotFoundError, RevisionNotFoundError, UsageError
from kernel_deps.hub import HubClient
from kernel_deps.index import KernelIndex
from kernel_deps.lockfile import LockedKernel, Lockfile, read_lockfile
from kernel_deps.locking import lock_path
from kernel_deps.settings import BUILD_DIR, HUB_WORKERS, is_offline
from kernel_deps.spec import KernelRequirement, read_requirements
from kernel_deps.variants import NoMatchingVariantError, SystemInfo, detect_system, select_variant
from kernel_deps.versions import GitRef, parse_version_ref

_RELOCK = "run 'kernels lock' to update kernels.lock"
_FILE_MESSAGES = {
    "modified": "{path} was modified",
    "missing": "{path} is missing",
    "extra": "{path} was added; it is not part of the locked variant",
    "not-a-file": "{path} is not a regular file (a broken link or a link to a folder)",
    "hash-mismatch": "the cached files hash to a different value than kernels.lock records",
}
SYNC_KINDS = frozenset({"not-locked", "unsatisfied", "requirement-changed", "removed", "orphan"})
FILE_KINDS = frozenset(_FILE_MESSAGES)  # a cached variant's files differ: a fresh download repairs them
CACHE_KINDS = FILE_KINDS | {"unreadable", "unlocked-variant", "not-cached", "no-variant"}
HUB_KINDS = frozenset({"repo-missing", "commit-missing", "ref-missing", "ref-moved", "hub-hash-mismatch",
                       "variant-not-on-hub", "variant-not-locked", "hub-error"})  # fmt: skip


@dataclass(frozen=True)
class Problem:
    """One way pyproject, lock, cache or Hub disagree; ``message`` is complete on its own."""

    kind: str
    repo_id: str | None
    variant: str | None
    path: str | None
    message: str
    expected: str | None = None
    got: str | None = None


@dataclass(frozen=True)
class VerifyReport:
    """What verify found: every problem, and every cached variant it recomputed."""

    lockfile: Path
    kernels: int
    problems: list[Problem]
    checked: list[cache.VariantCheck]
    online: bool

    @property
    def ok(self) -> bool:
        """True when nothing disagrees."""
        return not self.problems

    @property
    def verified(self) -> list[cache.VariantCheck]:
        """The cached variants whose contents match their locked hash."""
        return [check for check in self.checked if check.ok]


def verify_project(
    project_dir: Path,
    *,
    online: bool = False,
    require_cached: bool = False,
    hub: HubClient | None = None,
    cache_root: Path | None = None,
    system: SystemInfo | None = None,
) -> VerifyReport:
    """Check pyproject, lock and cache (and, ``online``, the Hub); UsageError on bad input."""
    if online and is_offline():
        raise UsageError("--online needs the Hub but HF_HUB_OFFLINE is set; unset HF_HUB_OFFLINE or drop --online")
    requirements = read_requirements(project_dir)
    path = lock_path(project_dir)
    lock = read_lockfile(path)
    problems = check_sync(requirements, lock)
    cache_problems, checked = check_cache(lock, cache_root=cache_root)
    problems += cache_problems
    present = {(c.repo_id, c.variant) for c in checked}
    present |= {(p.repo_id, p.variant) for p in cache_problems if p.kind == "unreadable"}
    if require_cached:
        problems += check_this_machine(lock, present, system or detect_system(), cache_root)
    if online:
        hub = hub or HubClient()
        with hub.operation():  # one time budget for every question to the Hub
            problems += check_hub(lock, hub)
    return VerifyReport(path, len(lock.kernels), problems, checked, online)


# -- (b) pyproject <-> lock -----------------------------------------------------------


def check_sync(requirements: Sequence[KernelRequirement], lock: Lockfile) -> list[Problem]:
    """The static rule of ``lock --check``: is each requirement locked as written, and nothing else?"""
    direct = {req.repo_id: req for req in requirements}
    problems: list[Problem] = []
    for req in requirements:
        entry = lock.get(req.repo_id)
        if entry is None:
            message = f"{req.repo_id} is in pyproject.toml ({req.text!r}) but not in kernels.lock"
            problems.append(_sync("not-locked", req.repo_id, message, None, None))
        elif not _satisfies(entry, req):
            got = _label(entry)
            message = f"{req.repo_id}: the locked {got} does not satisfy {req.text!r} from pyproject.toml"
            problems.append(_sync("unsatisfied", req.repo_id, message, req.text, got))
        elif entry.requirement != req.text:
            was = f"for {entry.requirement!r}" if entry.requirement else "only as a dependency of another kernel"
            message = f"{req.repo_id}: pyproject.toml asks for {req.text!r} but kernels.lock was locked {was}"
            problems.append(_sync("requirement-changed", req.repo_id, message, req.text, entry.requirement))
    removed = {k.repo_id for k in lock.kernels if k.requirement is not None and k.repo_id not in direct}
    for repo_id in sorted(removed):
        was = lock.get(repo_id).requirement
        message = f"{repo_id} was removed from pyproject.toml but kernels.lock still requires it ({was!r})"
        problems.append(_sync("removed", repo_id, message, None, None))
    reachable = _reachable(lock, direct)
    for kernel in lock.kernels:
        if kernel.repo_id not in reachable and kernel.repo_id not in removed:
            message = f"{kernel.repo_id} is in kernels.lock but no longer required by pyproject.toml or a locked kernel"
            problems.append(_sync("orphan", kernel.repo_id, message, None, None))
    return problems


def _sync(kind: str, repo_id: str, message: str, expected: str | None, got: str | None) -> Problem:
    return Problem(kind, repo_id, None, None, f"{message}; {_RELOCK}", expected, got)


def _satisfies(entry: LockedKernel, req: KernelRequirement) -> bool:
    """Whether the locked version (tag, branch or commit) still meets the requirement."""
    if req.revision is not None:
        return req.revision in (entry.version, entry.sha)
    tag = parse_version_ref(GitRef(entry.version, "tag", entry.sha)) if entry.version else None
    if req.major is not None and entry.version == f"v{req.major}":
        return True
    return tag is not None and req.allows(tag.version)


def _label(entry: LockedKernel) -> str:
    return f"{entry.version} ({entry.sha[:12]})" if entry.version else f"commit {entry.sha[:12]}"


def _reachable(lock: Lockfile, direct: dict[str, KernelRequirement]) -> set[str]:
    """Repo ids reachable from the project's requirements through locked dependencies."""
    seen: set[str] = set()
    todo = [repo_id for repo_id in direct if lock.get(repo_id) is not None]
    while todo:
        repo_id = todo.pop()
        if repo_id not in seen:
            seen.add(repo_id)
            todo += lock.get(repo_id).dependencies
    return seen


# -- (c) lock <-> cache ---------------------------------------------------------------


def check_cache(lock: Lockfile, *, cache_root: Path | None = None) -> tuple[list[Problem], list[cache.VariantCheck]]:
    """Recompute every locked variant present in the cache; name each file that differs."""
    problems: list[Problem] = []
    checked: list[cache.VariantCheck] = []
    for kernel in lock.kernels:
        for name, locked in kernel.variants.items():
            where = f"{kernel.repo_id} {name}"
            try:
                result = cache.check_variant(kernel.repo_id, kernel.sha, name, locked.hash, root=cache_root)
            except OSError as exc:
                message = f"{where}: cannot read the cached copy ({exc.strerror or exc}); check its permissions"
                problems.append(Problem("unreadable", kernel.repo_id, name, None, message))
                continue
            if not result.present:
                continue
            checked.append(result)
            for found in result.problems:
                message = f"{where}: " + _FILE_MESSAGES[found.kind].format(path=found.path)
                path = None if found.kind == "hash-mismatch" else found.path
                problems.append(Problem(found.kind, kernel.repo_id, name, path, message, found.expected, found.got))
        problems += _unlocked_variants(kernel, cache_root)
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


# -- online: lock <-> Hub -------------------------------------------------------------


def check_hub(lock: Lockfile, hub: HubClient) -> list[Problem]:
    """Ask the Hub: does each locked commit exist as locked, does its named ref still point at it?"""
    with KernelIndex(hub) as index, ThreadPoolExecutor(max_workers=HUB_WORKERS) as pool:
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
    except HubError as exc:
        return problems + [Problem("hub-error", repo_id, None, None, exc.message)]
    remote = {name: tree.variant_hash(name) for name in tree.files}
    at = f"at {sha[:12]}; kernels.lock does not match the Hub (edited by hand?); {_RELOCK}"
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
    branches get new releases: the lock keeps its commit and nothing is reported. A tag
    that points elsewhere, or a branch whose history no longer holds the locked commit
    (a force-push), is reported.
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
        return None
    how = "the tag was moved" if ref.kind == "tag" else "history rewritten by a force-push"
    message = f"{repo_id}: {ref.kind} {name} now points at {ref.commit[:12]}, not the locked {sha[:12]} ({how})"
    message += f"; review the change, then {upgrade} to take it"
    return Problem("ref-moved", repo_id, None, None, message, sha, ref.commit)

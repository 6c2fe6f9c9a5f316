"""The lock against the Hub, online: does each locked commit exist as locked, does its named ref still point at it?"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from kernel_deps.cache.pools import worker_pool
from kernel_deps.core.errors import HubError, RepoNotFoundError, RevisionNotFoundError, UnsafeRepoContentError
from kernel_deps.core.settings import HUB_WORKERS
from kernel_deps.core.versions import GitRef
from kernel_deps.lock.freshness import Problem
from kernel_deps.lock.model import LockedKernel, Lockfile

if TYPE_CHECKING:
    from kernel_deps.hub.client import HubClient
    from kernel_deps.hub.index import KernelIndex


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
        return [Problem("repo-missing", repo_id, None, None, detail=exc.message, commit=sha)]
    except HubError as exc:
        return [Problem("hub-error", repo_id, None, None, detail=exc.message)]
    moved = _ref_problem(kernel, refs, index.hub) if kernel.version else None
    problems = [moved] if moved else []
    try:
        tree = index.tree(repo_id, sha)
    except RevisionNotFoundError:
        return problems + [Problem("commit-missing", repo_id, None, None, sha, None)]
    except (HubError, UnsafeRepoContentError) as exc:  # a listing that cannot be locked or placed
        return problems + [Problem("hub-error", repo_id, None, None, detail=exc.message)]
    remote = {name: tree.variant_hash(name) for name in tree.files}
    for name in sorted(kernel.variants.keys() | remote.keys()):
        locked = kernel.variants[name].hash if name in kernel.variants else None
        got = remote.get(name)
        if got == locked:
            continue
        kind = "variant-not-on-hub" if got is None else "variant-not-locked" if locked is None else "hub-hash-mismatch"
        problems.append(Problem(kind, repo_id, name, None, locked, got, commit=sha))
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
    if not named:
        return Problem("ref-missing", repo_id, None, None, sha, None, ref=name)
    if any(ref.commit == sha for ref in named):
        return None
    ref = named[0]
    if ref.kind == "branch" and sha in hub.commit_history(repo_id, ref.commit):
        return Problem("ref-advanced", repo_id, None, None, sha, ref.commit, ref=name)
    return Problem("ref-moved", repo_id, None, None, sha, ref.commit, ref=name, ref_kind=ref.kind)

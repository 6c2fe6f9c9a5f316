"""Finding the lock a load enforces, and judging it against the project beside it.

In order: the ``lockfile=`` argument; ``KERNELS_LOCKFILE``; the ``kernels.lock`` embedded in
the installed distribution of the package that called the loader; the ``kernels.lock``
of the project around the working directory, found as every command finds its project
(:func:`kernel_deps.project.discovery.find_project`: the walk stops at the first project). A lock with a project beside it
is judged as every command judges one (:func:`kernel_deps.lock.freshness.judge_for_use`).

A Hugging Face ``kernels`` 0.17 lock pins commits and no variant hashes, so nothing in it
proves a cached file: a load that may use the Hub (``get_locked_kernel``) builds the lock
its pins stand for from the Hub's listing at each commit, as ``kernels download`` does
(:func:`kernel_deps.resolve.pinned.lock_of_pins`: hashes, digests, signatures, publishers),
once per change of the file or its project; one that may not (``load_kernel``, or offline) is
refused, saying how to convert it. The cache cannot stand in for the listing: whoever can
write the cache can write any manifest in it.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_deps.core.boundedread import file_state
from kernel_deps.core.errors import LockfileError, LockNotFoundError
from kernel_deps.core.records import Record
from kernel_deps.core.settings import LOCK_NAME, PYPROJECT_NAME
from kernel_deps.trust.signers import SignaturePolicy
from kernel_deps.lock.model import Lockfile
from kernel_deps.lock.read import parse_lock, read_lock

if TYPE_CHECKING:
    from kernel_deps.lock.freshness import ProjectRules
    from kernel_deps.lock.read import LockRead

_OWN_PACKAGE = __name__.split(".")[0]


class LockSource(Record):
    """The lock a load used and where it came from (for logs)."""

    __slots__ = ("lock", "origin", "path", "policy", "declared")
    lock: Lockfile
    origin: str  # "argument", "KERNELS_LOCKFILE", "distribution <name>", "project"
    path: str
    # The signature policy of the project the lock belongs to (its pyproject.toml beside it);
    # None for a lock without one there (embedded in a wheel: judged when the wheel was built).
    policy: SignaturePolicy | None
    # The repo ids that project's [tool.kernels.dependencies] declares (a kernel declared and
    # not locked is told to run kernels lock, not to add it).
    declared: frozenset[str]

    def __init__(self, lock: Lockfile, origin: str, path: str, policy: SignaturePolicy | None = None,
                 declared: frozenset[str] = frozenset()) -> None:  # fmt: skip
        self._init(lock, origin, path, policy, declared)


class StaleLockWarning(UserWarning):
    """A lock is loaded from as it is though it no longer agrees with its project's pyproject.toml."""


def find_lock(
    lockfile: str | os.PathLike[str] | None = None, *, caller: str | None = None, online: bool = False
) -> LockSource:
    """The lock to enforce, searched in the documented order; ``online``: a kernels 0.17 lock
    may be checked against the Hub (else it is refused, LockfileError)."""
    if lockfile is not None:
        return _judged(Path(lockfile), "argument", str(lockfile), online)
    from_env = os.environ.get("KERNELS_LOCKFILE")
    if from_env:
        return _judged(Path(from_env), "KERNELS_LOCKFILE", from_env, online)
    caller = caller if caller is not None else calling_module()
    embedded = _embedded_lock(caller) if caller else None
    if embedded is not None:
        return embedded
    return _project_lock(Path.cwd(), caller, online)


def _project_lock(start: Path, caller: str | None, online: bool = False) -> LockSource:
    """The lock of the project around ``start``, found as every project command finds its
    project (:func:`kernel_deps.project.discovery.find_project`): that folder is the project,
    so the walk stops there, lock or none."""
    from kernel_deps.project.discovery import find_project

    where = f" (called from {caller})" if caller else ""
    folder = find_project(start)
    if folder is None:
        raise LockNotFoundError(
            f"no kernels.lock found{where}: pass lockfile=, set KERNELS_LOCKFILE, or run 'kernels lock' in the project"
        )
    candidate = folder / LOCK_NAME
    if not (candidate.exists() or candidate.is_symlink()):
        raise LockNotFoundError(
            f"the project {folder} has no kernels.lock beside its pyproject.toml{where}: "
            f"run 'kernels lock' in {folder}, or pass lockfile= or set KERNELS_LOCKFILE"
        )
    # One that is no file is named in the error.
    return _judged(candidate, "project", str(candidate), online)


# Lock path -> ((its text, pyproject.toml's stat), the policy judged with it, the declared repo
# ids, and for a kernels 0.17 lock the lock its pins stand for once built): judged again only
# when either changes.
_judgements: dict[Path, tuple[tuple, SignaturePolicy | None, frozenset[str], Lockfile | None]] = {}


def _judged(path: Path, origin: str, shown: str, online: bool = False) -> LockSource:
    """The lock at ``path``, judged against the ``pyproject.toml`` beside it (when there is one)
    as every command judges a lock (:func:`kernel_deps.lock.freshness.judge_lock`): what the
    project's policy asks and the lock cannot show is refused (LockPolicyError), a lock that no
    longer agrees with the requirements is loaded from with a StaleLockWarning."""
    found = read_lock(path, purpose="load")
    project_dir = path.parent
    key = (found.text, file_state(project_dir / PYPROJECT_NAME))
    known = _judgements.get(path)
    if known is None or known[0] != key:
        from kernel_deps.lock.freshness import judge_for_use, read_rules

        rules = read_rules(project_dir)
        warning = judge_for_use(found, rules, shown, "refusing to load from it")
        pinned = _lock_of_pins(found, rules, shown, online) if found.lock is None else None
        if warning is not None:
            import warnings

            warnings.warn(warning, StaleLockWarning, stacklevel=5)  # once per change of either file
        declared = frozenset(r.repo_id for r in rules.requirements) if rules is not None else frozenset()
        known = _judgements[path] = (key, rules.policy if rules is not None else None, declared, pinned)
    # A kernels 0.17 lock's: built from the Hub's listings in this process, so a later load that
    # may not use the network takes it too (nothing on disk stands in for them).
    lock = found.lock if found.lock is not None else known[3]
    assert lock is not None
    return LockSource(lock, origin, shown, known[1], known[2])


def _lock_of_pins(found: LockRead, rules: ProjectRules | None, shown: str, online: bool) -> Lockfile:
    """The lock a kernels 0.17 lock's pins stand for, from the Hub (:mod:`kernel_deps.resolve.pinned`),
    for a load that may use it; LockfileError saying how to convert it otherwise."""
    from kernel_deps.core.settings import is_offline, offline_env

    if not online or is_offline():
        why = (f"and {offline_env()} is set" if online else "and load_kernel never uses the network")
        raise LockfileError(
            f"written by {found.written_by}, which records commits but no variant hashes, so the cached files can be "
            f"checked against it only with the Hub's listings, {why}",
            subject=shown,
            hint=("run 'kernels lock' to convert it (its pins are kept)" if online else
                  "run 'kernels lock' to convert it (its pins are kept), or load with get_locked_kernel, which "
                  "checks each build against the Hub's listing"),
        )  # fmt: skip
    from kernel_deps.hub.client import HubClient
    from kernel_deps.resolve.pinned import lock_of_pins

    return lock_of_pins(found, HubClient(), rules.policy if rules is not None else None,
                        rules.publishers if rules is not None else (), doing="refusing to load")  # fmt: skip


def calling_module() -> str | None:
    """The name of the first module on the stack outside kernel_deps (and importlib)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        spec = frame.f_globals.get("__spec__")
        if name == "__main__" and spec is not None and getattr(spec, "name", None):
            name = spec.name  # `python -m package.tool`: the module's real name
        top = name.split(".")[0]
        if top not in (_OWN_PACKAGE, "importlib", "_frozen_importlib", "_frozen_importlib_external"):
            return name
        frame = frame.f_back
    return None


@lru_cache(maxsize=1)
def packages_to_distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _embedded_lock(module_name: str) -> LockSource | None:
    """The kernels.lock inside the installed distribution that provides ``module_name``."""
    package = module_name.split(".")[0]
    if package in ("__main__", ""):
        return None
    dist_names = packages_to_distributions().get(package)
    if dist_names is None:
        packages_to_distributions.cache_clear()  # installed since the first lookup?
        dist_names = packages_to_distributions().get(package, [])
    for dist_name in dist_names:
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            continue
        # setuptools' egg_info writer puts it at the top of .dist-info; hatchling keeps files
        # that build hooks add under .dist-info/extra_metadata/.
        text = dist.read_text(LOCK_NAME) or dist.read_text(f"extra_metadata/{LOCK_NAME}")
        if text is not None:
            source = f"{dist_name} {dist.version} (installed distribution)"
            lock = parse_lock(text, source=f"{dist_name}:{LOCK_NAME}", purpose="use").lock
            return LockSource(lock, f"distribution {dist_name}", source)
    return None

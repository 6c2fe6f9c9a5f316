"""Loading kernels at run time, only as the lock says.

``load_kernel`` and ``get_locked_kernel`` find the project's lock, refuse any repo it
does not list, choose this machine's variant, check every file of that variant against
the locked hash, and import it under a module name unique to repo and commit, so two
kernels (or two versions of one) live side by side in one process. The import itself
(``verified_import``) uses only the files the check covered, and only the bytes it hashed:
no bytecode, no file added later, no file changed later.

The public names live here; the work is split by concept: finding and judging the lock
(:mod:`~kernel_deps.loader.finding`), the signature judge of a build
(:mod:`~kernel_deps.loader.judge`), its verified files from the cache, an installed wheel or
a download (:mod:`~kernel_deps.loader.variant`), its import under a private module name
(:mod:`~kernel_deps.loader.modules`), and unlocked resolution for ``get_kernel`` and
``has_kernel`` (:mod:`~kernel_deps.loader.unlocked`).

``get_kernel``, ``has_kernel`` and ``get_local_kernel`` take the Hugging Face library's
arguments (docs/loader.md); a ``LOCAL_KERNELS`` override (:mod:`kernel_deps.loader.local`)
replaces any load of the kernels it names with their local build.
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from kernel_deps.core.errors import (
    KernelCacheReadError,
    KernelImportError,
    KernelIntegrityError,
    KernelNotCachedError,
    KernelNotLockedError,
    LockNotFoundError,
    LockPolicyError,
    UsageError,
)
from kernel_deps.trust.signers import Identity, SignaturePolicy
from kernel_deps.core.system import SystemInfo, detect_system
from kernel_deps.core.variants import select_variant
from kernel_deps.loader.finding import (  # packages_to_distributions: its cache is cleared after an install in-process
    LockSource,
    StaleLockWarning,
    calling_module,
    find_lock,
    packages_to_distributions,
)
from kernel_deps.loader.judge import Judge
from kernel_deps.loader.modules import import_variant, module_name_for
from kernel_deps.loader.origin import KernelOrigin
from kernel_deps.loader.unlocked import resolve_unlocked
from kernel_deps.loader.variant import verified_variant


@lru_cache(maxsize=1)
def _this_system():
    """This process's system description (torch cannot change under a running process)."""
    return detect_system()


# -- loading ------------------------------------------------------------------------------

_loaded: dict[tuple[str, str, str], ModuleType] = {}
_load_lock = threading.RLock()


def load_kernel(
    repo_id: str, *, lockfile: str | os.PathLike[str] | None = None, backend: str | None = None
) -> ModuleType:
    """The locked kernel's module, from the cache only; never touches the network."""
    return _load_locked(repo_id, lockfile, backend, allow_download=False)


def get_locked_kernel(
    repo_id: str, *, lockfile: str | os.PathLike[str] | None = None, backend: str | None = None
) -> ModuleType:
    """The locked kernel's module, downloading the locked variant (verified) if absent."""
    return _load_locked(repo_id, lockfile, backend, allow_download=True)


def _load_locked(
    repo_id: str, lockfile: str | os.PathLike[str] | None, backend: str | None, *, allow_download: bool
) -> ModuleType:
    """``load_kernel`` and ``get_locked_kernel``: a ``LOCAL_KERNELS`` override, else the lock's kernel."""
    system = system_for_backend(backend)
    override = _override(repo_id, system, stacklevel=4)  # the caller of load_kernel / get_locked_kernel
    if override is not None:
        return override
    # A kernels 0.17 lock is checked against the Hub only by a load that may download.
    source = find_lock(lockfile, caller=calling_module(), online=allow_download)
    return _load(repo_id, source, allow_download=allow_download, system=system)


def load_from_lock(repo_id: str, source: LockSource, *, backend: str | None = None) -> ModuleType:
    """``get_locked_kernel`` with its lock found already (``find_lock``), for a caller that finds
    the lock when it is made and loads later: a layer repository (``kernel_deps.layers``)."""
    system = system_for_backend(backend)
    override = _override(repo_id, system)
    if override is not None:
        return override
    return _load(repo_id, source, allow_download=True, system=system)


def not_locked(repo_id: str, source: LockSource) -> KernelNotLockedError:
    """The error for a repo ``source``'s lock does not list."""
    if repo_id in source.declared:  # declared since the lock was made
        return KernelNotLockedError(f"{repo_id} is in [tool.kernels.dependencies] but not locked in {source.path}; "
                                    "run 'kernels lock' (or 'kernels sync')")  # fmt: skip
    return KernelNotLockedError(
        f"{repo_id} is not locked in {source.path}; add it to [tool.kernels.dependencies] and run kernels lock"
    )


def get_kernel(
    repo_id: str,
    *,
    version: int | str | None = None,
    revision: str | None = None,
    backend: str | None = None,
    trust_remote_code: bool | list[str] = False,
    signature_policy: SignaturePolicy | None = None,
) -> ModuleType:
    """Unlocked use, as the Hugging Face library's ``get_kernel``: resolve, download verified, load.

    Exactly one of ``version`` (a major as an int, e.g. ``1``: the ``v1`` branch or the
    newest ``v1.*`` tag; or a PEP 440 range string) and ``revision`` (a branch, tag or
    commit) is required, as in the Hugging Face library. ``trust_remote_code`` has its
    meaning there: ``False`` loads a kernel (and each of its dependencies) only when the
    Hub trusts its publisher; a list of repo ids allows those too; ``True`` allows any.
    With ``signature_policy`` (``SignaturePolicy(identities=(Identity(...),), require=True,
    trusted_root=...)``), every build resolved is held to it as ``kernels lock`` holds a
    project's (SignatureError otherwise), and the loaded build's bundle is verified again
    from the cache, offline, right before it is imported.
    """
    system = system_for_backend(backend)
    override = _override(repo_id, system)
    if override is not None:
        return override
    lock, requirement = resolve_unlocked(repo_id, version, revision, "get_kernel", trust_remote_code, signature_policy)
    source = LockSource(lock, "get_kernel", f"resolved {requirement.describe()}")
    return _load(repo_id, source, allow_download=True, system=system, policy=signature_policy)


def has_kernel(
    repo_id: str,
    *,
    version: int | str | None = None,
    revision: str | None = None,
    backend: str | None = None,
    trust_remote_code: bool | list[str] = False,
) -> bool:
    """Whether the kernel at that version or revision has a build for this machine (or ``backend``).

    Asks the Hub (its refs and file listing at the resolved commit, and, unless
    ``trust_remote_code`` allows it, whether it trusts the publisher, as :func:`get_kernel`);
    downloads nothing. A ``LOCAL_KERNELS`` override answers from its local folder instead.
    """
    from kernel_deps.core.settings import local_overrides
    from kernel_deps.core.variants import NoMatchingVariantError, rank_variants
    from kernel_deps.loader.local import LocalKernelError, local_build_folder

    system = system_for_backend(backend)
    local = local_overrides().get(repo_id)
    if local is not None:
        try:
            local_build_folder(local, system, label=repo_id)
        except (LocalKernelError, NoMatchingVariantError):
            return False
        return True
    lock, _ = resolve_unlocked(repo_id, version, revision, "has_kernel", trust_remote_code)
    kernel = lock.get(repo_id)
    return kernel is not None and bool(rank_variants(kernel.variants, system)[0])


def get_local_kernel(
    repo_path: str | os.PathLike[str], package_name: str | None = None, *, backend: str | None = None
) -> ModuleType:
    """Import a kernel from a local folder (a kernel repo or one build), unverified, with a warning.

    ``package_name`` names the package folder inside a build of the older layout
    (``build/<variant>/<package_name>/__init__.py``); it is found when not given.
    """
    from kernel_deps.loader.local import import_local_kernel

    system = system_for_backend(backend)
    return import_local_kernel(Path(repo_path), system, package_name=package_name, label=str(repo_path))


def _override(repo_id: str, system: SystemInfo, *, stacklevel: int = 3) -> ModuleType | None:
    """The ``LOCAL_KERNELS`` build of ``repo_id``, imported with a warning; None when not overridden.

    The warning points at the user's line: ``stacklevel`` frames above this one (3: the
    caller of a public function that calls this directly)."""
    from kernel_deps.core.settings import local_overrides
    from kernel_deps.loader.local import import_local_kernel

    path = local_overrides().get(repo_id)
    if path is None:
        return None
    return import_local_kernel(path, system, label=repo_id, warn_stacklevel=stacklevel, from_override=True)


def system_for_backend(backend: str | None) -> SystemInfo:
    """This machine's description, or the same machine taking builds for ``backend``.

    As in the Hugging Face library, ``backend`` can only be ``cpu`` or the backend torch
    was built for (the default).
    """
    system = _this_system()
    if backend is None or backend.lower() == system.backend:
        return system
    if backend.lower() == "cpu":
        return replace(system, backend="cpu", backend_version=None)
    choices = "backend='cpu'" if system.backend == "cpu" else f"backend='cpu' or backend={system.backend!r}"
    raise UsageError(
        f"backend={backend!r}: this machine's torch runs {system.backend}; pass {choices}, or leave it out"
    )


def _load(
    repo_id: str, source: LockSource, *, allow_download: bool, system: SystemInfo | None = None,
    policy: SignaturePolicy | None = None,
) -> ModuleType:
    kernel = source.lock.get(repo_id)
    if kernel is None:
        raise not_locked(repo_id, source)
    repo_id = kernel.repo_id  # a repo that redirects is loaded as its destination, which the lock pins
    variant = select_variant(repo_id, sorted(kernel.variants), system or _this_system())
    key = (repo_id, kernel.sha, variant)
    with _load_lock:
        module = _loaded.get(key)
        if module is not None:
            return module
        judge = Judge.of(source, kernel, variant, policy)
        check = verified_variant(source.lock, kernel, variant, allow_download=allow_download, judge=judge)
        module = import_variant(kernel, variant, check)
        module.__kernel_origin__ = KernelOrigin(repo_id, kernel.sha, variant, check.path, source.origin, source.path)
        _loaded[key] = module
        return module


def loaded_kernels() -> dict[tuple[str, str, str], ModuleType]:
    """The kernels loaded in this process, keyed by (repo id, commit, variant)."""
    return dict(_loaded)


__all__ = [
    "Identity",
    "KernelCacheReadError",
    "KernelImportError",
    "KernelIntegrityError",
    "KernelNotCachedError",
    "KernelNotLockedError",
    "KernelOrigin",
    "LockNotFoundError",
    "LockPolicyError",
    "LockSource",
    "SignaturePolicy",
    "StaleLockWarning",
    "find_lock",
    "get_kernel",
    "get_local_kernel",
    "get_locked_kernel",
    "has_kernel",
    "load_from_lock",
    "load_kernel",
    "loaded_kernels",
    "module_name_for",
    "packages_to_distributions",
    "calling_module",
    "system_for_backend",
]

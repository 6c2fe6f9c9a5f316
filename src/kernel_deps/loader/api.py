"""Loading kernels at run time, only as the lock says.

``load_kernel`` and ``get_locked_kernel`` find the project's lock, refuse any repo it
does not list, choose this machine's variant, check every file of that variant against
the locked hash, and import it under a module name unique to repo and commit, so two
kernels (or two versions of one) live side by side in one process. The import itself
(``verified_import``) uses only the files the check covered, and only the bytes it hashed:
no bytecode, no file added later, no file changed later.

Finding the lock, in order: the ``lockfile=`` argument; ``KERNELS_LOCKFILE``; the
``kernels.lock`` embedded in the installed distribution of the package that called the
loader; the ``kernels.lock`` beside the nearest ``pyproject.toml``, walking up from the
working directory (that project's, or none: the walk stops at the first project).

``get_kernel``, ``has_kernel`` and ``get_local_kernel`` take the Hugging Face library's
arguments (docs/loader.md); a ``LOCAL_KERNELS`` override (:mod:`kernel_deps.loader.local`)
replaces any load of the kernels it names with their local build.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import os
import re
import sys
import threading
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from kernel_deps.cache import store as cache
from kernel_deps.core.errors import (
    DigestMismatchError,
    KernelCacheReadError,
    KernelDepsError,
    KernelImportError,
    KernelIntegrityError,
    KernelNotCachedError,
    KernelNotLockedError,
    LockNotFoundError,
    LockPolicyError,
    SignatureError,
    UsageError,
)
from kernel_deps.core.settings import LOCK_NAME, PYPROJECT_NAME, is_offline
from kernel_deps.trust.signers import Identity, SignaturePolicy
from kernel_deps.core.system import SystemInfo, detect_system
from kernel_deps.core.variants import select_variant
from kernel_deps.loader import verified_import
from kernel_deps.loader.verified_import import ROOT_PACKAGE, VerifiedFinder, VerifiedTree, package_of
from kernel_deps.lock.model import LockedKernel, Lockfile
from kernel_deps.lock.read import parse_lock, read_lock

if TYPE_CHECKING:
    from kernel_deps.core.spec import KernelRequirement
    from kernel_deps.hub.index import KernelIndex
    from kernel_deps.trust.signatures import PolicyPlace

_OWN_PACKAGE = __name__.split(".")[0]


@dataclass(frozen=True, slots=True)
class LockSource:
    """The lock a load used and where it came from (for logs)."""

    lock: Lockfile
    origin: str  # "argument", "KERNELS_LOCKFILE", "distribution <name>", "project"
    path: str
    # The signature policy of the project the lock belongs to (its pyproject.toml beside it);
    # None for a lock without one there (embedded in a wheel: judged when the wheel was built).
    policy: SignaturePolicy | None = None


class StaleLockWarning(UserWarning):
    """A lock is loaded from as it is though it no longer agrees with its project's pyproject.toml."""


@dataclass(frozen=True, slots=True)
class KernelOrigin:
    """What a loaded kernel module is: set as ``module.__kernel_origin__``."""

    repo_id: str
    commit: str
    variant: str
    path: Path
    lock_origin: str
    lock_path: str


# -- finding the lock ---------------------------------------------------------------------


def find_lock(lockfile: str | os.PathLike[str] | None = None, *, caller: str | None = None) -> LockSource:
    """The lock to enforce, searched in the documented order."""
    if lockfile is not None:
        return _judged(Path(lockfile), "argument", str(lockfile))
    from_env = os.environ.get("KERNELS_LOCKFILE")
    if from_env:
        return _judged(Path(from_env), "KERNELS_LOCKFILE", from_env)
    caller = caller if caller is not None else calling_module()
    embedded = _embedded_lock(caller) if caller else None
    if embedded is not None:
        return embedded
    return _project_lock(Path.cwd(), caller)


def _project_lock(start: Path, caller: str | None) -> LockSource:
    """The lock of the project around ``start``: the nearest folder with a ``pyproject.toml``,
    walking up. That folder is the project, so the walk stops there, lock or none."""
    where = f" (called from {caller})" if caller else ""
    for folder in [start, *start.parents]:
        if not (folder / PYPROJECT_NAME).is_file():
            continue
        candidate = folder / LOCK_NAME
        if not (candidate.exists() or candidate.is_symlink()):
            raise LockNotFoundError(
                f"the project {folder} has no kernels.lock beside its pyproject.toml{where}: "
                f"run 'kernels lock' in {folder}, or pass lockfile= or set KERNELS_LOCKFILE"
            )
        # One that is no file is named in the error.
        return _judged(candidate, "project", str(candidate))
    raise LockNotFoundError(
        f"no kernels.lock found{where}: pass lockfile=, set KERNELS_LOCKFILE, or run 'kernels lock' in the project"
    )


# Lock path -> ((its text, pyproject.toml's stat), the policy judged with it): judged again only
# when either changes.
_judgements: dict[Path, tuple[tuple, SignaturePolicy | None]] = {}


def _judged(path: Path, origin: str, shown: str) -> LockSource:
    """The lock at ``path``, judged against the ``pyproject.toml`` beside it (when there is one)
    as every command judges a lock (:func:`kernel_deps.lock.freshness.judge_lock`): what the
    project's policy asks and the lock cannot show is refused (LockPolicyError), a lock that no
    longer agrees with the requirements is loaded from with a StaleLockWarning."""
    found = read_lock(path, purpose="load")
    project_dir = path.parent
    key = (found.text, _stat_key(project_dir / PYPROJECT_NAME))
    known = _judgements.get(path)
    if known is None or known[0] != key:
        from kernel_deps.lock.freshness import judge_for_use, read_rules

        rules = read_rules(project_dir)
        warning = judge_for_use(found, rules, shown, "refusing to load from it")
        if warning is not None:
            import warnings

            warnings.warn(warning, StaleLockWarning, stacklevel=5)  # once per change of either file
        known = _judgements[path] = (key, rules.policy if rules is not None else None)
    return LockSource(found.lock, origin, shown, known[1])


def _stat_key(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=1)
def _this_system():
    """This process's system description (torch cannot change under a running process)."""
    return detect_system()


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
def _packages_to_distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _embedded_lock(module_name: str) -> LockSource | None:
    """The kernels.lock inside the installed distribution that provides ``module_name``."""
    package = module_name.split(".")[0]
    if package in ("__main__", ""):
        return None
    dist_names = _packages_to_distributions().get(package)
    if dist_names is None:
        _packages_to_distributions.cache_clear()  # installed since the first lookup?
        dist_names = _packages_to_distributions().get(package, [])
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
            lock = parse_lock(text, source=f"{dist_name}:{LOCK_NAME}", purpose="load").lock
            return LockSource(lock, f"distribution {dist_name}", source)
    return None


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
    source = find_lock(lockfile, caller=calling_module())
    return _load(repo_id, source, allow_download=allow_download, system=system)


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
    lock, requirement = _resolve_unlocked(repo_id, version, revision, "get_kernel", trust_remote_code, signature_policy)
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
    lock, _ = _resolve_unlocked(repo_id, version, revision, "has_kernel", trust_remote_code)
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


def _resolve_unlocked(
    repo_id: str, version: int | str | None, revision: str | None, function: str, trust_remote_code: object = False,
    signature_policy: SignaturePolicy | None = None,
) -> tuple[Lockfile, "KernelRequirement"]:
    """A one-kernel lock (its dependencies included) for ``version`` or ``revision``, from
    the Hub; every kernel of it trusted as ``trust_remote_code`` says, else UntrustedPublisherError."""
    from kernel_deps.commands.lock import resolve_in_memory
    from kernel_deps.core.spec import InvalidEntry, requirement_from_value
    from kernel_deps.hub.client import HubClient
    from kernel_deps.resolve.resolver import Requester

    expected = (
        "pass exactly one of version= (a major, e.g. version=1, or a range such as '>=1.2,<2') "
        "and revision= (a branch, tag or commit)"
    )
    if (version is None) == (revision is None):
        given = "both" if version is not None else "neither"
        raise UsageError(f"{function}({repo_id!r}): {expected}; {given} given")
    if not isinstance(trust_remote_code, bool) and not (
        isinstance(trust_remote_code, list) and all(isinstance(item, str) for item in trust_remote_code)
    ):
        raise UsageError(
            f"{function}({repo_id!r}): trust_remote_code={trust_remote_code!r}: expected True, False, "
            "or a list of repo ids to allow"
        )
    value: object = {"revision": revision} if revision is not None else version
    try:
        requirement = requirement_from_value(repo_id, value)
    except InvalidEntry as exc:
        argument = f"revision={revision!r}" if revision is not None else f"version={version!r}"
        hint = f"; {expected}" if exc.hint else ""
        raise UsageError(f"{function}({repo_id!r}, {argument}): {exc.problem}{hint}") from None
    requester = Requester(
        f"{function}()",
        f"pass another version= or revision= to {function}()",
        f"pass a narrower version= or a revision= to {function}()",
    )
    # The Hub is asked about each publisher the argument does not allow, while resolving.
    allowed = None if trust_remote_code is True else tuple(trust_remote_code or ())

    def judge(lock: Lockfile, index: KernelIndex) -> Lockfile:
        if allowed is not None:
            _check_publishers(lock, allowed, index, function)
        return lock

    if signature_policy is not None:
        _check_trusted_root(signature_policy, f"{function}({repo_id!r})")
    try:
        lock, _ = resolve_in_memory(HubClient(), [requirement], publishers=allowed, judge=judge,
                                    policy=signature_policy, requester=requester)  # fmt: skip
    except (SignatureError, DigestMismatchError) as exc:
        if not exc.refused:
            raise
        from kernel_deps.trust.signatures import CALLER_POLICY, refusal

        raise refusal(exc.refused, outcome=f"{function}({repo_id!r}) refused", place=CALLER_POLICY) from None
    return lock, requirement


def _check_trusted_root(policy: SignaturePolicy, call: str) -> None:
    """UsageError naming the call when the trusted root its ``signature_policy`` names cannot be used."""
    if policy.trusted_root is None:
        return
    from kernel_deps.trust.bundles import TrustedRootError, check_trusted_root

    try:
        check_trusted_root(policy.trusted_root)
    except TrustedRootError as exc:
        raise UsageError(f"{call}: signature_policy's trusted_root: {exc}") from None


def _check_publishers(lock: Lockfile, allowed: tuple[str, ...], index: KernelIndex, function: str) -> None:
    """As the Hugging Face library: each kernel's repo id in ``allowed``, or its publisher
    trusted by the Hub; else UntrustedPublisherError naming the first other one."""
    from kernel_deps.core.errors import UntrustedPublisherError
    from kernel_deps.core.spec import org_of

    for kernel in lock.kernels:
        if kernel.repo_id in allowed:
            continue
        answer = index.publisher(org_of(kernel.repo_id))
        if not answer.trusted:
            raise UntrustedPublisherError(
                f"{function}(): {kernel.repo_id} is not from a trusted publisher: {answer.reason}; pass "
                f"trust_remote_code=True, or a list of repo ids including {kernel.repo_id!r}, to load it anyway"
            )


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
        raise KernelNotLockedError(
            f"{repo_id} is not locked in {source.path}; add it to [tool.kernels.dependencies] and run kernels lock"
        )
    repo_id = kernel.repo_id  # a repo that redirects is loaded as its destination, which the lock pins
    variant = select_variant(repo_id, sorted(kernel.variants), system or _this_system())
    key = (repo_id, kernel.sha, variant)
    with _load_lock:
        module = _loaded.get(key)
        if module is not None:
            return module
        judge = _Judge.of(source, kernel, variant, policy)
        check = _verified_variant(source.lock, kernel, variant, allow_download=allow_download, judge=judge)
        module = _import_variant(kernel, variant, check)
        module.__kernel_origin__ = KernelOrigin(repo_id, kernel.sha, variant, check.path, source.origin, source.path)
        _loaded[key] = module
        return module


@dataclass(frozen=True, slots=True)
class _Judge:
    """The signature policy a load holds a build to, and where that policy is written (for messages)."""

    policy: SignaturePolicy
    place: PolicyPlace

    @staticmethod
    def of(source: LockSource, kernel: LockedKernel, variant: str, policy: SignaturePolicy | None) -> _Judge:
        """``get_kernel``'s ``signature_policy``; else, for a build the lock records a signer for,
        the policy of the project whose lock it is (its pyproject.toml beside the lock), or the
        default policy (Sigstore's public-good root) for a lock with none beside it."""
        from kernel_deps.trust.signatures import CALLER_POLICY, NO_PROJECT_POLICY, PROJECT_POLICY

        if policy is not None:
            return _Judge(policy, CALLER_POLICY)
        if source.policy is not None:  # read with the lock's judgement (find_lock)
            return _Judge(source.policy, PROJECT_POLICY)
        return _Judge(SignaturePolicy(), NO_PROJECT_POLICY)

    def refuse(self, kernel: LockedKernel, variant: str, check: cache.VariantCheck) -> None:
        """The build's metadata.json digest against every file of ``check`` and, when the lock
        records its signer, its bundle verified offline to exactly that signer; else the error."""
        from kernel_deps.trust.signatures import check_cached_variant, refusal

        try:
            refused = check_cached_variant(kernel, variant, check.path, check.files, self.policy)
        except OSError as exc:
            raise KernelCacheReadError(
                f"{kernel.repo_id} {variant}: cannot read {exc.filename or check.path} ({exc.strerror or exc}); "
                "check the cache's permissions, or run 'kernels download' to repair it"
            ) from None
        if refused:
            raise refusal(refused, outcome=f"refusing to load {kernel.repo_id} {variant}", place=self.place)


def _verified_variant(
    lock: Lockfile, kernel: LockedKernel, variant: str, *, allow_download: bool, judge: _Judge
) -> cache.VariantCheck:
    """The check of this build's files against the lock, its digest and recorded signer held
    too, on every first load in a process: from the cache, an installed kernel wheel, or (with
    ``allow_download``) a download through the same checks."""
    expected = kernel.variants[variant].hash
    check = _check(kernel, variant, expected)
    if not check.present:
        installed = _installed_wheel(kernel, variant, expected)
        if installed is not None:
            judge.refuse(kernel, variant, installed)
            return installed
    if not check.present and allow_download:
        from kernel_deps.commands.download import download_lock

        if not is_offline():
            # The whole lock, so the entry keeps its dependencies' entries; only this variant.
            download_lock(lock, variants_for=lambda k: [variant] if k.repo_id == kernel.repo_id else [],
                          policy=judge.policy, place=judge.place)  # fmt: skip
            check = _check(kernel, variant, expected)
    if not check.present:
        from kernel_deps.cache.installed import unusable_wheels

        unusable = "".join(f"; not used: {line}" for line in unusable_wheels(kernel.repo_id))
        raise KernelNotCachedError(
            f"{kernel.repo_id} {variant} at {kernel.sha[:12]} is not in the cache ({cache.cache_root()}); "
            f"run 'kernels download' for this project first{unusable}"
        )
    if not check.ok:
        details = "; ".join(_describe(p) for p in check.problems)
        raise KernelIntegrityError(
            f"refusing to load {kernel.repo_id} {variant}: the cached files differ from kernels.lock: {details}; "
            "run 'kernels download' to repair the cache"
        )
    judge.refuse(kernel, variant, check)
    return check


def _installed_wheel(kernel: LockedKernel, variant: str, expected: str) -> cache.VariantCheck | None:
    """The check of an installed kernel wheel of this commit and variant (``kernels to-wheel``),
    when one is installed; KernelIntegrityError naming each file that differs from the lock."""
    from kernel_deps.cache.installed import check_installed, find_installed

    wheel = find_installed(kernel.repo_id, kernel.sha, variant)
    if wheel is None:
        return None
    try:
        check = check_installed(wheel, expected)
    except OSError as exc:
        raise KernelCacheReadError(
            f"{kernel.repo_id} {variant}: cannot read {exc.filename or wheel.folder} ({exc.strerror or exc}); "
            f"check the permissions of {wheel.label}"
        ) from None
    if not check.ok:
        details = "; ".join(_describe(p) for p in check.problems)
        raise KernelIntegrityError(
            f"refusing to load {kernel.repo_id} {variant}: {wheel.label} differs from kernels.lock: {details}; "
            f"reinstall it (pip install --force-reinstall --require-hashes -r requirements.txt)"
        )
    return check


def _check(kernel: LockedKernel, variant: str, expected: str) -> cache.VariantCheck:
    try:
        return cache.check_variant(kernel.repo_id, kernel.sha, variant, expected)
    except OSError as exc:
        where = exc.filename or cache.cache_root()
        raise KernelCacheReadError(
            f"{kernel.repo_id} {variant}: cannot read {where} ({exc.strerror or exc}); "
            "check the cache's permissions, or run 'kernels download' to repair it"
        ) from None


def _describe(problem: cache.FileProblem) -> str:
    if problem.kind == "outside-cache":
        return f"{problem.path} links outside the cache (to {problem.got})"
    if problem.expected and problem.got:
        return f"{problem.path} {problem.kind} (expected {problem.expected}, got {problem.got})"
    return f"{problem.path} {problem.kind}"


def module_name_for(repo_id: str, commit: str) -> str:
    """The private module name a kernel is imported under, unique to repo and commit.

    The readable part folds characters together (``acme-kernels`` and ``acme_kernels``
    give the same); the hash of the exact repo id after it keeps the names apart.
    """
    slug = re.sub(r"[^0-9A-Za-z_]", "_", repo_id.replace("/", "__"))
    tag = hashlib.sha256(repo_id.encode("utf-8")).hexdigest()[:8]
    return f"{ROOT_PACKAGE}.{slug}_{tag}_{commit[:12]}"


def _import_variant(kernel: LockedKernel, variant: str, check: cache.VariantCheck) -> ModuleType:
    label = f"{kernel.repo_id} {variant}"
    package = package_of(check.files)
    if package is None:
        raise KernelImportError(f"{label}: no Python package in {check.path}")
    name = module_name_for(kernel.repo_id, kernel.sha)
    other = VerifiedFinder.roots.get(name)
    if other is not None and other.label != label:
        raise KernelImportError(
            f"{label}: cannot load it beside {other.label}, already imported as {name} in this process; "
            "load one variant of a kernel commit per process"
        )
    verified_import.install()
    VerifiedFinder.roots[name] = VerifiedTree(label, check.path, package, dict(check.files))
    try:
        module = importlib.import_module(name)
    except BaseException as exc:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[loaded]
        VerifiedFinder.roots.pop(name, None)
        if isinstance(exc, KernelDepsError) or not isinstance(exc, Exception):
            raise
        raise KernelImportError(f"{label} failed to import: {type(exc).__name__}: {exc}") from exc
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
    "load_kernel",
    "loaded_kernels",
    "system_for_backend",
]

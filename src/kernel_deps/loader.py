"""Loading kernels at run time, only as the lock says.

``load_kernel`` and ``get_locked_kernel`` find the project's lock, refuse any repo it
does not list, choose this machine's variant, check every file of that variant against
the locked hash, and import it under a module name unique to repo and commit, so two
kernels (or two versions of one) live side by side in one process. Imports from a
verified variant never read or write ``__pycache__``: bytecode is not covered by the lock.

Finding the lock, in order: the ``lockfile=`` argument; ``KERNELS_LOCKFILE``; the
``kernels.lock`` embedded in the installed distribution of the package that called the
loader; the nearest ``kernels.lock`` beside a ``pyproject.toml``, walking up from the
working directory.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import os
import re
import sys
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from kernel_deps import cache
from kernel_deps.errors import (
    KernelDepsError,
    KernelImportError,
    KernelIntegrityError,
    KernelNotCachedError,
    KernelNotLockedError,
    LockNotFoundError,
)
from kernel_deps.lockfile import LockedKernel, Lockfile, read_lockfile
from kernel_deps.settings import LOCK_NAME, PYPROJECT_NAME, is_offline
from kernel_deps.variants import detect_system, select_variant

_OWN_PACKAGE = __name__.split(".")[0]


@dataclass(frozen=True, slots=True)
class LockSource:
    """The lock a load used and where it came from (for logs)."""

    lock: Lockfile
    origin: str  # "argument", "KERNELS_LOCKFILE", "distribution <name>", "project"
    path: str


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
        return LockSource(_read_lock(Path(lockfile)), "argument", str(lockfile))
    from_env = os.environ.get("KERNELS_LOCKFILE")
    if from_env:
        return LockSource(_read_lock(Path(from_env)), "KERNELS_LOCKFILE", from_env)
    caller = caller if caller is not None else calling_module()
    embedded = _embedded_lock(caller) if caller else None
    if embedded is not None:
        return embedded
    for folder in [Path.cwd(), *Path.cwd().parents]:
        candidate = folder / LOCK_NAME
        if candidate.is_file() and (folder / PYPROJECT_NAME).is_file():
            return LockSource(_read_lock(candidate), "project", str(candidate))
    where = f" (called from {caller})" if caller else ""
    raise LockNotFoundError(
        f"no kernels.lock found{where}: pass lockfile=, set KERNELS_LOCKFILE, or run 'kernels lock' in the project"
    )


_parsed_locks: dict[Path, tuple[tuple[int, int], Lockfile]] = {}


def _read_lock(path: Path) -> Lockfile:
    """``read_lockfile``, parsed again only when the file changes (size or mtime)."""
    try:
        stat = path.stat()
        key = (stat.st_mtime_ns, stat.st_size)
    except OSError:
        return read_lockfile(path)  # raises the usual, clear error
    cached = _parsed_locks.get(path)
    if cached is None or cached[0] != key:
        cached = _parsed_locks[path] = (key, read_lockfile(path))
    return cached[1]


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
            return LockSource(Lockfile.from_json(text, source=f"{dist_name}:{LOCK_NAME}"), f"distribution {dist_name}", source)
    return None


# -- loading ------------------------------------------------------------------------------

_loaded: dict[tuple[str, str, str], ModuleType] = {}
_load_lock = threading.RLock()


def load_kernel(repo_id: str, *, lockfile: str | os.PathLike[str] | None = None) -> ModuleType:
    """The locked kernel's module, from the cache only; never touches the network."""
    source = find_lock(lockfile, caller=calling_module())
    return _load(repo_id, source, allow_download=False)


def get_locked_kernel(repo_id: str, *, lockfile: str | os.PathLike[str] | None = None) -> ModuleType:
    """The locked kernel's module, downloading the locked variant (verified) if absent."""
    source = find_lock(lockfile, caller=calling_module())
    return _load(repo_id, source, allow_download=True)


def get_kernel(repo_id: str, version: str | int | None = None, revision: str | None = None) -> ModuleType:
    """Unlocked use for exploration: resolve a range or revision, download verified, load."""
    from kernel_deps.hub import HubClient
    from kernel_deps.index import KernelIndex
    from kernel_deps.locking import build_lockfile
    from kernel_deps.resolver import resolve
    from kernel_deps.spec import parse_requirement

    if version is not None and revision is not None:
        raise KernelDepsError(f"get_kernel({repo_id!r}): pass version or revision, not both")
    value: object = {"revision": revision} if revision is not None else (version if version is not None else ">=0.0.0a0")
    requirement = parse_requirement(repo_id, value, source="get_kernel()")
    hub = HubClient()
    with hub.operation(), KernelIndex(hub) as index:  # resolving has one time budget; downloading its own
        resolution = resolve([requirement], index)
        lock = build_lockfile(resolution, [requirement], index)
    return _load(repo_id, LockSource(lock, "get_kernel", f"resolved {requirement.describe()}"), allow_download=True)


def _load(repo_id: str, source: LockSource, *, allow_download: bool) -> ModuleType:
    kernel = source.lock.get(repo_id)
    if kernel is None:
        raise KernelNotLockedError(
            f"{repo_id} is not locked in {source.path}; add it to [tool.kernels.dependencies] and run kernels lock"
        )
    variant = select_variant(repo_id, sorted(kernel.variants), _this_system())
    key = (repo_id, kernel.sha, variant)
    with _load_lock:
        module = _loaded.get(key)
        if module is not None:
            return module
        folder = _verified_variant(kernel, variant, allow_download=allow_download)
        module = _import_variant(kernel, variant, folder)
        module.__kernel_origin__ = KernelOrigin(repo_id, kernel.sha, variant, folder, source.origin, source.path)
        _loaded[key] = module
        return module


def _verified_variant(kernel: LockedKernel, variant: str, *, allow_download: bool) -> Path:
    expected = kernel.variants[variant].hash
    check = cache.check_variant(kernel.repo_id, kernel.sha, variant, expected)
    if not check.present and allow_download:
        from kernel_deps.download import download_lock

        if not is_offline():
            download_lock(Lockfile(kernels=(kernel,)), variants_for=lambda _: [variant])
            check = cache.check_variant(kernel.repo_id, kernel.sha, variant, expected)
    if not check.present:
        raise KernelNotCachedError(
            f"{kernel.repo_id} {variant} at {kernel.sha[:12]} is not in the cache ({cache.cache_root()}); "
            "run 'kernels download' for this project first"
        )
    if not check.ok:
        details = "; ".join(
            f"{p.path} {p.kind}" + (f" (expected {p.expected}, got {p.got})" if p.expected and p.got else "")
            for p in check.problems
        )
        raise KernelIntegrityError(
            f"refusing to load {kernel.repo_id} {variant}: the cached files differ from kernels.lock: {details}; "
            "run 'kernels download' to repair the cache"
        )
    return check.path


def module_name_for(repo_id: str, commit: str) -> str:
    """The private module name a kernel is imported under, unique to repo and commit."""
    slug = re.sub(r"[^0-9A-Za-z_]", "_", repo_id.replace("/", "__"))
    return f"_kernel_deps_loaded.{slug}_{commit[:12]}"


def _import_variant(kernel: LockedKernel, variant: str, folder: Path) -> ModuleType:
    package_dir = _package_dir(kernel, variant, folder)
    name = module_name_for(kernel.repo_id, kernel.sha)
    _ensure_namespace_root()
    _VerifiedFinder.roots[name] = package_dir
    spec = _VerifiedFinder.find_spec(name, None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[loaded]
        _VerifiedFinder.roots.pop(name, None)
        if isinstance(exc, Exception):
            raise KernelImportError(f"{kernel.repo_id} {variant} failed to import: {type(exc).__name__}: {exc}") from exc
        raise
    return module


def _package_dir(kernel: LockedKernel, variant: str, folder: Path) -> Path:
    """The variant folder itself, or (older layout) its single package subfolder."""
    if (folder / "__init__.py").is_file():
        return folder
    packages = [p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file()]
    if len(packages) == 1:
        return packages[0]
    raise KernelImportError(f"{kernel.repo_id} {variant}: no Python package in {folder}")


def _ensure_namespace_root() -> None:
    if "_kernel_deps_loaded" not in sys.modules:
        root = ModuleType("_kernel_deps_loaded")
        root.__path__ = []  # a package with no files: its children come from _VerifiedFinder
        sys.modules["_kernel_deps_loaded"] = root
    if _VerifiedFinder not in sys.meta_path:
        sys.meta_path.insert(0, _VerifiedFinder)


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles from the verified source every time: no bytecode read or written."""

    def path_stats(self, path: str):  # noqa: D401 - importlib protocol
        raise OSError("kernel-deps does not use bytecode for verified kernels")


class _VerifiedFinder:
    """Finds modules of loaded kernels only inside their verified variant folders."""

    roots: dict[str, Path] = {}

    @classmethod
    def find_spec(cls, fullname: str, path, target=None):
        root_name = next((r for r in cls.roots if fullname == r or fullname.startswith(r + ".")), None)
        if root_name is None:
            return None
        base = cls.roots[root_name]
        parts = fullname[len(root_name):].lstrip(".").split(".") if fullname != root_name else []
        folder = base.joinpath(*parts[:-1]) if parts else base
        if not parts:
            return importlib.util.spec_from_file_location(
                fullname, base / "__init__.py", loader=_SourceOnlyLoader(fullname, str(base / "__init__.py")),
                submodule_search_locations=[str(base)],
            )
        leaf = parts[-1]
        package_init = folder / leaf / "__init__.py"
        if package_init.is_file():
            return importlib.util.spec_from_file_location(
                fullname, package_init, loader=_SourceOnlyLoader(fullname, str(package_init)),
                submodule_search_locations=[str(folder / leaf)],
            )
        module_file = folder / f"{leaf}.py"
        if module_file.is_file():
            return importlib.util.spec_from_file_location(
                fullname, module_file, loader=_SourceOnlyLoader(fullname, str(module_file))
            )
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            extension = folder / f"{leaf}{suffix}"
            if extension.is_file():
                return importlib.util.spec_from_file_location(
                    fullname, extension, loader=importlib.machinery.ExtensionFileLoader(fullname, str(extension))
                )
        return None


def loaded_kernels() -> dict[tuple[str, str, str], ModuleType]:
    """The kernels loaded in this process, keyed by (repo id, commit, variant)."""
    return dict(_loaded)


__all__ = [
    "KernelImportError",
    "KernelIntegrityError",
    "KernelNotCachedError",
    "KernelNotLockedError",
    "KernelOrigin",
    "LockNotFoundError",
    "LockSource",
    "find_lock",
    "get_kernel",
    "get_locked_kernel",
    "load_kernel",
    "loaded_kernels",
]

"""Local kernel builds for development: ``get_local_kernel`` and the ``LOCAL_KERNELS`` override.

``LOCAL_KERNELS="org/name=/path/to/build:org/other=/path"`` makes every load of those
kernels (``load_kernel``, ``get_locked_kernel``, ``get_kernel``, ``has_kernel``) use the
local folder instead of the Hub or the lock, as the Hugging Face ``kernels`` library does.
Such a load is not verified against any lock, so each one warns
(:class:`LocalKernelWarning`), and ``kernels verify`` fails while the variable is set, so
a development override cannot ship by accident.

A local folder is a kernel repo (``build/<variant>/`` or ``<variant>/`` folders, this
machine's build chosen as for a Hub repo) or one build folder (``__init__.py`` at its top,
or in one package folder: the older layout, whose folder ``package_name`` names).
The import is a plain one, under a private module name unique to the folder. The module
carries ``__kernel_origin__`` as a locked load's does, saying it is local: ``lock_origin``
``"local"``, ``lock_path`` which way it came (``LOCAL_KERNELS`` or ``get_local_kernel``),
no ``commit``, the build folder as ``path`` and its ``variant`` (None for a folder that is
one build and not named as a variant).

``LOCAL_KERNELS`` itself is parsed by :func:`kernel_deps.core.settings.local_overrides` (``kernels
verify`` reads it too). Imports ``errors``, ``system``, ``variants``, ``settings``, ``origin``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import linecache
import re
import sys
import warnings
from pathlib import Path
from types import ModuleType

from kernel_deps.core.errors import KernelImportError, UsageError
from kernel_deps.core.settings import BUILD_DIR, LOCAL_KERNELS_ENV
from kernel_deps.core.system import SystemInfo
from kernel_deps.core.variants import is_valid_variant_name, select_variant
from kernel_deps.loader.origin import LOCAL, KernelOrigin

_MODULE_PREFIX = "_kernel_deps_local"


class LocalKernelWarning(UserWarning):
    """A kernel was loaded from a local folder (``LOCAL_KERNELS`` or ``get_local_kernel``), unverified."""


class LocalKernelError(UsageError):
    """A local kernel folder (from ``LOCAL_KERNELS`` or ``get_local_kernel``) holds no loadable build."""
    kind = "local-kernel-invalid"


def local_build_folder(path: Path, system: SystemInfo, *, label: str) -> Path:
    """The build folder to import from ``path``: this machine's variant of a local repo, or ``path`` itself."""
    if not path.is_dir():
        raise LocalKernelError(
            f"{path} is not a folder",
            subject=label,
            hint="point it at a kernel repo or build folder",
        )
    for base in (path, path / BUILD_DIR):
        try:
            variants = [child.name for child in base.iterdir() if child.is_dir() and is_valid_variant_name(child.name)]
        except OSError:
            continue
        if variants:
            return base / select_variant(label, variants, system)
    return path


def import_local_kernel(
    path: Path,
    system: SystemInfo,
    *,
    package_name: str | None = None,
    label: str,
    warn_stacklevel: int = 2,
    from_override: bool = False,
) -> ModuleType:
    """Import the kernel build in ``path`` (see the module docstring), warning that it is unverified.

    ``from_override``: the load comes from ``LOCAL_KERNELS``, which the warning then says to unset.
    """
    folder = local_build_folder(Path(path), system, label=label)
    init = _package_init(folder, package_name, label)
    name = _module_name(init.parent)
    hint = (
        f"unset {LOCAL_KERNELS_ENV} before shipping ('kernels verify' fails while it is set)"
        if from_override
        else "lock the kernel and load it with load_kernel before shipping"
    )
    _warn_every_time(
        f"{label}: loading the local build in {init.parent}, not a locked and verified kernel; {hint}",
        warn_stacklevel + 1,
    )
    module = sys.modules.get(name)
    if module is not None:
        return module
    variant = folder.name if folder != Path(path) or is_valid_variant_name(folder.name) else None
    way = LOCAL_KERNELS_ENV if from_override else "get_local_kernel"
    origin = KernelOrigin(label, None, variant, folder, LOCAL, way)
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(init.parent)])
    if spec is None or spec.loader is None:
        raise KernelImportError(f"cannot import {init}", subject=label)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[loaded]
        if not isinstance(exc, Exception):
            raise
        raise KernelImportError(
            f"the local build in {init.parent} failed to import: {type(exc).__name__}: {exc}",
            subject=label,
        ) from exc
    module.__kernel_origin__ = origin  # as a locked load sets it, once imported
    return module


def _package_init(folder: Path, package_name: str | None, label: str) -> Path:
    candidates = [folder / package_name / "__init__.py"] if package_name else []
    candidates.append(folder / "__init__.py")
    if not package_name:
        try:
            candidates += sorted(child / "__init__.py" for child in folder.iterdir() if (child / "__init__.py").is_file())
        except OSError:
            pass
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    named = f" (no {package_name}/__init__.py or __init__.py)" if package_name else " (no __init__.py)"
    raise LocalKernelError(
        f"no kernel build in {folder}{named}",
        subject=label,
        hint="point it at a kernel repo or build folder",
    )


def _module_name(package_dir: Path) -> str:
    resolved = str(package_dir.resolve())
    slug = re.sub(r"[^0-9A-Za-z_]", "_", package_dir.name)
    return f"{_MODULE_PREFIX}_{slug}_{hashlib.sha256(resolved.encode('utf-8')).hexdigest()[:12]}"


def _warn_every_time(message: str, stacklevel: int) -> None:
    """Warn on every call: no registry, so Python's once-per-place default does not hide repeats."""
    frame = sys._getframe(stacklevel)
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    # The caller's source line is looked up through linecache, which treats a loader that
    # cannot give the source as "no source". warn_explicit's module_globals would ask the
    # loader itself and let its error out: under `python -c`, stdin or the REPL, __main__'s
    # loader is BuiltinImporter, which raises ImportError for '__main__'.
    linecache.getlines(filename, frame.f_globals)
    module = frame.f_globals.get("__name__", "<unknown>")
    warnings.warn_explicit(message, LocalKernelWarning, filename, lineno, module=module, registry=None)


__all__ = [
    "LocalKernelError",
    "LocalKernelWarning",
    "import_local_kernel",
    "local_build_folder",
]

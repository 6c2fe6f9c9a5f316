"""A checked build imported under a private module name unique to its repo id and commit.

The import itself (:mod:`kernel_deps.loader.verified_import`) serves every module of the
build from the files the check hashed only, so two kernels (or two versions of one) live
side by side in one process.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import sys
from types import ModuleType

from kernel_deps.cache import store as cache
from kernel_deps.core.errors import KernelDepsError, KernelImportError
from kernel_deps.loader import verified_import
from kernel_deps.loader.verified_import import ROOT_PACKAGE, VerifiedFinder, VerifiedTree, package_of
from kernel_deps.lock.model import LockedKernel


def module_name_for(repo_id: str, commit: str) -> str:
    """The private module name a kernel is imported under, unique to repo and commit.

    The readable part folds characters together (``acme-kernels`` and ``acme_kernels``
    give the same); the hash of the exact repo id after it keeps the names apart.
    """
    slug = re.sub(r"[^0-9A-Za-z_]", "_", repo_id.replace("/", "__"))
    tag = hashlib.sha256(repo_id.encode("utf-8")).hexdigest()[:8]
    return f"{ROOT_PACKAGE}.{slug}_{tag}_{commit[:12]}"


def import_variant(kernel: LockedKernel, variant: str, check: cache.VariantCheck) -> ModuleType:
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
    VerifiedFinder.roots[name] = VerifiedTree(label, check.path, package, check.files)
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

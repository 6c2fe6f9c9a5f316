"""Hugging Face ``kernels``' layer mappings, held to kernels.lock.

``LockedLayerRepository`` and ``LockedFuncRepository`` go into ``use_kernel_mapping`` and
``register_kernel_mapping`` as the Hugging Face repositories do, and load through
kernel-deps' loader (``kernel_deps.layers.repositories``); ``enforce_lock`` puts them in
place of the Hub repositories of a kernel mapping (``kernel_deps.layers.mapping``);
``kernel_deps.layers.exports`` lists what a build exports without importing it.
Nothing here imports the Hugging Face library until ``enforce_lock`` is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "HFKernelsMissingError", "LayerNotFoundError", "LocalRepositoryWarning", "LockedFuncRepository",
    "LockedLayerRepository", "enforce_lock",
]

if TYPE_CHECKING:
    from kernel_deps.layers.mapping import HFKernelsMissingError, LocalRepositoryWarning, enforce_lock
    from kernel_deps.layers.repositories import LayerNotFoundError, LockedFuncRepository, LockedLayerRepository

_HOMES = {
    "HFKernelsMissingError": "mapping",
    "LayerNotFoundError": "repositories",
    "LockedFuncRepository": "repositories",
    "LockedLayerRepository": "repositories",
    "LocalRepositoryWarning": "mapping",
    "enforce_lock": "mapping",
}


def __getattr__(name: str) -> Any:
    # Imported on first use: `kernel_deps.layers.exports` (tree, verify) stays free of the loader.
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'kernel_deps.layers' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"kernel_deps.layers.{home}"), name)

"""kernel-deps: lock, download, verify and load compute kernels from the Hugging Face Hub."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = [
    "Identity", "SignaturePolicy", "get_kernel", "get_local_kernel", "get_locked_kernel", "has_kernel", "load_kernel",
]

if TYPE_CHECKING:
    from kernel_deps.loader.api import (
        Identity, SignaturePolicy, get_kernel, get_local_kernel, get_locked_kernel, has_kernel, load_kernel,
    )


def __getattr__(name: str) -> Any:
    # The loader is imported on first use: `import kernel_deps` (and the CLI) stays light.
    if name in __all__:
        from kernel_deps.loader import api as loader

        return getattr(loader, name)
    raise AttributeError(f"module 'kernel_deps' has no attribute {name!r}")

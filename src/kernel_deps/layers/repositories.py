"""Layer and function repositories for Hugging Face ``kernels``' mappings, loaded from the lock.

They satisfy the Hugging Face library's repository protocols (``load()`` returning an
``nn.Module`` class, ``layer_name`` or ``func_name``, hashable and comparable), so they go
into ``use_kernel_mapping`` and ``register_kernel_mapping`` unchanged and ``kernelize``
calls them as it calls its own. The lock is found when one is made, as the Hugging Face
``LockedLayerRepository`` finds its own (the ``lockfile=`` argument, ``KERNELS_LOCKFILE``,
the calling package's embedded lock, the project's), and a repo it does not pin is refused
there. ``load()`` goes through the loader (``kernel_deps.loader.api.load_from_lock``): the
lock's commit, this machine's build, every file verified before import, signatures and
publishers as the lock records them. Nothing here imports the Hugging Face library.
"""

from __future__ import annotations

import inspect
import os
from types import ModuleType
from typing import Any

from kernel_deps.core.errors import KernelDepsError
from kernel_deps.loader.finding import LockSource, calling_module, find_lock


class LayerNotFoundError(KernelDepsError, ValueError):
    """The locked kernel does not export the layer or function a repository names
    (a ``ValueError``, as the Hugging Face library raises)."""


class _LockedRepository:
    """What both repositories share: the lock found once, the kernel loaded through the loader."""

    __slots__ = ("_repo_id", "_name", "_source", "_commit")
    _kind = ""

    def __init__(self, repo_id: str, name: str, lockfile: str | os.PathLike[str] | None, source: LockSource | None):
        if source is None:
            source = find_lock(lockfile, caller=calling_module(), online=True)  # it loads as get_locked_kernel
        kernel = source.lock.get(repo_id)
        if kernel is None:
            from kernel_deps.loader.api import not_locked

            raise not_locked(repo_id, source)
        self._repo_id = repo_id
        self._name = name
        self._source = source
        self._commit = kernel.sha

    @classmethod
    def _bound(cls, repo_id: str, name: str, source: LockSource) -> _LockedRepository:
        """One for ``source``'s lock, found already (``enforce_lock`` finds it once for a whole mapping)."""
        made = cls.__new__(cls)
        _LockedRepository.__init__(made, repo_id, name, None, source)
        return made

    @property
    def repo_id(self) -> str:
        return self._repo_id

    @property
    def commit(self) -> str:
        """The commit the lock pins."""
        return self._commit

    @property
    def lock_path(self) -> str:
        """Where the lock came from, as the loader names it."""
        return self._source.path

    def _kernel(self) -> ModuleType:
        from kernel_deps.loader.api import load_from_lock

        return load_from_lock(self._repo_id, self._source)

    def _key(self) -> tuple[Any, ...]:
        return (type(self), self._repo_id, self._name, self._source.path, self._commit)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _LockedRepository) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    # Immutable: the Hugging Face library deep-copies a mapping when a context opens.
    def __copy__(self) -> _LockedRepository:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _LockedRepository:
        return self

    def __str__(self) -> str:
        return f"`{self._repo_id}` (revision: {self._commit}, locked in {self._source.path}), {self._kind} `{self._name}`"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._repo_id!r}, {self._kind}_name={self._name!r}) "
            f"# {self._commit[:12]} from {self._source.path}"
        )


class LockedLayerRepository(_LockedRepository):
    """A layer of a locked kernel: ``kernel.layers.<layer_name>`` of the build the lock pins.

    ``LockedLayerRepository("org/activation", layer_name="SiluAndMul")`` in a kernel mapping
    replaces the layer by the locked kernel's, verified before it is imported; a repo the
    lock does not pin raises ``KernelNotLockedError`` here, before anything loads.
    """

    __slots__ = ()
    _kind = "layer"

    def __init__(self, repo_id: str, *, layer_name: str, lockfile: str | os.PathLike[str] | None = None):
        super().__init__(repo_id, layer_name, lockfile, None)

    @property
    def layer_name(self) -> str:
        return self._name

    def load(self) -> type:
        """The layer class, from the kernel the loader imported from verified files."""
        kernel = self._kernel()
        layers = getattr(kernel, "layers", None)
        if layers is None:
            raise LayerNotFoundError(f"{self._repo_id} at {self._commit[:12]} defines no layers (no `layers` module)")
        layer = getattr(layers, self._name, None)
        if layer is None:
            found = sorted(n for n, value in vars(layers).items() if inspect.isclass(value) and not n.startswith("_"))
            raise LayerNotFoundError(
                f"{self._repo_id} at {self._commit[:12]} has no layer {self._name!r}; "
                f"its layers module defines: {', '.join(found) or 'none'}"
            )
        return layer


class LockedFuncRepository(_LockedRepository):
    """A function of a locked kernel (``kernel.<func_name>``), as a layer ``kernelize`` can use."""

    __slots__ = ()
    _kind = "function"

    def __init__(self, repo_id: str, *, func_name: str, lockfile: str | os.PathLike[str] | None = None):
        super().__init__(repo_id, func_name, lockfile, None)

    @property
    def func_name(self) -> str:
        return self._name

    def load(self) -> type:
        """An ``nn.Module`` class whose forward calls the function, with the function's
        ``can_torch_compile`` (default False) and ``has_backward`` (default True) flags."""
        kernel = self._kernel()
        function = getattr(kernel, self._name, None)
        if not callable(function):
            raise LayerNotFoundError(f"{self._repo_id} at {self._commit[:12]} has no function {self._name!r}")
        return function_layer(function)


def function_layer(function: Any) -> type:
    """An ``nn.Module`` subclass with no state whose ``forward(self, ...)`` calls ``function``;
    its signature is the function's with ``self`` first, so ``kernelize`` can compare it."""
    from torch import nn

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    signature = inspect.signature(function)
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = [self_parameter, *signature.parameters.values()]
    forward.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    flags = {
        "can_torch_compile": bool(getattr(function, "can_torch_compile", False)),
        "has_backward": bool(getattr(function, "has_backward", True)),
    }
    name = getattr(function, "__name__", "function")
    members = {"forward": forward, "__module__": getattr(function, "__module__", __name__), **flags}
    return type(f"{name}_layer", (nn.Module,), members)

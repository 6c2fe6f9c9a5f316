"""``enforce_lock``: every Hub repository of a Hugging Face kernel mapping replaced by the lock's.

The Hugging Face library keeps its kernel mapping (what ``register_kernel_mapping`` and
``use_kernel_mapping`` build) as layer name -> device type -> the repositories of that
device, each a dict of ``Mode`` -> repository (CUDA and ROCm: one such dict per capability
range). ``enforce_lock`` walks it and puts, in each of those dicts, a
``LockedLayerRepository`` or ``LockedFuncRepository`` in place of every ``LayerRepository``,
``FuncRepository`` and their ``Locked…`` forms, all pinned by one lock; a repo the lock
does not pin is named, all of them at once, before anything is replaced or loaded. The
dicts are changed in place, so a mapping registered again from the same dicts (as
transformers does on ``use_kernels=True``) keeps the locked repositories. Local
repositories stay, with a warning, as ``LOCAL_KERNELS`` overrides do.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from collections.abc import Iterator, MutableMapping
from types import ModuleType
from typing import Any

from kernel_deps.core.errors import KernelDepsError, KernelNotLockedError, UsageError
from kernel_deps.layers.repositories import LockedFuncRepository, LockedLayerRepository
from kernel_deps.loader.finding import LockSource, calling_module, find_lock

_MISSING = (
    "kernel_deps.layers.enforce_lock works on the Hugging Face kernels library's kernel mapping, "
    "and it is not installed: pip install kernels"
)

# The Hugging Face repository classes, by name in `kernels.layer`: a Hub layer, a Hub function, local ones.
_HUB_LAYERS = ("LayerRepository", "LockedLayerRepository")
_HUB_FUNCS = ("FuncRepository", "LockedFuncRepository")
_LOCAL = ("LocalLayerRepository", "LocalFuncRepository")


class HFKernelsMissingError(KernelDepsError):
    """The Hugging Face ``kernels`` library, whose mapping ``enforce_lock`` rewrites, is not installed."""

    exit_code = 2


class LocalRepositoryWarning(UserWarning):
    """A kernel mapping entry loads a local folder that no lock vouches for."""


class _Slot:
    """One repository in a mapping, and where to put its replacement."""

    __slots__ = ("container", "key", "repo", "layer", "device")

    def __init__(self, container: MutableMapping[Any, Any], key: Any, repo: Any, layer: str, device: str):
        self.container, self.key, self.repo, self.layer, self.device = container, key, repo, layer, device

    def where(self) -> str:
        is_mode = not isinstance(self.key, str) and not hasattr(self.key, "type")  # not a device key
        mode = getattr(self.key, "name", None) if is_mode else None
        mode = None if mode == "FALLBACK" else mode  # registered without a mode
        return f"layer {self.layer!r}, {self.device}" + (f", mode {mode}" if mode else "")


def enforce_lock(
    lockfile: str | os.PathLike[str] | None = None, *, mapping: MutableMapping[str, Any] | None = None
) -> int:
    """Pin every Hub repository of a Hugging Face kernel mapping to the lock; returns how many were replaced.

    Without ``mapping``, the mapping ``kernelize`` would use now: the one the innermost
    ``use_kernel_mapping`` context opened, else the global one. With ``mapping``, a mapping
    in ``register_kernel_mapping``'s form that will be registered later (transformers'
    ``get_kernel_mapping_transformers()``), rewritten in place. The lock is found as the
    loader finds it (``lockfile=``, ``KERNELS_LOCKFILE``, the calling package's, the
    project's). Raises ``KernelNotLockedError`` naming every mapped repo the lock does not
    pin, with nothing replaced.
    """
    hf = _hf_layer()
    source = find_lock(lockfile, caller=calling_module(), online=True)  # loaded as get_locked_kernel loads
    slots = list(_given_slots(mapping) if mapping is not None else _current_slots(hf))
    hub_layers = _classes(hf, _HUB_LAYERS)
    hub_funcs = _classes(hf, _HUB_FUNCS)
    local = _classes(hf, _LOCAL)
    planned: list[tuple[_Slot, Any]] = []
    missing: dict[str, list[str]] = {}
    for slot in slots:
        repo = slot.repo
        if isinstance(repo, (LockedLayerRepository, LockedFuncRepository)):
            continue
        if isinstance(repo, local):
            warnings.warn(
                f"kernel mapping ({slot.where()}): {repo} is a local folder no lock vouches for; "
                "enforce_lock leaves it in place",
                LocalRepositoryWarning,
                stacklevel=2,
            )
            continue
        if not isinstance(repo, hub_layers + hub_funcs):
            raise UsageError(
                f"kernel mapping ({slot.where()}): enforce_lock cannot hold {type(repo).__name__} {repo!r} to the lock; "
                "use kernel_deps.layers.LockedLayerRepository or LockedFuncRepository there"
            )
        repo_id = getattr(repo, "_repo_id", None)
        if not isinstance(repo_id, str):
            raise UsageError(f"kernel mapping ({slot.where()}): {type(repo).__name__} without a repo id")
        kernel = source.lock.get(repo_id)
        if kernel is None:
            missing.setdefault(repo_id, []).append(slot.where())
            continue
        locked_major = _major(kernel.version)
        asked = getattr(repo, "_version", None)
        if isinstance(asked, int) and locked_major is not None and asked != locked_major:
            raise UsageError(
                f"kernel mapping ({slot.where()}): {repo_id} is asked for version={asked}, "
                f"but {source.path} pins {kernel.version}; lock version {asked} or map version={locked_major}"
            )
        planned.append((slot, _locked_equivalent(repo, repo_id, isinstance(repo, hub_funcs), source)))
    if missing:
        named = "; ".join(f"{repo_id} ({', '.join(places)})" for repo_id, places in missing.items())
        several = len(missing) > 1
        raise KernelNotLockedError(
            f"enforce_lock: the kernel mapping names {len(missing)} {'repos' if several else 'repo'} "
            f"not locked in {source.path}: {named}; add {'them' if several else 'it'} to "
            "[tool.kernels.dependencies] and run kernels lock"
        )
    for slot, replacement in planned:
        slot.container[slot.key] = replacement
    return len(planned)


def _major(version: str | None) -> int | None:
    """The major of a locked version (``v1.2.0``, ``1.2.0``, the branch ``v1``); None when it has none."""
    found = re.match(r"v?(\d+)(?:[.+-]|$)", version or "")
    return int(found.group(1)) if found else None


def _locked_equivalent(repo: Any, repo_id: str, is_function: bool, source: LockSource) -> Any:
    if is_function:
        return LockedFuncRepository._bound(repo_id, repo.func_name, source)
    return LockedLayerRepository._bound(repo_id, repo.layer_name, source)


def _hf_layer() -> ModuleType:
    """``kernels.layer`` of the Hugging Face library; one line saying to install it when it is not there."""
    try:
        import kernels.layer as layer
    except ImportError as error:
        if getattr(error, "name", None) in ("kernels", "kernels.layer"):
            raise HFKernelsMissingError(_MISSING) from None
        raise HFKernelsMissingError(
            "kernel_deps.layers.enforce_lock works on the Hugging Face kernels library's kernel mapping, "
            f"which cannot be imported ({error}): pip install --force-reinstall kernels"
        ) from None
    return layer


def _classes(hf: ModuleType, names: tuple[str, ...]) -> tuple[type, ...]:
    return tuple(cls for name in names if isinstance(cls := getattr(hf, name, None), type))


def _current_slots(hf: ModuleType) -> Iterator[_Slot]:
    """Every repository in the mapping in effect: layer -> device type -> DeviceRepos -> Mode dicts."""
    from kernels.layer.globals import _KERNEL_MAPPING

    for layer, devices in _KERNEL_MAPPING.get().items():
        for device, device_repos in devices.items():
            for label, modes in _mode_dicts(device, device_repos):
                for mode, repo in modes.items():
                    yield _Slot(modes, mode, repo, layer, label)


def _mode_dicts(device: str, device_repos: Any) -> Iterator[tuple[str, MutableMapping[Any, Any]]]:
    """The Mode -> repository dicts of one device: one, or one per capability range (CUDA, ROCm)."""
    tree = getattr(device_repos, "repos_by_capability", None)
    if tree is not None:
        pending = [getattr(tree, "root", None)]
        while pending:
            node = pending.pop()
            if node is None:
                continue
            every = node.start <= 0 and node.end >= sys.maxsize
            yield f"device {device}" + ("" if every else f" (capability {node.start}-{node.end})"), node.data
            pending += [node.left, node.right]
        return
    modes = getattr(device_repos, "_repos", None)
    if not isinstance(modes, MutableMapping):
        raise UsageError(
            f"enforce_lock does not know this Hugging Face kernels release's mapping for device {device} "
            f"({type(device_repos).__name__}); it knows kernels 0.16 and 0.17"
        )
    yield f"device {device}", modes


def _given_slots(mapping: MutableMapping[str, Any]) -> Iterator[_Slot]:
    """Every repository in a mapping of ``register_kernel_mapping``'s form."""
    for layer, devices in mapping.items():
        for device, entry in devices.items():
            label = f"device {getattr(device, 'type', device)}"
            if isinstance(entry, MutableMapping):
                for mode, repo in entry.items():
                    yield _Slot(entry, mode, repo, layer, label)
            else:
                yield _Slot(devices, device, entry, layer, label)

"""This machine as a build must match it: torch, C++ ABI, compute backend, arch and os.

``detect_system`` imports torch only when called (never at module import) and asks it
in the order the Hugging Face ``kernels`` library does, so both describe a machine the
same way; without torch, a loadable CUDA runtime library still tells CUDA from CPU.
``SystemInfo`` is plain data: ranking (:mod:`kernel_deps.variants`) never looks anything
up itself.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
import re
import sys
import warnings
from dataclasses import dataclass

_BACKEND_LABELS = {
    "cpu": "CPU", "cuda": "CUDA", "rocm": "ROCm", "xpu": "XPU", "metal": "Metal", "cann": "CANN",
    "neuron": "Neuron", "tpu": "TPU", "universal": "universal",
}  # fmt: skip
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


@dataclass(frozen=True, slots=True)
class SystemInfo:
    """What a build must match: torch, C++ ABI, compute backend, architecture and os.

    ``cxx11`` is None without torch, off linux (torch has no ABI choice there), and for a
    target named by an untagged build (either ABI may then be taken). ``macos_version`` is
    the macOS major.minor on darwin, None elsewhere or when unknown.
    """

    torch_version: tuple[int, int] | None
    cxx11: bool | None
    backend: str
    backend_version: tuple[int, ...] | None
    arch: str
    os: str
    macos_version: tuple[int, int] | None = None

    def describe(self) -> str:
        """A short human description, e.g. ``torch 2.13, cxx11 ABI, CPU, x86_64-linux``."""
        parts = [f"torch {dotted(self.torch_version)}" if self.torch_version else "torch not installed"]
        if self.os == "linux" and self.cxx11 is not None:
            parts.append(f"{abi_label(self.cxx11)} ABI")
        parts.append(backend_label(self.backend, self.backend_version))
        parts.append(f"{self.arch}-{self.os}")
        if self.macos_version is not None:
            parts.append(f"macOS {dotted(self.macos_version)}")
        return ", ".join(parts)


def detect_system() -> SystemInfo:
    """Describe this machine: the installed torch (imported here, not at module import).

    Without torch the backend is CUDA when a CUDA runtime library can be loaded (its
    version is asked from it), else CPU; only noarch builds can fit then.
    """
    arch, os_name = _machine_arch(platform.machine()), _os_name(sys.platform)
    macos = _macos_version(platform.mac_ver()[0]) if os_name == "darwin" else None
    try:
        with warnings.catch_warnings():
            # torch warns at import when NumPy is absent; kernel-deps never needs NumPy.
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            import torch
    except ImportError:
        cuda = _cuda_runtime_version()
        backend = "cpu" if cuda is None else "cuda"
        return SystemInfo(None, None, backend, cuda, arch, os_name, macos)
    torch_version = dotted_pair(torch.__version__)
    cxx11 = bool(torch.compiled_with_cxx11_abi()) if os_name == "linux" else None
    backend, backend_version = _torch_backend(torch)
    return SystemInfo(torch_version, cxx11, backend, backend_version, arch, os_name, macos)


def dotted(version: tuple[int, ...] | None) -> str:
    """``(2, 13)`` -> ``2.13``."""
    return ".".join(map(str, version or ()))


def dotted_pair(text: str | None) -> tuple[int, int] | None:
    """The leading ``major.minor`` of a version string such as ``2.13.0+cpu`` or ``6.3.42131-fa1d``."""
    match = re.match(r"([0-9]+)\.([0-9]+)", text or "")
    return (int(match[1]), int(match[2])) if match else None


def _xpu_version(text: str | None) -> tuple[int, int] | None:
    """torch's XPU (oneAPI) version: ``20250101`` (a date) or ``2025.1`` -> (2025, 1)."""
    if text and re.fullmatch(r"[0-9]{8}", text):
        return int(text[:4]), int(text[4:6])
    return dotted_pair(text)


def abi_label(cxx11: bool) -> str:
    """``cxx11`` or ``cxx98``."""
    return "cxx11" if cxx11 else "cxx98"


def backend_label(backend: str, version: tuple[int, ...] | None = None) -> str:
    """``CUDA 12.8``, ``CPU``, ``Metal`` ..."""
    label = _BACKEND_LABELS.get(backend, backend)
    return f"{label} {dotted(version)}" if version else label


def _machine_arch(machine: str) -> str:
    """``platform.machine()`` in variant spelling: ``AMD64`` -> ``x86_64``, ``arm64`` -> ``aarch64``."""
    lowered = machine.lower()
    return _ARCH_ALIASES.get(lowered, lowered)


def _os_name(platform_name: str) -> str:
    """``sys.platform`` in variant spelling: ``linux``, ``darwin`` or ``windows``."""
    if platform_name.startswith("linux"):
        return "linux"
    if platform_name in ("win32", "cygwin"):
        return "windows"
    return platform_name


def _torch_backend(torch: object) -> tuple[str, tuple[int, ...] | None]:
    """The compute backend this torch build uses, and its version where it has one.

    Checked in the order the ``kernels`` library checks: TPU and Neuron first (their
    extensions load into other torch builds), then CUDA, ROCm, Metal, XPU and Ascend.
    """
    backends = getattr(torch, "backends", None)
    if hasattr(backends, "tpu"):
        return "tpu", None
    if hasattr(torch, "neuron"):
        return "neuron", None
    version_module = getattr(torch, "version", None)
    cuda, hip = getattr(version_module, "cuda", None), getattr(version_module, "hip", None)
    if cuda:
        return "cuda", dotted_pair(cuda)
    if hip:
        return "rocm", dotted_pair(hip)
    mps = getattr(backends, "mps", None)
    if mps is not None and _called(getattr(mps, "is_available", None)):
        return "metal", None
    xpu = getattr(version_module, "xpu", None)
    if xpu:
        return "xpu", _xpu_version(xpu)
    if _privateuse1_backend(torch) == "npu":
        return "cann", _cann_version()
    return "cpu", None


def _privateuse1_backend(torch: object) -> str | None:
    """The name an out-of-tree device extension (such as torch_npu) registered with torch."""
    probe = getattr(getattr(torch, "_C", None), "_get_privateuse1_backend_name", None)
    try:
        name = probe() if callable(probe) else None
    except Exception:  # noqa: BLE001 - no answer means no extension
        return None
    return name if isinstance(name, str) else None


def _cann_version() -> tuple[int, int] | None:
    """The CANN toolkit version torch_npu reports (``8.1.RC1`` -> (8, 1)); None when it cannot tell."""
    try:
        from torch_npu.utils.collect_env import get_cann_version  # type: ignore[import-not-found]

        return dotted_pair(str(get_cann_version()))
    except Exception:  # noqa: BLE001 - an unreadable version is an unknown one
        return None


def _cuda_runtime_version() -> tuple[int, int] | None:
    """The version of the CUDA runtime library (libcudart) if one can be loaded, else None."""
    name = ctypes.util.find_library("cudart")
    if name is None:
        return None
    try:
        runtime = ctypes.CDLL(name)
        value = ctypes.c_int(0)
        if runtime.cudaRuntimeGetVersion(ctypes.byref(value)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    # Encoded as major * 1000 + minor * 10.
    return value.value // 1000, (value.value % 1000) // 10


def _macos_version(text: str) -> tuple[int, int] | None:
    """``platform.mac_ver()``'s release as major.minor: ``26.0.1`` -> (26, 0), ``26`` -> (26, 0)."""
    match = re.match(r"([0-9]+)(?:\.([0-9]+))?", text or "")
    return (int(match[1]), int(match[2] or 0)) if match else None


def _called(probe: object) -> bool:
    """``probe()`` as a bool; False when it is missing or raises (a driver problem is not XPU)."""
    try:
        return callable(probe) and bool(probe())
    except Exception:  # noqa: BLE001 - a failing availability probe means "not available"
        return False

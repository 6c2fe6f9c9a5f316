"""This machine as a build must match it: torch, C++ ABI, compute backend, arch and os.

``detect_system`` reads the installed torch's files (its metadata, ``torch/version.py``
and the C++ ABI its ``torch/__init__.py`` or CMake config records) without importing
torch, which takes over a second; it imports torch only when those cannot tell (a torch
it cannot read, macOS, where Metal needs an MPS availability probe, or a device extension
such as torch_npu, torch_neuronx or torch_xla that changes torch when imported). Either
way it asks in the order the Hugging Face ``kernels`` library does, so both describe a
machine the same way; without torch, a loadable CUDA runtime library still tells CUDA
from CPU.
``SystemInfo`` is plain data: ranking (:mod:`kernel_deps.core.variants`) never looks anything
up itself.
"""

from __future__ import annotations

import ast
import platform
import re
import sys
import warnings
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Sequence

from kernel_deps.core.records import Record, replaceable

_BACKEND_LABELS = {
    "cpu": "CPU", "cuda": "CUDA", "rocm": "ROCm", "xpu": "XPU", "metal": "Metal", "cann": "CANN",
    "neuron": "Neuron", "tpu": "TPU", "universal": "universal",
}  # fmt: skip
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}
# Packages that change what torch reports once imported (torch loads them itself, through
# its "torch.backends" entry points): their backend can only be asked of the imported torch.
_DEVICE_EXTENSIONS = ("torch_npu", "torch_neuronx", "torch_neuron", "torch_xla", "torch_tpu")
# torch/version.py: plain assignments of string (or None) literals.
_VERSION_NAMES = ("__version__", "cuda", "hip", "xpu")
# torch/__init__.py: since torch 2.7 linux wheels are cxx11-only and say so as a literal.
# Both patterns are compiled (by re's cache) only by a command that reads torch's files,
# not at every start-up: the first costs about 2 ms to compile.
_ABI_FUNCTION = (
    r"(?m)^def compiled_with_cxx11_abi\(\)[^\n]*:\n"
    r"(?:[ \t]+(?:[rRuU]?(?:\"\"\"|\'\'\')[^\n]*|#[^\n]*)?\n)*"
    r"[ \t]+return (True|False)[ \t]*$"
)
# TorchConfig.cmake of older torch: set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0").
_ABI_FLAG = r"_GLIBCXX_USE_CXX11_ABI=([01])\b"


@replaceable  # the loader copies one with dataclasses.replace
class SystemInfo(Record):
    """What a build must match: torch, C++ ABI, compute backend, architecture and os.

    ``cxx11`` is None without torch, off linux (torch has no ABI choice there), and for a
    target named by an untagged build (either ABI may then be taken). ``macos_version`` is
    the macOS major.minor on darwin, None elsewhere or when unknown.
    """

    __slots__ = ("torch_version", "cxx11", "backend", "backend_version", "arch", "os", "macos_version")
    torch_version: tuple[int, int] | None
    cxx11: bool | None
    backend: str
    backend_version: tuple[int, ...] | None
    arch: str
    os: str
    macos_version: tuple[int, int] | None

    def __init__(
        self, torch_version: tuple[int, int] | None, cxx11: bool | None, backend: str,
        backend_version: tuple[int, ...] | None, arch: str, os: str, macos_version: tuple[int, int] | None = None,
    ) -> None:  # fmt: skip
        self._init(torch_version, cxx11, backend, backend_version, arch, os, macos_version)

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
    """Describe this machine: from torch's files when they tell, else by importing torch.

    A torch this process has already imported (or been told cannot be imported: a None
    in ``sys.modules``) is asked directly. Without torch the backend is CUDA when a CUDA
    runtime library can be loaded (its version is asked from it), else CPU; only noarch
    builds can fit then.
    """
    if "torch" not in sys.modules:
        described = system_from_files()
        if described is not None:
            return described
    return system_from_torch()


def system_from_torch() -> SystemInfo:
    """Describe this machine by importing torch and asking it."""
    arch, os_name, macos = _platform()
    try:
        with warnings.catch_warnings():
            # torch warns at import when NumPy is absent; kernel-deps never needs NumPy.
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            import torch
    except ImportError:
        return _without_torch(arch, os_name, macos)
    torch_version = dotted_pair(torch.__version__)
    cxx11 = bool(torch.compiled_with_cxx11_abi()) if os_name == "linux" else None
    backend, backend_version = _torch_backend(torch)
    return SystemInfo(torch_version, cxx11, backend, backend_version, arch, os_name, macos)


def system_from_files(path: Sequence[str] | None = None, *, without_torch: bool = True) -> SystemInfo | None:
    """Describe this machine from the files of the torch ``import torch`` would find on
    ``path`` (default ``sys.path``), without importing it; None when they cannot tell
    (and, unless ``without_torch``, when no torch is found: the CUDA runtime is not probed).

    The torch version comes from its ``torch-X.dist-info/METADATA`` (else ``torch/version.py``),
    the CUDA, ROCm (``hip``) and XPU versions from ``torch/version.py``, the C++ ABI from
    ``compiled_with_cxx11_abi`` in ``torch/__init__.py`` when it returns a literal (torch
    2.7 and later), else from the flag in ``share/cmake/Torch/TorchConfig.cmake``.
    """
    arch, os_name, macos = _platform()
    search = list(sys.path if path is None else path)
    if os_name == "darwin":
        return None  # Metal is told by MPS availability, a runtime probe
    try:
        spec = PathFinder.find_spec("torch", search)
        if spec is None:
            return _without_torch(arch, os_name, macos) if without_torch else None
        if any(PathFinder.find_spec(name, search) is not None for name in _DEVICE_EXTENSIONS):
            return None
    except (ImportError, ValueError, OSError):
        return None
    origin = Path(spec.origin) if spec.origin else None
    if origin is None or origin.name != "__init__.py" or origin.parent.name != "torch":
        return None
    package = origin.parent
    values = _literal_assignments(package / "version.py", _VERSION_NAMES)
    if values is None:
        return None
    torch_version = dotted_pair(_distribution_version(package.parent) or values.get("__version__"))
    if torch_version is None:
        return None
    cxx11 = None
    if os_name == "linux":
        cxx11 = _cxx11_abi_from_files(package)
        if cxx11 is None:
            return None
    cuda, hip, xpu = values.get("cuda"), values.get("hip"), values.get("xpu")
    if cuda:
        backend, backend_version = "cuda", dotted_pair(cuda)
    elif hip:
        backend, backend_version = "rocm", dotted_pair(hip)
    elif xpu:
        backend, backend_version = "xpu", _xpu_version(xpu)
    else:
        backend, backend_version = "cpu", None
    return SystemInfo(torch_version, cxx11, backend, backend_version, arch, os_name, macos)


def _platform() -> tuple[str, str, tuple[int, int] | None]:
    """This machine's architecture, os and (on darwin) macOS version, in variant spelling."""
    arch, os_name = _machine_arch(platform.machine()), _os_name(sys.platform)
    macos = _macos_version(platform.mac_ver()[0]) if os_name == "darwin" else None
    return arch, os_name, macos


def _without_torch(arch: str, os_name: str, macos: tuple[int, int] | None) -> SystemInfo:
    cuda = _cuda_runtime_version()
    backend = "cpu" if cuda is None else "cuda"
    return SystemInfo(None, None, backend, cuda, arch, os_name, macos)


def _distribution_version(site: Path) -> str | None:
    """The ``Version`` in the one ``torch-*.dist-info`` beside the torch package, if any.

    Read as importlib.metadata reads it, without importing importlib.metadata (tens of
    milliseconds, more than the rest of this description).
    """
    try:
        infos = [p for p in site.glob("*.dist-info") if p.name.split("-", 1)[0].lower() == "torch"]
        if len(infos) != 1:
            return None
        with open(infos[0] / "METADATA", encoding="utf-8") as metadata:
            for line in metadata:
                if not line.strip():
                    break  # the headers end at the first blank line
                if line.lower().startswith("version:"):
                    return line.split(":", 1)[1].strip() or None
    except (OSError, ValueError):
        return None
    return None


def _literal_assignments(path: Path, names: Sequence[str]) -> dict[str, str | None] | None:
    """Module-level ``name = "literal"`` (or None) assignments of ``names`` in a file.

    None when the file cannot be read or parsed, or assigns one of ``names`` anything but
    a string or None literal; a name never assigned is simply absent.
    """
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, ValueError):
        return None
    values: dict[str, str | None] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name) or target.id not in names:
            continue
        if not isinstance(value, ast.Constant) or not isinstance(value.value, (str, type(None))):
            return None
        values[target.id] = value.value
    return values


def _cxx11_abi_from_files(package: Path) -> bool | None:
    """The C++ ABI a torch package was built with, from its files; None when they do not say."""
    try:
        match = re.search(_ABI_FUNCTION, (package / "__init__.py").read_text(encoding="utf-8"))
        if match:
            return match[1] == "True"
        config = package / "share" / "cmake" / "Torch" / "TorchConfig.cmake"
        match = re.search(_ABI_FLAG, config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return match[1] == "1" if match else None


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
    import ctypes.util  # only here: most commands never ask

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

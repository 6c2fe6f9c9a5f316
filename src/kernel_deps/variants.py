"""Build variants: the folder-name grammar, this system's description, and which build fits.

A kernel repo holds one ``build/<variant>/`` folder per build. The names follow a grammar:

- exact torch builds ``torch<MAJ><MIN>[-cxx11|-cxx98]-<backend>-<arch>-<os>``, with the C++
  ABI part on linux only: ``torch213-cxx11-cu128-x86_64-linux``, ``torch29-metal-aarch64-darwin``;
- stable-ABI builds ``torch-stable-abi<MAJ><MIN>-<backend>-<arch>-<os>``, usable with any torch
  at least that version;
- other frameworks ``tvm-ffi<MAJ><MIN>-<backend>-<arch>-<os>`` (its ABI version is kept in
  ``Variant.stable_abi``); parsed, but never chosen by a torch loader;
- noarch ``torch-universal`` (pure Python) and ``torch-<backend>`` (backend-specific Python).

Backends are ``cpu``, ``metal``, ``cu<ver>`` (CUDA), ``rocm<ver>`` and ``xpu<ver>``; in a
backend version the last digit is the minor (``cu128`` is 12.8, ``xpu20251`` is 2025.1), in a
torch or ABI version the first digit is the major (``torch213`` is 2.13). Anything else,
including names with ``/``, ``\\``, ``..`` or whitespace, is not a variant.

Preference order, best first (``rank_variants``):

1. the exact torch build for this torch major.minor, C++ ABI (linux only), backend with the
   same CUDA/ROCm/XPU major.minor, arch and os;
2. stable-ABI builds whose ABI version is at most this torch's, same backend, backend
   version, arch and os; the newest ABI version first;
3. the noarch ``torch-<backend>`` build for this system's backend;
4. ``torch-universal``.

Every other name gets one short reason why it does not fit. Ranking is pure: the system is
passed in (``detect_system`` or ``system_for_variant``), never looked up inside.
"""

from __future__ import annotations

import platform
import re
import sys
import warnings
from dataclasses import dataclass
from typing import Iterable

from kernel_deps.errors import KernelDepsError, UsageError

_MAX_NAME_LENGTH = 100
_ARCH_BUILD = re.compile(
    r"(?:(?P<framework>torch|torch-stable-abi|tvm-ffi)(?P<fver>[0-9]+))"
    r"(?:-(?P<abi>cxx11|cxx98))?"
    r"-(?P<backend>cpu|metal|cu|rocm|xpu)(?P<bver>[0-9]*)"
    r"-(?P<arch>[a-z][a-z0-9_]*)-(?P<os>linux|darwin|windows)",
    re.ASCII,
)
_NOARCH_BACKENDS = ("universal", "cpu", "cuda", "rocm", "xpu", "metal")
_BACKEND_TOKENS = {"cpu": "cpu", "metal": "metal", "cu": "cuda", "rocm": "rocm", "xpu": "xpu"}
_VERSIONED_BACKENDS = frozenset({"cuda", "rocm", "xpu"})
_BACKEND_LABELS = {"cpu": "CPU", "cuda": "CUDA", "rocm": "ROCm", "xpu": "XPU", "metal": "Metal", "universal": "universal"}
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}
_FRAMEWORKS = {"torch": "torch", "torch-stable-abi": "torch", "tvm-ffi": "tvm-ffi"}


class NoMatchingVariantError(KernelDepsError):
    """No build variant of a kernel fits this system; ``reasons`` maps each name to why."""

    def __init__(self, repo_id: str, system: SystemInfo, reasons: dict[str, str]) -> None:
        listed = ", ".join(f"{_display_name(n)} ({r})" for n, r in reasons.items()) or "none"
        super().__init__(
            f"{repo_id}: no variant for this system ({system.describe()}); available: {listed}"
        )
        self.repo_id = repo_id
        self.system = system
        self.reasons = reasons


class InvalidVariantError(UsageError):
    """A variant name given by the user is not one a system can be described from."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One parsed build variant folder name."""

    name: str
    framework: str
    torch_version: tuple[int, int] | None
    stable_abi: tuple[int, int] | None
    cxx11: bool | None
    backend: str
    backend_version: tuple[int, ...] | None
    arch: str | None
    os: str | None
    noarch: bool


@dataclass(frozen=True, slots=True)
class SystemInfo:
    """What a build must match: torch, C++ ABI, compute backend, architecture and os."""

    torch_version: tuple[int, int] | None
    cxx11: bool | None
    backend: str
    backend_version: tuple[int, ...] | None
    arch: str
    os: str

    def describe(self) -> str:
        """A short human description, e.g. ``torch 2.13, cxx11 ABI, CPU, x86_64-linux``."""
        parts = [f"torch {_dotted(self.torch_version)}" if self.torch_version else "torch not installed"]
        if self.os == "linux" and self.cxx11 is not None:
            parts.append(f"{_abi_label(self.cxx11)} ABI")
        parts.append(_backend_label(self.backend, self.backend_version))
        parts.append(f"{self.arch}-{self.os}")
        return ", ".join(parts)


def parse_variant(name: str) -> Variant | None:
    """The parsed variant, or None when ``name`` is not a valid variant folder name."""
    if not isinstance(name, str) or len(name) > _MAX_NAME_LENGTH:
        return None
    if name.startswith("torch-") and name[len("torch-"):] in _NOARCH_BACKENDS:
        backend = name[len("torch-"):]
        return Variant(name, "torch", None, None, None, backend, None, None, None, noarch=True)
    match = _ARCH_BUILD.fullmatch(name)
    if match is None:
        return None
    kind, abi, os_name = match["framework"], match["abi"], match["os"]
    framework_version = _leading_major(match["fver"])
    backend = _BACKEND_TOKENS[match["backend"]]
    backend_version = _trailing_minor(match["bver"])
    # CUDA, ROCm and XPU builds always name a (well-formed) version; CPU and Metal never do.
    if framework_version is None or (backend in _VERSIONED_BACKENDS) != (backend_version is not None):
        return None
    if match["bver"] and backend_version is None:
        return None
    # The C++ ABI only varies for exact torch builds on linux, where it is always named.
    if (abi is not None) != (kind == "torch" and os_name == "linux"):
        return None
    exact = kind == "torch"
    return Variant(
        name=name,
        framework=_FRAMEWORKS[kind],
        torch_version=framework_version if exact else None,
        stable_abi=None if exact else framework_version,
        cxx11=None if abi is None else abi == "cxx11",
        backend=backend,
        backend_version=backend_version,
        arch=match["arch"],
        os=os_name,
        noarch=False,
    )


def is_valid_variant_name(name: str) -> bool:
    """Whether ``name`` follows the variant grammar (and so is safe as a folder name)."""
    return parse_variant(name) is not None


def detect_system() -> SystemInfo:
    """Describe this machine: the installed torch (imported here, not at module import)."""
    arch, os_name = _machine_arch(platform.machine()), _os_name(sys.platform)
    try:
        with warnings.catch_warnings():
            # torch warns at import when NumPy is absent; kernel-deps never needs NumPy.
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            import torch
    except ImportError:
        return SystemInfo(None, None, "cpu", None, arch, os_name)
    torch_version = _dotted_pair(torch.__version__)
    cxx11 = bool(torch.compiled_with_cxx11_abi())
    backend, backend_version = _torch_backend(torch, os_name)
    return SystemInfo(torch_version, cxx11, backend, backend_version, arch, os_name)


def system_for_variant(name: str) -> SystemInfo:
    """The system an arch build targets, for cross-targeting (``--variant NAME``) and tests."""
    variant = parse_variant(name)
    if variant is None:
        raise InvalidVariantError(
            f"{name!r} is not a valid variant name; expected one like torch213-cxx11-cu128-x86_64-linux"
        )
    if variant.noarch or variant.framework != "torch":
        raise InvalidVariantError(
            f"variant {name!r} does not name a torch version, arch and os; "
            "pass an arch build like torch213-cxx11-cu128-x86_64-linux"
        )
    assert variant.arch is not None and variant.os is not None
    torch_version = variant.torch_version or variant.stable_abi
    return SystemInfo(torch_version, variant.cxx11, variant.backend, variant.backend_version, variant.arch, variant.os)


def rank_variants(names: Iterable[str], system: SystemInfo) -> tuple[list[str], dict[str, str]]:
    """The names that fit ``system``, best first, and a reason for every name that does not."""
    ranked: list[tuple[tuple[int, int, int, str], str]] = []
    rejected: dict[str, str] = {}
    for name in dict.fromkeys(names):
        variant = parse_variant(name)
        reason = "not a valid variant name" if variant is None else _rejection(variant, system)
        if reason is not None:
            rejected[name] = reason
            continue
        assert variant is not None
        ranked.append((_preference(variant), name))
    return [name for _, name in sorted(ranked)], rejected


def select_variant(repo_id: str, names: Iterable[str], system: SystemInfo) -> str:
    """The best variant of ``repo_id`` for ``system``; raises NoMatchingVariantError if none fits."""
    names = list(names)
    accepted, rejected = rank_variants(names, system)
    if not accepted:
        raise NoMatchingVariantError(repo_id, system, {n: rejected[n] for n in dict.fromkeys(names)})
    return accepted[0]


def _rejection(variant: Variant, system: SystemInfo) -> str | None:
    """Why ``variant`` cannot run on ``system``, most fundamental mismatch first; None if it can."""
    if variant.framework != "torch":
        return f"built for {variant.framework}, not torch"
    if system.torch_version is None:
        return "torch is not installed"
    if variant.noarch:
        if variant.backend in ("universal", system.backend):
            return None
        return f"{_backend_label(variant.backend)} build; this system uses {_backend_label(system.backend)}"
    if (variant.arch, variant.os) != (system.arch, system.os):
        return f"{variant.arch}-{variant.os} build; this system is {system.arch}-{system.os}"
    if variant.backend != system.backend:
        return f"{_backend_label(variant.backend)} build; this system uses {_backend_label(system.backend)}"
    if variant.backend_version != system.backend_version:
        if system.backend_version is None:
            label = _backend_label(variant.backend, variant.backend_version)
            return f"{label} build; this system's {_backend_label(system.backend)} version is unknown"
        built = _backend_label(variant.backend, variant.backend_version)
        return f"{built} build; this system has {_backend_label(system.backend, system.backend_version)}"
    if variant.stable_abi is not None:
        if variant.stable_abi > system.torch_version:
            return f"stable ABI {_dotted(variant.stable_abi)} is newer than torch {_dotted(system.torch_version)}"
    elif variant.torch_version != system.torch_version:
        assert variant.torch_version is not None
        built, have = _dotted(variant.torch_version), _dotted(system.torch_version)
        return f"torch {built} build; this system has torch {have}"
    if variant.cxx11 is not None and system.cxx11 is not None and variant.cxx11 != system.cxx11:
        return f"{_abi_label(variant.cxx11)} ABI; this torch uses the {_abi_label(system.cxx11)} ABI"
    return None


def _preference(variant: Variant) -> tuple[int, int, int, str]:
    """Sort key of an acceptable variant: tier, then the newest stable ABI, then the name."""
    if variant.noarch:
        return (4 if variant.backend == "universal" else 3, 0, 0, variant.name)
    if variant.stable_abi is not None:
        return (2, -variant.stable_abi[0], -variant.stable_abi[1], variant.name)
    return (1, 0, 0, variant.name)


def _leading_major(digits: str) -> tuple[int, int] | None:
    """``213`` -> (2, 13): first digit major, the rest minor (no leading zero)."""
    if len(digits) < 2 or (len(digits) > 2 and digits[1] == "0"):
        return None
    return int(digits[0]), int(digits[1:])


def _trailing_minor(digits: str) -> tuple[int, int] | None:
    """``128`` -> (12, 8): last digit minor, the rest major (no leading zero)."""
    if len(digits) < 2 or digits[0] == "0":
        return None
    return int(digits[:-1]), int(digits[-1])


def _dotted(version: tuple[int, ...] | None) -> str:
    """``(2, 13)`` -> ``2.13``."""
    return ".".join(map(str, version or ()))


def _dotted_pair(text: str | None) -> tuple[int, int] | None:
    """The leading ``major.minor`` of a version string such as ``2.13.0+cpu`` or ``6.3.42131-fa1d``."""
    match = re.match(r"([0-9]+)\.([0-9]+)", text or "")
    return (int(match[1]), int(match[2])) if match else None


def _xpu_version(text: str | None) -> tuple[int, int] | None:
    """torch's XPU (oneAPI) version: ``20250101`` (a date) or ``2025.1`` -> (2025, 1)."""
    if text and re.fullmatch(r"[0-9]{8}", text):
        return int(text[:4]), int(text[4:6])
    return _dotted_pair(text)


def _abi_label(cxx11: bool) -> str:
    """``cxx11`` or ``cxx98``."""
    return "cxx11" if cxx11 else "cxx98"


def _backend_label(backend: str, version: tuple[int, ...] | None = None) -> str:
    """``CUDA 12.8``, ``CPU``, ``Metal`` ..."""
    label = _BACKEND_LABELS.get(backend, backend)
    return f"{label} {_dotted(version)}" if version else label


def _display_name(name: str) -> str:
    """A variant name fit for a one-line message: quoted and shortened when it is not valid."""
    if is_valid_variant_name(name):
        return name
    shown = repr(name)
    return shown if len(shown) <= 60 else shown[:57] + "..."


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


def _torch_backend(torch: object, os_name: str) -> tuple[str, tuple[int, ...] | None]:
    """The compute backend this torch build uses, and its version where it has one."""
    version_module = getattr(torch, "version", None)
    cuda, hip = getattr(version_module, "cuda", None), getattr(version_module, "hip", None)
    if cuda:
        return "cuda", _dotted_pair(cuda)
    if hip:
        return "rocm", _dotted_pair(hip)
    xpu = getattr(version_module, "xpu", None)
    xpu_module = getattr(torch, "xpu", None)
    if xpu or (xpu_module is not None and _called(getattr(xpu_module, "is_available", None))):
        return "xpu", _xpu_version(xpu)
    mps = getattr(getattr(torch, "backends", None), "mps", None)
    if os_name == "darwin" and mps is not None and _called(getattr(mps, "is_available", None)):
        return "metal", None
    return "cpu", None


def _called(probe: object) -> bool:
    """``probe()`` as a bool; False when it is missing or raises (a driver problem is not XPU)."""
    try:
        return callable(probe) and bool(probe())
    except Exception:  # noqa: BLE001 - a failing availability probe means "not available"
        return False

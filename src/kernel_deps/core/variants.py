"""Build variants: the folder-name grammar, and which build fits a system.

A kernel repo holds one ``build/<variant>/`` folder per build. The names follow the grammar
the Hugging Face ``kernels`` library and kernel-builder use:

- exact torch builds ``torch<MAJ><MIN>[-cxx11|-cxx98]-<backend>-<arch>-<os>``:
  ``torch213-cxx11-cu128-x86_64-linux``, ``torch211-cu128-x86_64-linux``,
  ``torch29-metal-aarch64-darwin``. The C++ ABI tag is historical (linux builds had one; newer
  builds drop it); a tagged build needs a torch of that ABI, so tagged builds for other
  systems than linux (some exist) never fit;
- stable-ABI builds ``torch-stable-abi<MAJ><MIN>-<backend>-<arch>-<os>``, usable with any torch
  at least that version;
- other frameworks ``tvm-ffi<MAJ><MIN>-<backend>-<arch>-<os>`` (its ABI version is kept in
  ``Variant.stable_abi``); parsed, but never chosen by a torch loader;
- noarch ``torch-universal`` (pure Python) and ``torch-<backend>`` (backend-specific Python):
  ``torch-cpu``, ``torch-cuda``, ``torch-rocm``, ``torch-xpu``, ``torch-metal``, ``torch-npu``
  (Ascend, backend ``cann``), ``torch-neuron`` and ``torch-tpu``.

Backends are ``cpu``, ``metal``, ``neuron``, ``tpu``, and the versioned ``cu<ver>`` (CUDA),
``rocm<ver>``, ``xpu<ver>`` and ``cann<ver>`` (Ascend). In a backend version the last digit is
the minor (``cu128`` is 12.8, ``xpu20251`` is 2025.1), in a torch or ABI version the first
digit is the major (``torch213`` is 2.13). These are every backend the Hugging Face
``kernels`` library knows (its ``backends.py``: CANN, CPU, CUDA, Metal, Neuron, ROCm, TPU,
XPU). Anything else, including names with ``/``, ``\\``, ``..`` or whitespace, is not a
variant: such a build folder is never locked, and ``kernels lock`` lists it as skipped.
(``kernels`` also parses any ``torch-<word>`` noarch name, but selects none beyond those
above, and any os name; kernel-deps describes linux, darwin and windows machines only.)

Which builds fit a system (``rank_variants``): an arch build needs the system's arch, os
and backend. A CUDA x.z build fits a system with CUDA x.y when z <= y (CUDA minor version
compatibility); ROCm, XPU and CANN builds need the same major.minor. An exact torch build
needs this torch major.minor and, when tagged, its C++ ABI; a stable-ABI build needs a
torch at least its ABI version. Metal arch builds need macOS 26 or later. Noarch builds fit
any system of their backend, and ``torch-universal`` any system, with or without torch.

Preference order, best first (the order of the ``kernels`` library, so that one lock gives
one build everywhere):

1. stable-ABI builds, the newest ABI version first, then the newest backend minor;
2. exact torch builds, untagged before C++ ABI-tagged, then the newest backend minor;
3. the noarch ``torch-<backend>`` build for this system's backend;
4. ``torch-universal``.

Every other name gets one short reason why it does not fit. Ranking is pure: the system is
passed in (``detect_system`` or ``system_for_variant``), never looked up inside.
"""

from __future__ import annotations

import re
from typing import Iterable

from kernel_deps.core.errors import KernelDepsError, UsageError
from kernel_deps.core.records import Record
from kernel_deps.core.system import SystemInfo, abi_label, backend_label, detect_system, dotted

# The longest variant folder name; kernel_deps.lock.model applies the same limit to locked names.
MAX_NAME_LENGTH = 100
_ARCH_BUILD = re.compile(
    r"(?:(?P<framework>torch|torch-stable-abi|tvm-ffi)(?P<fver>[0-9]+))"
    r"(?:-(?P<abi>cxx11|cxx98))?"
    r"-(?P<backend>cpu|metal|neuron|tpu|cu|rocm|xpu|cann)(?P<bver>[0-9]*)"
    r"-(?P<arch>[a-z][a-z0-9_]*)-(?P<os>linux|darwin|windows)",
    re.ASCII,
)
# noarch folder suffix -> backend; Ascend's noarch builds are named after the device, ``npu``.
_NOARCH_BACKENDS = {
    "universal": "universal", "cpu": "cpu", "cuda": "cuda", "rocm": "rocm", "xpu": "xpu",
    "metal": "metal", "npu": "cann", "neuron": "neuron", "tpu": "tpu",
}  # fmt: skip
_BACKEND_TOKENS = {
    "cpu": "cpu", "metal": "metal", "neuron": "neuron", "tpu": "tpu",
    "cu": "cuda", "rocm": "rocm", "xpu": "xpu", "cann": "cann",
}  # fmt: skip
_VERSIONED_BACKENDS = frozenset({"cuda", "rocm", "xpu", "cann"})
_FRAMEWORKS = {"torch": "torch", "torch-stable-abi": "torch", "tvm-ffi": "tvm-ffi"}
# Metal builds are compiled for Metal 4, which macOS 26 introduced.
METAL_MIN_MACOS = (26, 0)


class NoMatchingVariantError(KernelDepsError, FileNotFoundError):
    """No build variant of a kernel fits this system; ``reasons`` maps each name to why."""
    kind = "no-matching-variant"

    def __init__(self, repo_id: str, system: SystemInfo, reasons: dict[str, str]) -> None:
        listed = ", ".join(f"{_display_name(n)} ({r})" for n, r in reasons.items()) or "none"
        super().__init__(f"no variant for this system ({system.describe()}); available: {listed}", subject=repo_id)
        self.repo_id = repo_id
        self.system = system
        self.reasons = reasons


class InvalidVariantError(UsageError):
    """A variant name given by the user is not one a system can be described from."""
    kind = "variant-invalid"


class Variant(Record):
    """One parsed build variant folder name."""

    __slots__ = ("name", "framework", "torch_version", "stable_abi", "cxx11", "backend", "backend_version", "arch",
                 "os", "noarch")  # fmt: skip
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

    def __init__(self, name: str, framework: str, torch_version: tuple[int, int] | None,
                 stable_abi: tuple[int, int] | None, cxx11: bool | None, backend: str,
                 backend_version: tuple[int, ...] | None, arch: str | None, os: str | None,
                 noarch: bool) -> None:  # fmt: skip
        self._init(name, framework, torch_version, stable_abi, cxx11, backend, backend_version, arch, os, noarch)


def parse_variant(name: str) -> Variant | None:
    """The parsed variant, or None when ``name`` is not a valid variant folder name."""
    if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH:
        return None
    if name.startswith("torch-") and name[len("torch-"):] in _NOARCH_BACKENDS:
        backend = _NOARCH_BACKENDS[name[len("torch-"):]]
        return Variant(name, "torch", None, None, None, backend, None, None, None, noarch=True)
    match = _ARCH_BUILD.fullmatch(name)
    if match is None:
        return None
    kind, abi = match["framework"], match["abi"]
    framework_version = _leading_major(match["fver"])
    backend = _BACKEND_TOKENS[match["backend"]]
    backend_version = _trailing_minor(match["bver"])
    # CUDA, ROCm, XPU and CANN builds always name a (well-formed) version; the others never do.
    if framework_version is None or (backend in _VERSIONED_BACKENDS) != (backend_version is not None):
        return None
    if match["bver"] and backend_version is None:
        return None
    # Only exact torch builds may carry a C++ ABI tag.
    if abi is not None and kind != "torch":
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
        os=match["os"],
        noarch=False,
    )


def is_valid_variant_name(name: str) -> bool:
    """Whether ``name`` follows the variant grammar (and so is safe as a folder name)."""
    return parse_variant(name) is not None


def exact_build_name(system: SystemInfo) -> str | None:
    """The name kernel-builder gives the exact torch build for ``system`` (C++ ABI-tagged on
    linux), e.g. ``torch213-cxx11-cu128-x86_64-linux``; None without torch or a known backend."""
    token = {backend: token for token, backend in _BACKEND_TOKENS.items()}.get(system.backend)
    if system.torch_version is None or token is None:
        return None
    parts = [f"torch{system.torch_version[0]}{system.torch_version[1]}"]
    if system.os == "linux" and system.cxx11 is not None:
        parts.append(abi_label(system.cxx11))
    parts += [token + "".join(map(str, system.backend_version or ())), system.arch, system.os]
    name = "-".join(parts)
    return name if is_valid_variant_name(name) else None


def system_for_variant(name: str) -> SystemInfo:
    """The system an arch build targets, for cross-targeting (``--variant NAME``) and tests.

    A darwin target is taken to run macOS 26, the oldest that runs Metal builds.
    """
    variant = parse_variant(name)
    if variant is None:
        raise InvalidVariantError(f"{name!r} is not a valid variant name",
                                  hint="expected one like torch213-cxx11-cu128-x86_64-linux")  # fmt: skip
    if variant.noarch or variant.framework != "torch":
        raise InvalidVariantError(f"variant {name!r} does not name a torch version, arch and os",
                                  hint="pass an arch build like torch213-cxx11-cu128-x86_64-linux")  # fmt: skip
    assert variant.arch is not None and variant.os is not None
    if variant.cxx11 is not None and variant.os != "linux":
        plain = name.replace("-cxx11", "").replace("-cxx98", "")
        raise InvalidVariantError(f"variant {name!r} has a C++ ABI tag, which only linux builds use",
                                  hint=f"pass it without the tag, like {plain}")  # fmt: skip
    torch_version = variant.torch_version or variant.stable_abi
    macos = METAL_MIN_MACOS if variant.os == "darwin" else None
    return SystemInfo(
        torch_version, variant.cxx11, variant.backend, variant.backend_version, variant.arch, variant.os, macos
    )


def rank_variants(names: Iterable[str], system: SystemInfo) -> tuple[list[str], dict[str, str]]:
    """The names that fit ``system``, best first, and a reason for every name that does not."""
    ranked: list[tuple[tuple[int, int, int, int, int, str], str]] = []
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


def choose_variants(
    repo_id: str,
    names: Iterable[str],
    *,
    all_variants: bool = False,
    requested: Iterable[str] = (),
    system: SystemInfo | None = None,
) -> list[str]:
    """Which of a locked kernel's variants (``names``) to take: this machine's best (or
    ``system``'s), every one, or as ``requested`` (a name it lacks that names an arch build
    takes its best variant for that build's system); UsageError for any other name."""
    names = sorted(names)
    requested = list(requested)
    if all_variants:
        return names
    if not requested:
        return [select_variant(repo_id, names, system or detect_system())]
    chosen: list[str] = []
    for name in requested:
        if name in names:
            chosen.append(name)
            continue
        parsed = parse_variant(name)
        if parsed is None or parsed.noarch or parsed.framework != "torch":
            raise UsageError(
                f"{repo_id} has no such variant; it has {', '.join(names) or 'none'}",
                subject=f"--variant {name}",
            )
        # An arch build this kernel lacks: take its best variant for that target system.
        chosen.append(select_variant(repo_id, names, system_for_variant(name)))
    return sorted(set(chosen))


def _rejection(variant: Variant, system: SystemInfo) -> str | None:
    """Why ``variant`` cannot run on ``system``, most fundamental mismatch first; None if it can."""
    if variant.framework != "torch":
        return f"built for {variant.framework}, not torch"
    if variant.noarch:
        # Noarch builds are plain Python: they fit their backend (or any, for universal),
        # whether or not torch is installed yet.
        if variant.backend in ("universal", system.backend):
            return None
        return f"{backend_label(variant.backend)} build; this system uses {backend_label(system.backend)}"
    if system.torch_version is None:
        return "torch is not installed"
    if (variant.arch, variant.os) != (system.arch, system.os):
        return f"{variant.arch}-{variant.os} build; this system is {system.arch}-{system.os}"
    if variant.backend != system.backend:
        return f"{backend_label(variant.backend)} build; this system uses {backend_label(system.backend)}"
    reason = _backend_version_rejection(variant, system)
    if reason is not None:
        return reason
    if variant.backend == "metal" and (system.macos_version is None or system.macos_version < METAL_MIN_MACOS):
        have = f"macOS {dotted(system.macos_version)}" if system.macos_version else "an unknown macOS version"
        return f"Metal builds need macOS {dotted(METAL_MIN_MACOS)} or later; this system has {have}"
    if variant.stable_abi is not None:
        if variant.stable_abi > system.torch_version:
            return f"stable ABI {dotted(variant.stable_abi)} is newer than torch {dotted(system.torch_version)}"
    elif variant.torch_version != system.torch_version:
        assert variant.torch_version is not None
        built, have = dotted(variant.torch_version), dotted(system.torch_version)
        return f"torch {built} build; this system has torch {have}"
    if variant.cxx11 is not None:
        if variant.os != "linux":
            return f"{abi_label(variant.cxx11)} ABI tag on a {variant.os} build; torch has no C++ ABI choice there"
        if system.cxx11 is not None and variant.cxx11 != system.cxx11:
            return f"{abi_label(variant.cxx11)} ABI; this torch uses the {abi_label(system.cxx11)} ABI"
    return None


def _backend_version_rejection(variant: Variant, system: SystemInfo) -> str | None:
    """Why the backend version of an arch build of the system's backend does not fit; None if it does.

    CUDA has minor version compatibility: a build for CUDA x.z runs with CUDA x.y when z <= y.
    ROCm, XPU and CANN builds need the same major.minor.
    """
    built, have = variant.backend_version, system.backend_version
    if built is None or built == have:
        return None
    label = backend_label(variant.backend, built)
    if have is None:
        return f"{label} build; this system's {backend_label(system.backend)} version is unknown"
    if variant.backend == "cuda" and built[0] == have[0] and built[1:] <= have[1:]:
        return None
    if variant.backend == "cuda" and built[0] == have[0]:
        return f"{label} build is newer than this system's {backend_label(system.backend, have)}"
    return f"{label} build; this system has {backend_label(system.backend, have)}"


def _preference(variant: Variant) -> tuple[int, int, int, int, int, str]:
    """Sort key of an acceptable variant: tier, then newest ABI / untagged first, newest backend minor, name."""
    if variant.noarch:
        return (4 if variant.backend == "universal" else 3, 0, 0, 0, 0, variant.name)
    backend_minor = variant.backend_version[-1] if variant.backend_version else 0
    if variant.stable_abi is not None:
        return (1, -variant.stable_abi[0], -variant.stable_abi[1], 0, -backend_minor, variant.name)
    return (2, 0, 0, 0 if variant.cxx11 is None else 1, -backend_minor, variant.name)


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


def _display_name(name: str) -> str:
    """A variant name fit for a one-line message: quoted and shortened when it is not valid."""
    if is_valid_variant_name(name):
        return name
    shown = repr(name)
    return shown if len(shown) <= 60 else shown[:57] + "..."



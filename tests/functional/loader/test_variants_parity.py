"""kernel-deps reads and ranks build variants as the Hugging Face ``kernels`` 0.17.2 loader does.

A lock is shared by kernel-deps and ``kernels``; both must pick the same build from it. The
names below are real: they come from the sources of ``kernels`` and kernel-builder (each
group says where). Every name is parsed field by field by kernel-deps and by ``kernels``'
own ``parse_variant``; every system x repo case is ranked by kernel-deps and by ``kernels``'
own selection code (``kernels.variants._resolve_variant_for_system``, the function its
``resolve_variants`` calls after describing the machine). ``kernels`` runs in one
subprocess for the whole module, from ``.venv/compat/kernels-0.17`` (the Makefile installs
it there beside ``kernels`` 0.16), so neither copy clashes with the other.

Deliberate differences, each tested below with its reason:

- ``tvm-ffi`` builds: ``kernels`` picks them when ``tvm_ffi`` is installed; kernel-deps
  loads torch kernels only and never picks them.
- Noarch names for no known backend (``torch-cann``, ``torch-gpu``): ``kernels`` parses any
  ``torch-<word>`` and then never selects it; kernel-deps treats such folders as not
  variants, so they are neither locked nor downloaded.
- Versions with a leading zero (``torch2013``, ``cu0128``): ``kernels`` reads them as
  2.13 and 12.8 although the name does not round-trip; kernel-deps keeps one spelling per
  build and rejects them.

Not modelled: ``kernels`` rejects every arch build on free-threaded Python before 3.15;
kernel-deps does not describe the interpreter (this suite runs on a GIL build, where
both agree).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernel_deps.core.system import SystemInfo
from kernel_deps.core.variants import parse_variant, rank_variants

KERNELS_017 = Path(sys.prefix) / "compat" / "kernels-0.17"

# --- real variant names ---------------------------------------------------------------------

# huggingface/kernel-builder build-variants.json and its successor in huggingface/kernels,
# nix-builder/build-variants.json: every name in any revision of either file (the builds
# kernel-builder produced, torch 2.5 to 2.13).
BUILD_VARIANTS_JSON = [
    "torch25-cxx11-cu118-x86_64-linux", "torch25-cxx11-cu121-x86_64-linux", "torch25-cxx11-cu124-x86_64-linux",
    "torch25-cxx98-cu118-x86_64-linux", "torch25-cxx98-cu121-x86_64-linux", "torch25-cxx98-cu124-x86_64-linux",
    "torch26-cxx11-cu118-x86_64-linux", "torch26-cxx11-cu124-x86_64-linux", "torch26-cxx11-cu126-aarch64-linux",
    "torch26-cxx11-cu126-x86_64-linux", "torch26-cxx11-rocm62-x86_64-linux", "torch26-cxx98-cu118-x86_64-linux",
    "torch26-cxx98-cu124-x86_64-linux", "torch26-cxx98-cu126-aarch64-linux", "torch26-cxx98-cu126-x86_64-linux",
    "torch27-cxx11-cu118-x86_64-linux", "torch27-cxx11-cu126-aarch64-linux", "torch27-cxx11-cu126-x86_64-linux",
    "torch27-cxx11-cu128-aarch64-linux", "torch27-cxx11-cu128-x86_64-linux", "torch27-cxx11-metal-aarch64-darwin",
    "torch27-cxx11-rocm63-x86_64-linux", "torch27-cxx11-xpu20250-x86_64-linux", "torch27-metal-aarch64-darwin",
    "torch28-cpu-aarch64-darwin", "torch28-cxx11-cpu-aarch64-linux", "torch28-cxx11-cpu-x86_64-linux",
    "torch28-cxx11-cu126-x86_64-linux", "torch28-cxx11-cu128-x86_64-linux", "torch28-cxx11-cu129-aarch64-linux",
    "torch28-cxx11-cu129-x86_64-linux", "torch28-cxx11-rocm63-x86_64-linux", "torch28-cxx11-rocm64-x86_64-linux",
    "torch28-cxx11-xpu20251-x86_64-linux", "torch28-metal-aarch64-darwin", "torch29-cpu-aarch64-darwin",
    "torch29-cxx11-cpu-aarch64-linux", "torch29-cxx11-cpu-x86_64-linux", "torch29-cxx11-cu126-aarch64-linux",
    "torch29-cxx11-cu126-x86_64-linux", "torch29-cxx11-cu128-aarch64-linux", "torch29-cxx11-cu128-x86_64-linux",
    "torch29-cxx11-cu129-aarch64-linux", "torch29-cxx11-cu129-x86_64-linux", "torch29-cxx11-cu130-aarch64-linux",
    "torch29-cxx11-cu130-x86_64-linux", "torch29-cxx11-rocm63-x86_64-linux", "torch29-cxx11-rocm64-x86_64-linux",
    "torch29-cxx11-xpu20252-x86_64-linux", "torch29-metal-aarch64-darwin", "torch210-cpu-aarch64-darwin",
    "torch210-cxx11-cpu-aarch64-linux", "torch210-cxx11-cpu-x86_64-linux", "torch210-cxx11-cu126-aarch64-linux",
    "torch210-cxx11-cu126-x86_64-linux", "torch210-cxx11-cu128-aarch64-linux", "torch210-cxx11-cu128-x86_64-linux",
    "torch210-cxx11-cu130-aarch64-linux", "torch210-cxx11-cu130-x86_64-linux", "torch210-cxx11-rocm70-x86_64-linux",
    "torch210-cxx11-rocm71-x86_64-linux", "torch210-cxx11-xpu20253-x86_64-linux", "torch210-metal-aarch64-darwin",
    "torch211-cpu-aarch64-darwin", "torch211-cxx11-cpu-aarch64-linux", "torch211-cxx11-cpu-x86_64-linux",
    "torch211-cxx11-cu126-aarch64-linux", "torch211-cxx11-cu126-x86_64-linux", "torch211-cxx11-cu128-aarch64-linux",
    "torch211-cxx11-cu128-x86_64-linux", "torch211-cxx11-cu130-aarch64-linux", "torch211-cxx11-cu130-x86_64-linux",
    "torch211-cxx11-rocm71-x86_64-linux", "torch211-cxx11-rocm72-x86_64-linux", "torch211-cxx11-xpu20253-x86_64-linux",
    "torch211-metal-aarch64-darwin", "torch212-cpu-aarch64-darwin", "torch212-cxx11-cpu-aarch64-linux",
    "torch212-cxx11-cpu-x86_64-linux", "torch212-cxx11-cu126-aarch64-linux", "torch212-cxx11-cu126-x86_64-linux",
    "torch212-cxx11-cu130-aarch64-linux", "torch212-cxx11-cu130-x86_64-linux", "torch212-cxx11-cu132-aarch64-linux",
    "torch212-cxx11-cu132-x86_64-linux", "torch212-cxx11-rocm71-x86_64-linux", "torch212-cxx11-rocm72-x86_64-linux",
    "torch212-cxx11-xpu20253-x86_64-linux", "torch212-metal-aarch64-darwin", "torch213-cpu-aarch64-darwin",
    "torch213-cxx11-cpu-aarch64-linux", "torch213-cxx11-cpu-x86_64-linux", "torch213-cxx11-cu126-aarch64-linux",
    "torch213-cxx11-cu126-x86_64-linux", "torch213-cxx11-cu130-aarch64-linux", "torch213-cxx11-cu130-x86_64-linux",
    "torch213-cxx11-cu132-aarch64-linux", "torch213-cxx11-cu132-x86_64-linux", "torch213-cxx11-rocm71-x86_64-linux",
    "torch213-cxx11-rocm72-x86_64-linux", "torch213-cxx11-xpu20253-x86_64-linux", "torch213-cxx11-xpu20260-x86_64-linux",
    "torch213-metal-aarch64-darwin",
]  # fmt: skip

# huggingface/kernels kernels/tests/unit/core/test_variants.py: NOARCH_VARIANT_STRINGS, and names from
# the products VARIANT_STRINGS and STABLE_ABI_VARIANT_STRINGS spell out (untagged linux
# builds, tvm-ffi builds, stable-ABI builds of every backend).
KERNELS_TESTS = [
    "torch-cpu", "torch-cuda", "torch-metal", "torch-neuron", "torch-rocm", "torch-tpu", "torch-xpu", "torch-npu",
    "torch-universal",
    "torch25-cpu-x86_64-linux", "torch29-cpu-aarch64-linux", "torch210-cu130-x86_64-linux",
    "torch29-rocm63-x86_64-linux", "torch210-xpu20252-x86_64-linux", "torch25-cxx98-rocm64-aarch64-linux",
    "torch29-cxx98-xpu20252-x86_64-linux", "torch210-cxx11-rocm64-x86_64-linux", "torch25-metal-aarch64-darwin",
    "tvm-ffi01-cpu-aarch64-darwin", "tvm-ffi01-metal-aarch64-darwin", "tvm-ffi01-cu128-x86_64-linux",
    "tvm-ffi01-rocm63-aarch64-linux", "tvm-ffi01-xpu20252-x86_64-linux",
    "torch-stable-abi29-cu128-x86_64-linux", "torch-stable-abi211-cu128-x86_64-linux",
    "torch-stable-abi211-cpu-aarch64-linux", "torch-stable-abi29-cu130-aarch64-linux",
    "torch-stable-abi211-rocm64-x86_64-linux", "torch-stable-abi29-xpu20252-x86_64-linux",
    "torch-stable-abi211-metal-aarch64-darwin", "torch-stable-abi29-cpu-aarch64-darwin",
]  # fmt: skip

# huggingface/kernels documentation and kernel-builder templates:
# docs/source/kernel-requirements.md (untagged linux builds), docs/source/cli-versions.md and
# docs/source/cli-lock.md (windows builds), kernel-builder/src/pyproject/templates/torch/
# build-variants.cmake (windows, stable-ABI and three-digit torch examples), and the
# windows XPU build of build2cmake/src/templates/windows.cmake, which has no XPU version
# and is not a valid name for either library.
KERNELS_DOCS = [
    "torch211-cu128-x86_64-linux", "torch211-cpu-x86_64-linux", "torch210-cu128-x86_64-windows",
    "torch28-cxx11-cu126-aarch64-linux", "torch27-cu124-x86_64-windows", "torch-stable-abi211-cu124-x86_64-linux",
    "torch271-cxx11-cu124-x86_64-linux", "torch291-xpu-x86_64-windows",
]  # fmt: skip

REAL_NAMES = BUILD_VARIANTS_JSON + KERNELS_TESTS + KERNELS_DOCS

# Names kernels parses although they are no build of any backend it knows, or not in the
# one spelling of their build; kernel-deps does not treat them as variants (see above).
DELIBERATELY_INVALID = ["torch-cann", "torch-gpu", "torch2013-cxx11-cpu-x86_64-linux", "torch213-cxx11-cu0128-x86_64-linux"]

# --- systems x repos ------------------------------------------------------------------------

CURRENT = [n for n in BUILD_VARIANTS_JSON if n.startswith(("torch212", "torch213"))]
TORCH29 = [n for n in BUILD_VARIANTS_JSON if n.startswith("torch29")]
NOARCH = ["torch-universal", "torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu", "torch-metal",
          "torch-npu", "torch-neuron", "torch-tpu"]  # fmt: skip
STABLE = ["torch-stable-abi29-cu128-x86_64-linux", "torch-stable-abi211-cu124-x86_64-linux",
          "torch-stable-abi211-cu128-x86_64-linux", "torch211-cxx11-cu128-x86_64-linux", "torch211-cu128-x86_64-linux",
          "torch-stable-abi211-cpu-aarch64-linux", "torch-cuda", "torch-universal"]  # fmt: skip


def system(torch, backend, version=None, arch="x86_64", os_name="linux", cxx11=True, macos=None) -> SystemInfo:
    """A system as ``detect_system`` describes it (no C++ ABI off linux or without torch)."""
    abi = cxx11 if torch is not None and os_name == "linux" else None
    return SystemInfo(torch, abi, backend, version, arch, os_name, macos)


CASES = {
    # CUDA minor version compatibility: the newest build of the same major not newer than the system
    "cuda-13.2-newest": (system((2, 13), "cuda", (13, 2)), CURRENT + NOARCH),
    "cuda-13.1-takes-13.0": (system((2, 13), "cuda", (13, 1)), CURRENT + NOARCH),
    "torch212-cuda-12.8-takes-12.6": (system((2, 12), "cuda", (12, 8)), CURRENT),
    "torch29-cuda-12.9": (system((2, 9), "cuda", (12, 9)), TORCH29),
    "cuda-12.4-only-noarch": (system((2, 13), "cuda", (12, 4)), CURRENT + NOARCH),
    "aarch64-cuda-13.0": (system((2, 13), "cuda", (13, 0), arch="aarch64"), CURRENT + NOARCH),
    "cxx98-torch25": (system((2, 5), "cuda", (12, 4), cxx11=False), BUILD_VARIANTS_JSON),
    # ROCm and XPU need the same major.minor
    "rocm-7.1": (system((2, 12), "rocm", (7, 1)), CURRENT + NOARCH),
    "rocm-7.0-only-noarch": (system((2, 13), "rocm", (7, 0)), CURRENT + NOARCH),
    "xpu-2025.3": (system((2, 12), "xpu", (2025, 3)), CURRENT + NOARCH),
    "xpu-2026.0-torch212": (system((2, 12), "xpu", (2026, 0)), CURRENT + NOARCH),
    # Metal needs macOS 26; CPU on a Mac without MPS
    "metal-macos-26": (system((2, 13), "metal", os_name="darwin", arch="aarch64", macos=(26, 0)), CURRENT + NOARCH),
    "metal-macos-15": (system((2, 13), "metal", os_name="darwin", arch="aarch64", macos=(15, 6)), CURRENT + NOARCH),
    "darwin-tagged-and-untagged": (system((2, 7), "metal", os_name="darwin", arch="aarch64", macos=(26, 1)),
                                   ["torch27-cxx11-metal-aarch64-darwin", "torch27-metal-aarch64-darwin"]),
    "darwin-cpu": (system((2, 12), "cpu", os_name="darwin", arch="aarch64", macos=(26, 0)), CURRENT + NOARCH),
    # stable ABI first, untagged before tagged
    "stable-abi-first": (system((2, 11), "cuda", (12, 8)), STABLE),
    "stable-abi-too-new": (system((2, 10), "cuda", (12, 8)), STABLE),
    "untagged-first": (system((2, 11), "cpu"), ["torch211-cxx11-cpu-x86_64-linux", "torch211-cpu-x86_64-linux"]),
    "windows-cuda": (system((2, 10), "cuda", (12, 8), os_name="windows"),
                     KERNELS_DOCS + ["torch210-cxx11-cu128-x86_64-linux", "torch-cuda"]),
    # other backends: noarch builds of their own
    "cann-8.1": (system((2, 9), "cann", (8, 1), arch="aarch64"), TORCH29 + NOARCH),
    "neuron": (system((2, 9), "neuron"), TORCH29 + NOARCH),
    "tpu": (system((2, 9), "tpu"), TORCH29 + NOARCH),
    # without torch: universal and the noarch build of a backend told without torch
    "no-torch-cpu": (system(None, "cpu"), CURRENT + NOARCH),
    "no-torch-cudart": (system(None, "cuda", (12, 8)), CURRENT + NOARCH),
}  # fmt: skip

# Run by kernels 0.17.2 itself: its parse of every name and its ranking of every case.
KERNELS_SCRIPT = r"""
import json, sys
import importlib.metadata as metadata
from packaging.version import Version
from kernels import backends
from kernels.variants import ArchVariant, Torch, TorchStableAbi, _resolve_variant_for_system, parse_variant

assert metadata.version("kernels") == "0.17.2", metadata.version("kernels")
request = json.load(sys.stdin)

def version(pair):
    return None if pair is None else Version(".".join(map(str, pair)))

def fields(name):
    try:
        v = parse_variant(name)
    except ValueError:
        return None
    if not isinstance(v, ArchVariant):
        return {"noarch": v.arch.backend_name}
    framework = {Torch: "torch", TorchStableAbi: "torch-stable-abi"}.get(type(v.framework), "tvm-ffi")
    backend = v.arch.backend
    backend_version = getattr(backend, "version", None)
    return {
        "framework": framework,
        "version": [v.framework.version.major, v.framework.version.minor],
        "cxx11": getattr(v.framework, "cxx11_abi", None),
        "backend": backend.name,
        "backend_version": None if backend_version is None else [backend_version.major, backend_version.minor],
        "arch": v.arch.platform,
        "os": v.arch.os,
        "round_trip": v.variant_str == name,
    }

BACKENDS = {"cuda": backends.CUDA, "rocm": backends.ROCm, "xpu": backends.XPU, "cann": backends.CANN}

def rank(case):
    kind = case["backend"]
    if kind in BACKENDS:
        selected = BACKENDS[kind](version=version(case["backend_version"]))
    else:
        selected = {"cpu": backends.CPU, "metal": backends.Metal, "neuron": backends.Neuron, "tpu": backends.TPU}[kind]()
    # As kernels' get_variants does, folders that are not variants are left out.
    variants = [parse_variant(n) for n in case["names"] if fields(n) is not None]
    accepted, _ = _resolve_variant_for_system(
        variants=variants, selected_backend=selected, cpu=case["arch"], os=case["os"],
        torch_version=version(case["torch"]), torch_cxx11_abi=case["cxx11"],
        tvm_ffi_version=version(case["tvm_ffi"]), macos_version=version(case["macos"]),
    )
    return [v.variant_str for v in accepted]

print(json.dumps({
    "names": {name: fields(name) for name in request["names"]},
    "cases": {key: rank(case) for key, case in request["cases"].items()},
}))
"""


def kernels_case(info: SystemInfo, names: list[str], tvm_ffi=None) -> dict[str, Any]:
    """A case as kernels' selection code takes it: the same system, spelled out."""
    return {
        "torch": info.torch_version, "cxx11": info.cxx11, "backend": info.backend,
        "backend_version": info.backend_version, "arch": info.arch, "os": info.os,
        "macos": info.macos_version, "tvm_ffi": tvm_ffi, "names": names,
    }  # fmt: skip


TVM_FFI_CASE = (system((2, 13), "cuda", (12, 8)), ["tvm-ffi01-cu128-x86_64-linux", "torch213-cxx11-cu126-x86_64-linux",
                                                  "torch-cuda", "torch-universal"])  # fmt: skip


@pytest.fixture(scope="module")
def kernels_017() -> dict[str, Any]:
    """What kernels 0.17.2 answers for every name and case (one subprocess for the module)."""
    if not (KERNELS_017 / "kernels" / "variants.py").is_file():
        pytest.fail(
            f"kernels 0.17.2 is not installed in {KERNELS_017}; run 'make' (or 'make test'), "
            "whose .venv recipe installs it",
            pytrace=False,
        )
    cases = {key: kernels_case(info, names) for key, (info, names) in CASES.items()}
    cases["tvm-ffi-installed"] = kernels_case(*TVM_FFI_CASE, tvm_ffi=(0, 1))
    request = {"names": REAL_NAMES + DELIBERATELY_INVALID, "cases": cases}
    env = {**os.environ, "PYTHONPATH": str(KERNELS_017)}
    result = subprocess.run(
        [sys.executable, "-c", KERNELS_SCRIPT], input=json.dumps(request), env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def ours(name: str) -> dict[str, Any] | None:
    """kernel-deps' parse of ``name`` in the shape the kernels script reports."""
    variant = parse_variant(name)
    if variant is None:
        return None
    if variant.noarch:
        return {"noarch": "npu" if variant.backend == "cann" else variant.backend}
    framework = "torch-stable-abi" if variant.stable_abi is not None and variant.framework == "torch" else variant.framework
    version = variant.torch_version or variant.stable_abi
    assert version is not None
    return {
        "framework": framework,
        "version": list(version),
        "cxx11": variant.cxx11,
        "backend": variant.backend,
        "backend_version": None if variant.backend_version is None else list(variant.backend_version),
        "arch": variant.arch,
        "os": variant.os,
        "round_trip": True,
    }


def test_the_tables_are_real_and_large_enough() -> None:
    assert len(set(REAL_NAMES)) == len(REAL_NAMES) >= 100
    assert len(CASES) >= 15


@pytest.mark.parametrize("name", REAL_NAMES)
def test_real_names_parse_like_kernels(kernels_017: dict[str, Any], name: str) -> None:
    assert ours(name) == kernels_017["names"][name]


def test_every_real_name_but_one_is_valid(kernels_017: dict[str, Any]) -> None:
    invalid = [name for name in REAL_NAMES if parse_variant(name) is None]
    assert invalid == ["torch291-xpu-x86_64-windows"]  # an XPU build must name its version, in both
    assert kernels_017["names"]["torch291-xpu-x86_64-windows"] is None


@pytest.mark.parametrize("name", DELIBERATELY_INVALID)
def test_names_kernels_parses_but_never_round_trips_or_selects(kernels_017: dict[str, Any], name: str) -> None:
    theirs = kernels_017["names"][name]
    assert parse_variant(name) is None and theirs is not None
    # torch-cann / torch-gpu are no backend's noarch build in kernels either (Ascend's is
    # torch-npu); the others read as another build's name.
    assert theirs.get("noarch") in ("cann", "gpu") or theirs["round_trip"] is False


@pytest.mark.parametrize("key", CASES)
def test_cases_rank_like_kernels(kernels_017: dict[str, Any], key: str) -> None:
    info, names = CASES[key]
    accepted, rejected = rank_variants(names, info)
    assert accepted == kernels_017["cases"][key]
    assert set(rejected) == set(names) - set(accepted)


def test_the_cases_cover_picks_and_refusals(kernels_017: dict[str, Any]) -> None:
    picks = {key: (ranked or [None])[0] for key, ranked in kernels_017["cases"].items()}
    assert picks["cuda-13.1-takes-13.0"] == "torch213-cxx11-cu130-x86_64-linux"
    assert picks["torch212-cuda-12.8-takes-12.6"] == "torch212-cxx11-cu126-x86_64-linux"
    assert picks["torch29-cuda-12.9"] == "torch29-cxx11-cu129-x86_64-linux"
    assert picks["stable-abi-first"] == "torch-stable-abi211-cu128-x86_64-linux"
    assert picks["untagged-first"] == "torch211-cpu-x86_64-linux"
    assert picks["metal-macos-15"] == "torch-metal"
    assert picks["cann-8.1"] == "torch-npu"
    assert picks["no-torch-cudart"] == "torch-cuda"
    assert picks["xpu-2026.0-torch212"] == "torch-xpu"


def test_tvm_ffi_builds_are_never_picked(kernels_017: dict[str, Any]) -> None:
    # kernels would load the tvm-ffi build when tvm_ffi is installed; kernel-deps loads torch
    # kernels only, and otherwise ranks the same builds in the same order.
    info, names = TVM_FFI_CASE
    theirs = kernels_017["cases"]["tvm-ffi-installed"]
    assert "tvm-ffi01-cu128-x86_64-linux" in theirs
    accepted, rejected = rank_variants(names, info)
    assert accepted == [name for name in theirs if not name.startswith("tvm-ffi")]
    assert rejected == {"tvm-ffi01-cu128-x86_64-linux": "built for tvm-ffi, not torch"}

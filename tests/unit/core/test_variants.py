"""Variant names parse, rank and get rejected with a reason; this machine describes itself."""

from __future__ import annotations

import ctypes.util
import platform
import subprocess
import sys
from dataclasses import replace
from types import ModuleType, SimpleNamespace

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from kernel_deps.core.errors import KernelDepsError, UsageError
from kernel_deps.core.system import SystemInfo, detect_system
from kernel_deps.core.variants import (
    InvalidVariantError,
    NoMatchingVariantError,
    Variant,
    exact_build_name,
    is_valid_variant_name,
    parse_variant,
    rank_variants,
    select_variant,
    system_for_variant,
)

CUDA_128 = SystemInfo((2, 13), True, "cuda", (12, 8), "x86_64", "linux")
CPU_ONLY = SystemInfo((2, 13), True, "cpu", None, "x86_64", "linux")
DARWIN_METAL = SystemInfo((2, 9), None, "metal", None, "aarch64", "darwin", (26, 0))
NO_TORCH = SystemInfo(None, None, "cpu", None, "x86_64", "linux")


def _variant(name: str, framework: str = "torch", torch_version=None, stable_abi=None, cxx11=None,
             backend: str = "cpu", backend_version=None, arch=None, os=None, noarch: bool = False) -> Variant:
    return Variant(name, framework, torch_version, stable_abi, cxx11, backend, backend_version, arch, os, noarch)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(n, v, id=n)
        for n, v in [
            ("torch213-cxx11-cu128-x86_64-linux",
             dict(torch_version=(2, 13), cxx11=True, backend="cuda", backend_version=(12, 8), arch="x86_64", os="linux")),
            ("torch27-cxx98-cu118-x86_64-linux",
             dict(torch_version=(2, 7), cxx11=False, backend="cuda", backend_version=(11, 8), arch="x86_64", os="linux")),
            ("torch29-cxx11-cu130-aarch64-linux",
             dict(torch_version=(2, 9), cxx11=True, backend="cuda", backend_version=(13, 0), arch="aarch64", os="linux")),
            ("torch213-cxx11-rocm63-x86_64-linux",
             dict(torch_version=(2, 13), cxx11=True, backend="rocm", backend_version=(6, 3), arch="x86_64", os="linux")),
            ("torch213-cxx11-xpu20251-x86_64-linux",
             dict(torch_version=(2, 13), cxx11=True, backend="xpu", backend_version=(2025, 1), arch="x86_64", os="linux")),
            ("torch213-cxx11-cpu-x86_64-linux",
             dict(torch_version=(2, 13), cxx11=True, backend="cpu", arch="x86_64", os="linux")),
            ("torch213-cxx11-cpu-aarch64-linux",
             dict(torch_version=(2, 13), cxx11=True, backend="cpu", arch="aarch64", os="linux")),
            ("torch20-cxx11-cpu-x86_64-linux",
             dict(torch_version=(2, 0), cxx11=True, backend="cpu", arch="x86_64", os="linux")),
            ("torch29-metal-aarch64-darwin",
             dict(torch_version=(2, 9), backend="metal", arch="aarch64", os="darwin")),
            ("torch28-cpu-aarch64-darwin",
             dict(torch_version=(2, 8), backend="cpu", arch="aarch64", os="darwin")),
            ("torch210-cu128-x86_64-windows",
             dict(torch_version=(2, 10), backend="cuda", backend_version=(12, 8), arch="x86_64", os="windows")),
            ("torch-stable-abi29-cu128-x86_64-linux",
             dict(stable_abi=(2, 9), backend="cuda", backend_version=(12, 8), arch="x86_64", os="linux")),
            ("torch-stable-abi29-cpu-x86_64-linux",
             dict(stable_abi=(2, 9), backend="cpu", arch="x86_64", os="linux")),
            ("torch-stable-abi211-metal-aarch64-darwin",
             dict(stable_abi=(2, 11), backend="metal", arch="aarch64", os="darwin")),
            ("tvm-ffi01-cu128-x86_64-linux",
             dict(framework="tvm-ffi", stable_abi=(0, 1), backend="cuda", backend_version=(12, 8), arch="x86_64", os="linux")),
            ("torch-universal", dict(backend="universal", noarch=True)),
            ("torch-cpu", dict(backend="cpu", noarch=True)),
            ("torch-cuda", dict(backend="cuda", noarch=True)),
            ("torch-rocm", dict(backend="rocm", noarch=True)),
            ("torch-xpu", dict(backend="xpu", noarch=True)),
            ("torch-metal", dict(backend="metal", noarch=True)),
            ("torch-npu", dict(backend="cann", noarch=True)),
            ("torch-neuron", dict(backend="neuron", noarch=True)),
            ("torch-tpu", dict(backend="tpu", noarch=True)),
            # builds without the (historical) C++ ABI tag on linux
            ("torch211-cu128-x86_64-linux",
             dict(torch_version=(2, 11), backend="cuda", backend_version=(12, 8), arch="x86_64", os="linux")),
            ("torch29-cpu-aarch64-linux", dict(torch_version=(2, 9), backend="cpu", arch="aarch64", os="linux")),
            ("torch210-xpu20252-x86_64-linux",
             dict(torch_version=(2, 10), backend="xpu", backend_version=(2025, 2), arch="x86_64", os="linux")),
            # a tag on another os: a real name, parsed, never chosen
            ("torch27-cxx11-metal-aarch64-darwin",
             dict(torch_version=(2, 7), cxx11=True, backend="metal", arch="aarch64", os="darwin")),
            ("torch213-cxx11-cann81-aarch64-linux",
             dict(torch_version=(2, 13), cxx11=True, backend="cann", backend_version=(8, 1), arch="aarch64", os="linux")),
            ("torch213-neuron-x86_64-linux", dict(torch_version=(2, 13), backend="neuron", arch="x86_64", os="linux")),
            ("torch-stable-abi210-tpu-x86_64-linux", dict(stable_abi=(2, 10), backend="tpu", arch="x86_64", os="linux")),
        ]
    ],
)
def test_valid_names_parse_to_their_fields(name: str, expected: dict) -> None:
    assert parse_variant(name) == _variant(name, **expected)
    assert is_valid_variant_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "", "torch", "torch-", "torch-cann", "torch-npu1", "torch-gpu", "torch-Universal", "TORCH-universal", "torch-universal ",
        " torch-universal", "torch-universal\n", "torch-universal/", "torch-cuda12",
        # grammar violations
        "torch-stable-abi29-cxx11-cu128-x86_64-linux",  # only exact torch builds have an ABI part
        "tvm-ffi01-cxx11-cu128-x86_64-linux",
        "torch2-cxx11-cpu-x86_64-linux",          # torch needs major and minor
        "torch2013-cxx11-cpu-x86_64-linux",       # minor with a leading zero
        "torch213-cxx11-cu-x86_64-linux",         # CUDA needs a version
        "torch213-cxx11-cu8-x86_64-linux",
        "torch213-cxx11-cu0128-x86_64-linux",
        "torch213-cxx11-rocm-x86_64-linux",
        "torch213-cxx11-cpu1-x86_64-linux",       # CPU has no version
        "torch213-cxx11-metal3-aarch64-darwin",
        "torch213-neuron2-x86_64-linux",
        "torch213-tpu7-x86_64-linux",
        "torch213-cxx11-cann-aarch64-linux",      # CANN needs a version
        "torch213-cxx11-npu10-x86_64-linux",
        "torch213-cxx17-cpu-x86_64-linux",
        "torch213-cxx11-cpu-x86_64-freebsd",
        "torch213-cxx11-cpu-x86_64",
        "torch213-cxx11-cpu-X86_64-linux",
        "torch213-cxx11-cpu--linux",
        "torch213-cxx11-cu128-x86_64-linux-extra",
        "torch213_cxx11_cu128_x86_64_linux",
        "torch٢١٣-cxx11-cpu-x86_64-linux",        # non-ASCII digits
        "torch213-cxx11-cu１２８-x86_64-linux",
        "pytorch213-cxx11-cpu-x86_64-linux",
        "jax04-cu128-x86_64-linux",
        # hostile folder names
        "..", ".", "../torch-universal", "torch-universal/..", "torch213-cxx11-cpu-x86_64-linux/../../etc",
        "build/torch-universal", "torch-universal\\x", "..\\torch-universal", "torch213-cxx11-cpu-x86_64-linux\x00",
        "torch-universal\t", "torch 213-cxx11-cpu-x86_64-linux", "~/torch-universal", "/torch-universal",
        "torch213-cxx11-cpu-x86_64-linux" + "x" * 200,
    ],
)
def test_invalid_and_hostile_names_are_rejected(name: str) -> None:
    assert parse_variant(name) is None
    assert not is_valid_variant_name(name)


@pytest.mark.parametrize("value", [None, 213, b"torch-universal", ["torch-universal"]])
def test_non_strings_are_not_variants(value: object) -> None:
    assert parse_variant(value) is None  # type: ignore[arg-type]


@given(st.text())
def test_parse_variant_never_raises(text: str) -> None:
    variant = parse_variant(text)
    if variant is not None:
        assert variant.name == text
        assert not any(bad in text for bad in ("/", "\\", "..", " ", "\n", "\t"))


@given(st.from_regex(r"torch[0-9]{1,4}-(cxx11|cxx98)-(cpu|cu[0-9]{1,4}|rocm[0-9]{1,3})-(x86_64|aarch64)-linux", fullmatch=True))
def test_grammar_like_text_never_raises(text: str) -> None:
    variant = parse_variant(text)
    if variant is not None:
        assert variant.torch_version is not None and variant.cxx11 is not None


# The full preference order on one CUDA 12.8 / torch 2.13 / x86_64 linux system.
ALL_FOR_CUDA = [
    "torch-universal",
    "torch-cuda",
    "torch-stable-abi29-cu128-x86_64-linux",
    "torch213-cxx11-cu126-x86_64-linux",
    "torch-stable-abi212-cu128-x86_64-linux",
    "torch213-cxx11-cu128-x86_64-linux",
    "torch-stable-abi213-cu126-x86_64-linux",
    "torch213-cu126-x86_64-linux",
    "torch-stable-abi213-cu128-x86_64-linux",
]


def test_full_preference_order() -> None:
    accepted, rejected = rank_variants(ALL_FOR_CUDA, CUDA_128)
    assert accepted == [
        # stable ABI first: newest ABI, then newest CUDA minor
        "torch-stable-abi213-cu128-x86_64-linux",
        "torch-stable-abi213-cu126-x86_64-linux",
        "torch-stable-abi212-cu128-x86_64-linux",
        "torch-stable-abi29-cu128-x86_64-linux",
        # then exact builds: untagged before tagged, then newest CUDA minor
        "torch213-cu126-x86_64-linux",
        "torch213-cxx11-cu128-x86_64-linux",
        "torch213-cxx11-cu126-x86_64-linux",
        "torch-cuda",
        "torch-universal",
    ]
    assert rejected == {}
    assert select_variant("kernels-test/activation", reversed(ALL_FOR_CUDA), CUDA_128) == accepted[0]


@pytest.mark.parametrize(
    ("system", "names", "accepted"),
    [
        (CUDA_128, ["torch-cpu", "torch-universal", "torch213-cxx11-cpu-x86_64-linux"], ["torch-universal"]),
        (CPU_ONLY, ["torch-cpu", "torch-cuda", "torch-universal", "torch213-cxx11-cpu-x86_64-linux",
                    "torch213-cxx11-cu128-x86_64-linux", "torch-stable-abi29-cpu-x86_64-linux"],
         ["torch-stable-abi29-cpu-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux", "torch-cpu", "torch-universal"]),
        (DARWIN_METAL, ["torch-metal", "torch29-metal-aarch64-darwin", "torch28-metal-aarch64-darwin",
                        "torch29-cpu-aarch64-darwin", "torch-stable-abi28-metal-aarch64-darwin", "torch-universal",
                        "torch29-cxx11-metal-aarch64-darwin"],
         ["torch-stable-abi28-metal-aarch64-darwin", "torch29-metal-aarch64-darwin", "torch-metal", "torch-universal"]),
        (replace(DARWIN_METAL, macos_version=(15, 6)),
         ["torch-metal", "torch29-metal-aarch64-darwin", "torch-stable-abi28-metal-aarch64-darwin", "torch-universal"],
         ["torch-metal", "torch-universal"]),
        (NO_TORCH, ["torch-universal", "torch-cpu", "torch-cuda", "torch213-cxx11-cpu-x86_64-linux"],
         ["torch-cpu", "torch-universal"]),
        (SystemInfo(None, None, "cuda", (12, 8), "x86_64", "linux"),
         ["torch-universal", "torch-cpu", "torch-cuda", "torch213-cxx11-cu128-x86_64-linux"],
         ["torch-cuda", "torch-universal"]),
        (SystemInfo((2, 13), True, "cuda", (12, 9), "x86_64", "linux"),
         ["torch213-cxx11-cu128-x86_64-linux", "torch213-cxx11-cu126-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux",
          "torch213-cxx11-cu118-x86_64-linux", "torch213-cxx11-cu129-aarch64-linux"],
         ["torch213-cxx11-cu128-x86_64-linux", "torch213-cxx11-cu126-x86_64-linux"]),
        (SystemInfo((2, 12), True, "cuda", (12, 8), "x86_64", "linux"),
         ["torch212-cxx11-cu126-x86_64-linux", "torch212-cxx11-cu130-x86_64-linux", "torch212-cxx11-cu132-x86_64-linux"],
         ["torch212-cxx11-cu126-x86_64-linux"]),
        (SystemInfo((2, 11), True, "cpu", None, "aarch64", "linux"),
         ["torch211-cxx11-cpu-aarch64-linux", "torch211-cpu-aarch64-linux", "torch211-cxx98-cpu-aarch64-linux"],
         ["torch211-cpu-aarch64-linux", "torch211-cxx11-cpu-aarch64-linux"]),
        (SystemInfo((2, 13), True, "cann", (8, 1), "aarch64", "linux"),
         ["torch213-cxx11-cann81-aarch64-linux", "torch213-cxx11-cann80-aarch64-linux", "torch-npu", "torch-cpu",
          "torch213-cxx11-cpu-aarch64-linux", "torch-universal"],
         ["torch213-cxx11-cann81-aarch64-linux", "torch-npu", "torch-universal"]),
        (SystemInfo((2, 13), True, "neuron", None, "x86_64", "linux"),
         ["torch213-neuron-x86_64-linux", "torch-neuron", "torch-cpu", "torch213-cxx11-cpu-x86_64-linux", "torch-tpu"],
         ["torch213-neuron-x86_64-linux", "torch-neuron"]),
        (SystemInfo((2, 13), True, "tpu", None, "x86_64", "linux"),
         ["torch-tpu", "torch-stable-abi210-tpu-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux", "torch-neuron"],
         ["torch-stable-abi210-tpu-x86_64-linux", "torch-tpu"]),
        (SystemInfo((2, 10), None, "cuda", (12, 8), "x86_64", "windows"),
         ["torch210-cu128-x86_64-windows", "torch210-cxx11-cu128-x86_64-linux", "torch-cuda"],
         ["torch210-cu128-x86_64-windows", "torch-cuda"]),
        (SystemInfo((2, 13), True, "xpu", (2025, 1), "x86_64", "linux"),
         ["torch213-cxx11-xpu20251-x86_64-linux", "torch213-cxx11-xpu20252-x86_64-linux", "torch-xpu"],
         ["torch213-cxx11-xpu20251-x86_64-linux", "torch-xpu"]),
        (SystemInfo((2, 13), True, "rocm", (6, 3), "x86_64", "linux"),
         ["torch213-cxx11-rocm64-x86_64-linux", "torch213-cxx11-rocm63-x86_64-linux", "torch-rocm", "torch-cuda"],
         ["torch213-cxx11-rocm63-x86_64-linux", "torch-rocm"]),
    ],
    ids=["cuda", "cpu-only", "darwin-metal", "macos-15", "no-torch", "no-torch-cudart", "cuda-minor",
         "older-cuda-minor", "untagged", "cann", "neuron", "tpu", "windows", "xpu", "rocm"],
)
def test_ranking_on_synthetic_systems(system: SystemInfo, names: list[str], accepted: list[str]) -> None:
    ranked, rejected = rank_variants(names, system)
    assert ranked == accepted
    assert set(rejected) == set(names) - set(accepted)


@pytest.mark.parametrize(
    ("system", "name", "reason"),
    [
        (CUDA_128, "torch29-cxx11-cu128-x86_64-linux", "torch 2.9 build; this system has torch 2.13"),
        (CUDA_128, "torch213-cxx11-cu129-x86_64-linux", "CUDA 12.9 build is newer than this system's CUDA 12.8"),
        (CUDA_128, "torch213-cxx11-cu118-x86_64-linux", "CUDA 11.8 build; this system has CUDA 12.8"),
        (CUDA_128, "torch213-cxx11-cu130-x86_64-linux", "CUDA 13.0 build; this system has CUDA 12.8"),
        (CUDA_128, "torch213-cxx11-cpu-x86_64-linux", "CPU build; this system uses CUDA"),
        (CUDA_128, "torch-cpu", "CPU build; this system uses CUDA"),
        (CUDA_128, "torch-rocm", "ROCm build; this system uses CUDA"),
        (CUDA_128, "torch29-metal-aarch64-darwin", "aarch64-darwin build; this system is x86_64-linux"),
        (CUDA_128, "torch213-cxx11-cu128-aarch64-linux", "aarch64-linux build; this system is x86_64-linux"),
        (CUDA_128, "torch213-cxx98-cu128-x86_64-linux", "cxx98 ABI; this torch uses the cxx11 ABI"),
        (CUDA_128, "tvm-ffi01-cu128-x86_64-linux", "built for tvm-ffi, not torch"),
        (CUDA_128, "../../etc/passwd", "not a valid variant name"),
        (CUDA_128, "torch213-cxx11-rocm63-x86_64-linux", "ROCm build; this system uses CUDA"),
        (SystemInfo((2, 9), True, "cuda", (12, 8), "x86_64", "linux"), "torch-stable-abi211-cu128-x86_64-linux",
         "stable ABI 2.11 is newer than torch 2.9"),
        (SystemInfo((2, 13), False, "cpu", None, "x86_64", "linux"), "torch213-cxx11-cpu-x86_64-linux",
         "cxx11 ABI; this torch uses the cxx98 ABI"),
        (SystemInfo((2, 13), True, "xpu", None, "x86_64", "linux"), "torch213-cxx11-xpu20251-x86_64-linux",
         "XPU 2025.1 build; this system's XPU version is unknown"),
        (CPU_ONLY, "torch-cuda", "CUDA build; this system uses CPU"),
        (DARWIN_METAL, "torch29-cpu-aarch64-darwin", "CPU build; this system uses Metal"),
        (NO_TORCH, "torch-stable-abi29-cpu-x86_64-linux", "torch is not installed"),
        (NO_TORCH, "torch-cuda", "CUDA build; this system uses CPU"),
        (DARWIN_METAL, "torch29-cxx11-metal-aarch64-darwin",
         "cxx11 ABI tag on a darwin build; torch has no C++ ABI choice there"),
        (replace(DARWIN_METAL, macos_version=(15, 6)), "torch29-metal-aarch64-darwin",
         "Metal builds need macOS 26.0 or later; this system has macOS 15.6"),
        (replace(DARWIN_METAL, macos_version=None), "torch-stable-abi29-metal-aarch64-darwin",
         "Metal builds need macOS 26.0 or later; this system has an unknown macOS version"),
        (SystemInfo((2, 13), True, "rocm", (6, 4), "x86_64", "linux"), "torch213-cxx11-rocm63-x86_64-linux",
         "ROCm 6.3 build; this system has ROCm 6.4"),
        (SystemInfo((2, 13), True, "xpu", (2025, 2), "x86_64", "linux"), "torch213-cxx11-xpu20251-x86_64-linux",
         "XPU 2025.1 build; this system has XPU 2025.2"),
        (SystemInfo((2, 13), True, "cann", (8, 2), "aarch64", "linux"), "torch213-cxx11-cann81-aarch64-linux",
         "CANN 8.1 build; this system has CANN 8.2"),
        (SystemInfo((2, 13), True, "cann", None, "aarch64", "linux"), "torch213-cxx11-cann81-aarch64-linux",
         "CANN 8.1 build; this system's CANN version is unknown"),
        (SystemInfo((2, 13), True, "neuron", None, "x86_64", "linux"), "torch-cpu", "CPU build; this system uses Neuron"),
        (SystemInfo((2, 13), True, "tpu", None, "x86_64", "linux"), "torch213-cxx11-cpu-x86_64-linux",
         "CPU build; this system uses TPU"),
        (NO_TORCH, "torch213-cxx11-cpu-x86_64-linux", "torch is not installed"),
    ],
)
def test_every_rejection_reason(system: SystemInfo, name: str, reason: str) -> None:
    assert rank_variants([name], system) == ([], {name: reason})


def test_platform_mismatch_is_reported_before_torch_version() -> None:
    _, rejected = rank_variants(["torch27-cxx98-cu118-aarch64-linux"], CUDA_128)
    assert rejected["torch27-cxx98-cu118-aarch64-linux"] == "aarch64-linux build; this system is x86_64-linux"


def test_duplicates_are_ranked_once() -> None:
    assert rank_variants(["torch-universal", "torch-universal"], CPU_ONLY) == (["torch-universal"], {})


def test_no_match_error_message() -> None:
    with pytest.raises(NoMatchingVariantError) as info:
        select_variant("kernels-test/activation", ["torch29-metal-aarch64-darwin", "torch-cuda"], CPU_ONLY)
    error = info.value
    assert str(error) == error.message == (
        "kernels-test/activation: no variant for this system (torch 2.13, cxx11 ABI, CPU, x86_64-linux); "
        "available: torch29-metal-aarch64-darwin (aarch64-darwin build; this system is x86_64-linux), "
        "torch-cuda (CUDA build; this system uses CPU)"
    )
    assert isinstance(error, KernelDepsError) and error.exit_code == 1
    assert error.repo_id == "kernels-test/activation" and error.system == CPU_ONLY
    assert error.reasons == {
        "torch29-metal-aarch64-darwin": "aarch64-darwin build; this system is x86_64-linux",
        "torch-cuda": "CUDA build; this system uses CPU",
    }


def test_no_match_error_stays_one_line_for_hostile_names() -> None:
    with pytest.raises(NoMatchingVariantError) as info:
        select_variant("org/k", ["evil\nname", "x" * 500], NO_TORCH)
    assert "\n" not in str(info.value)
    assert "'evil\\nname' (not a valid variant name)" in str(info.value)
    assert len(str(info.value)) < 400


def test_no_variants_at_all() -> None:
    with pytest.raises(NoMatchingVariantError, match=r"\(torch not installed, CPU, x86_64-linux\); available: none$"):
        select_variant("org/k", [], NO_TORCH)


@pytest.mark.parametrize(
    ("system", "text"),
    [
        (CUDA_128, "torch 2.13, cxx11 ABI, CUDA 12.8, x86_64-linux"),
        (CPU_ONLY, "torch 2.13, cxx11 ABI, CPU, x86_64-linux"),
        (DARWIN_METAL, "torch 2.9, Metal, aarch64-darwin, macOS 26.0"),
        (SystemInfo((2, 13), True, "cann", (8, 1), "aarch64", "linux"), "torch 2.13, cxx11 ABI, CANN 8.1, aarch64-linux"),
        (SystemInfo(None, None, "cuda", (12, 8), "x86_64", "linux"), "torch not installed, CUDA 12.8, x86_64-linux"),
        (NO_TORCH, "torch not installed, CPU, x86_64-linux"),
        (SystemInfo((2, 7), False, "rocm", (6, 3), "x86_64", "linux"), "torch 2.7, cxx98 ABI, ROCm 6.3, x86_64-linux"),
        (SystemInfo((2, 13), True, "xpu", (2025, 1), "x86_64", "linux"), "torch 2.13, cxx11 ABI, XPU 2025.1, x86_64-linux"),
    ],
)
def test_describe(system: SystemInfo, text: str) -> None:
    assert system.describe() == text


@pytest.mark.parametrize(
    ("name", "system"),
    [
        ("torch213-cxx11-cu128-x86_64-linux", CUDA_128),
        ("torch29-metal-aarch64-darwin", DARWIN_METAL),
        ("torch211-cu128-x86_64-linux", SystemInfo((2, 11), None, "cuda", (12, 8), "x86_64", "linux")),
        ("torch-stable-abi29-cpu-x86_64-linux", SystemInfo((2, 9), None, "cpu", None, "x86_64", "linux")),
    ],
)
def test_system_for_variant(name: str, system: SystemInfo) -> None:
    assert system_for_variant(name) == system
    assert rank_variants([name], system)[0] == [name]


@pytest.mark.parametrize("name", ["../x", "torch-cuda", "torch-universal", "tvm-ffi01-cu128-x86_64-linux"])
def test_system_for_variant_needs_a_torch_arch_build(name: str) -> None:
    with pytest.raises(InvalidVariantError, match="torch213-cxx11-cu128-x86_64-linux") as info:
        system_for_variant(name)
    assert isinstance(info.value, UsageError) and info.value.exit_code == 2


def test_system_for_variant_refuses_a_tag_no_system_uses() -> None:
    with pytest.raises(InvalidVariantError, match="pass it without the tag, like torch27-metal-aarch64-darwin$"):
        system_for_variant("torch27-cxx11-metal-aarch64-darwin")


def test_untagged_target_takes_either_tagged_abi_after_untagged_builds() -> None:
    target = system_for_variant("torch211-cu128-x86_64-linux")
    names = ["torch211-cxx98-cu126-x86_64-linux", "torch211-cxx11-cu128-x86_64-linux", "torch211-cu126-x86_64-linux"]
    assert rank_variants(names, target)[0] == [
        "torch211-cu126-x86_64-linux", "torch211-cxx11-cu128-x86_64-linux", "torch211-cxx98-cu126-x86_64-linux",
    ]


def test_detect_system_matches_torch_on_this_machine() -> None:
    import torch

    system = detect_system()
    major, minor = torch.__version__.split(".")[:2]
    assert system.torch_version == (int(major), int(minor))
    assert system.cxx11 == torch.compiled_with_cxx11_abi()
    expected_arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    assert system.arch == expected_arch
    assert system.os == {"win32": "windows"}.get(sys.platform, sys.platform)
    if torch.version.cuda:
        assert system.backend == "cuda"
        assert system.backend_version == tuple(int(p) for p in torch.version.cuda.split(".")[:2])
    elif not torch.version.hip:
        assert system.backend in ("cpu", "xpu", "metal")
    # This machine's own exact build is its first choice.
    if system.backend in ("cpu", "cuda") and system.os == "linux":
        abi = "cxx11" if system.cxx11 else "cxx98"
        backend = "cpu" if system.backend == "cpu" else "cu%d%d" % system.backend_version
        own = f"torch{major}{minor}-{abi}-{backend}-{system.arch}-{system.os}"
        assert select_variant("org/k", ["torch-universal", own], system) == own


def test_detect_system_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)  # no CUDA runtime library either
    system = detect_system()
    assert (system.torch_version, system.cxx11, system.backend, system.backend_version) == (None, None, "cpu", None)
    names = ["torch-universal", "torch-cpu", "torch-cuda", "torch213-cxx11-cpu-x86_64-linux"]
    assert rank_variants(names, system) == (
        ["torch-cpu", "torch-universal"],
        {"torch-cuda": "CUDA build; this system uses CPU", "torch213-cxx11-cpu-x86_64-linux": "torch is not installed"},
    )


def test_detect_system_without_torch_asks_an_unloadable_cuda_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "/nonexistent/libcudart.so.12")
    assert detect_system().backend == "cpu"


def test_importing_variants_does_not_import_torch() -> None:
    code = "import sys, kernel_deps.core.variants; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


@given(
    torch_version=st.tuples(st.integers(1, 9), st.integers(0, 99)),
    cxx11=st.sampled_from([True, False, None]),
    backend=st.sampled_from(["cpu", "cuda", "rocm", "xpu", "metal", "cann", "neuron", "tpu"]),
    backend_version=st.tuples(st.integers(1, 2100), st.integers(0, 9)),
    arch=st.sampled_from(["x86_64", "aarch64"]),
    os=st.sampled_from(["linux", "darwin", "windows"]),
)
def test_exact_build_names_round_trip(torch_version, cxx11, backend, backend_version, arch, os) -> None:
    assume(backend != "metal" or os == "darwin")
    token = {"cuda": "cu", "rocm": "rocm", "xpu": "xpu", "cann": "cann"}.get(backend)
    backend_part = f"{token}{backend_version[0]}{backend_version[1]}" if token else backend
    abi_part = {True: "-cxx11", False: "-cxx98", None: ""}[cxx11] if os == "linux" else ""
    name = f"torch{torch_version[0]}{torch_version[1]}{abi_part}-{backend_part}-{arch}-{os}"
    expected = _variant(
        name, torch_version=torch_version, cxx11=cxx11 if os == "linux" else None, backend=backend,
        backend_version=backend_version if token else None, arch=arch, os=os,
    )
    assert parse_variant(name) == expected
    assert rank_variants([name], system_for_variant(name)) == ([name], {})


def _fake_torch(version: str = "2.13.0", cuda=None, hip=None, xpu=None, xpu_available=False, mps=False,
                tpu=False, neuron=False, privateuse1="privateuseone"):
    """A stand-in for torch builds this machine does not have (torch is not kernel-deps code)."""
    backends = SimpleNamespace(mps=SimpleNamespace(is_available=lambda: mps))
    if tpu:
        backends.tpu = SimpleNamespace()  # what the torch_tpu extension adds
    module = SimpleNamespace(
        __version__=version,
        compiled_with_cxx11_abi=lambda: True,
        version=SimpleNamespace(cuda=cuda, hip=hip, xpu=xpu),
        xpu=SimpleNamespace(is_available=lambda: xpu_available),
        backends=backends,
        _C=SimpleNamespace(_get_privateuse1_backend_name=lambda: privateuse1),
    )
    if neuron:
        module.neuron = SimpleNamespace()  # what the Neuron extension adds
    return module


@pytest.mark.parametrize(
    ("torch_module", "machine", "platform_name", "expected"),
    [
        (_fake_torch("2.13.0+cu128", cuda="12.8"), "x86_64", "linux", ((2, 13), "cuda", (12, 8), "x86_64", "linux")),
        (_fake_torch("2.9.1+rocm6.3", hip="6.3.42131-fa1d09cbd"), "x86_64", "linux",
         ((2, 9), "rocm", (6, 3), "x86_64", "linux")),
        (_fake_torch("2.13.0+xpu", xpu="20250101"), "x86_64", "linux", ((2, 13), "xpu", (2025, 1), "x86_64", "linux")),
        # as in kernels, an XPU torch is told by its XPU version, not by a device probe
        (_fake_torch("2.13.0", xpu_available=True), "x86_64", "linux", ((2, 13), "cpu", None, "x86_64", "linux")),
        (_fake_torch("2.9.0+cu128", cuda="12.8", tpu=True), "x86_64", "linux", ((2, 9), "tpu", None, "x86_64", "linux")),
        (_fake_torch("2.9.0+cu128", cuda="12.8", neuron=True), "x86_64", "linux",
         ((2, 9), "neuron", None, "x86_64", "linux")),
        (_fake_torch("2.9.0", privateuse1="npu"), "aarch64", "linux", ((2, 9), "cann", (8, 1), "aarch64", "linux")),
        (_fake_torch("2.9.0", mps=True), "arm64", "darwin", ((2, 9), "metal", None, "aarch64", "darwin")),
        (_fake_torch("2.9.0", mps=False), "arm64", "darwin", ((2, 9), "cpu", None, "aarch64", "darwin")),
        (_fake_torch("2.10.0+cu128", cuda="12.8"), "AMD64", "win32", ((2, 10), "cuda", (12, 8), "x86_64", "windows")),
        (_fake_torch("2.13.0a0+gitabc"), "aarch64", "linux", ((2, 13), "cpu", None, "aarch64", "linux")),
    ],
    ids=["cuda", "rocm", "xpu-date", "xpu-probe", "tpu", "neuron", "npu", "mps", "darwin-cpu", "windows", "dev-build"],
)
def test_detect_system_backends(monkeypatch: pytest.MonkeyPatch, torch_module, machine, platform_name, expected) -> None:
    monkeypatch.setitem(sys.modules, "torch", torch_module)
    _fake_torch_npu(monkeypatch, "8.1.RC1")
    monkeypatch.setattr(platform, "machine", lambda: machine)
    monkeypatch.setattr(sys, "platform", platform_name)
    system = detect_system()
    assert (system.torch_version, system.backend, system.backend_version, system.arch, system.os) == expected


def _fake_torch_npu(monkeypatch: pytest.MonkeyPatch, cann_version: str) -> None:
    """torch_npu's report of the CANN toolkit version, as the Ascend extension provides it."""
    for name in ("torch_npu", "torch_npu.utils"):
        monkeypatch.setitem(sys.modules, name, ModuleType(name))
    collect_env = ModuleType("torch_npu.utils.collect_env")
    collect_env.get_cann_version = lambda: cann_version  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch_npu.utils.collect_env", collect_env)


def test_ascend_without_a_readable_cann_version_takes_only_noarch_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", _fake_torch("2.9.0", privateuse1="npu"))
    monkeypatch.setitem(sys.modules, "torch_npu", None)  # torch_npu cannot be imported
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(sys, "platform", "linux")
    system = detect_system()
    assert (system.backend, system.backend_version) == ("cann", None)
    assert rank_variants(["torch29-cxx11-cann81-aarch64-linux", "torch-npu"], system)[0] == ["torch-npu"]


@pytest.mark.parametrize(
    ("release", "macos", "accepted"),
    [
        ("26.0.1", (26, 0), ["torch29-metal-aarch64-darwin", "torch-metal"]),
        ("26", (26, 0), ["torch29-metal-aarch64-darwin", "torch-metal"]),
        ("15.6.1", (15, 6), ["torch-metal"]),
        ("", None, ["torch-metal"]),
    ],
)
def test_metal_builds_need_macos_26(monkeypatch: pytest.MonkeyPatch, release: str, macos, accepted) -> None:
    monkeypatch.setitem(sys.modules, "torch", _fake_torch("2.9.0", mps=True))
    monkeypatch.setattr(platform, "machine", lambda: "arm64")
    monkeypatch.setattr(platform, "mac_ver", lambda: (release, ("", "", ""), "arm64"))
    monkeypatch.setattr(sys, "platform", "darwin")
    system = detect_system()
    assert (system.backend, system.cxx11, system.macos_version) == ("metal", None, macos)
    assert rank_variants(["torch29-metal-aarch64-darwin", "torch-metal"], system)[0] == accepted


@pytest.mark.parametrize(
    ("system", "name"),
    [
        (SystemInfo((2, 13), True, "cpu", None, "x86_64", "linux"), "torch213-cxx11-cpu-x86_64-linux"),
        (SystemInfo((2, 9), True, "cuda", (12, 8), "x86_64", "linux"), "torch29-cxx11-cu128-x86_64-linux"),
        (SystemInfo((2, 9), False, "rocm", (6, 3), "x86_64", "linux"), "torch29-cxx98-rocm63-x86_64-linux"),
        (SystemInfo((2, 10), None, "cuda", (13, 0), "aarch64", "linux"), "torch210-cu130-aarch64-linux"),
        (SystemInfo((2, 9), None, "metal", None, "aarch64", "darwin", (26, 0)), "torch29-metal-aarch64-darwin"),
        (SystemInfo(None, None, "cuda", (12, 8), "x86_64", "linux"), None),
    ],
)
def test_the_exact_build_named_for_a_system_is_one_it_takes(system: SystemInfo, name: str | None) -> None:
    # The build `kernels lock` reads early at main: the one this machine would load, when
    # the kernel has it.
    assert exact_build_name(system) == name
    if name is not None:
        assert select_variant("kernels-test/x", [name, "torch-universal"], system) == name

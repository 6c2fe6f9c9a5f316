"""Variant names parse, rank and get rejected with a reason; this machine describes itself."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel_deps.errors import KernelDepsError, UsageError
from kernel_deps.variants import (
    InvalidVariantError,
    NoMatchingVariantError,
    SystemInfo,
    Variant,
    detect_system,
    is_valid_variant_name,
    parse_variant,
    rank_variants,
    select_variant,
    system_for_variant,
)

CUDA_128 = SystemInfo((2, 13), True, "cuda", (12, 8), "x86_64", "linux")
CPU_ONLY = SystemInfo((2, 13), True, "cpu", None, "x86_64", "linux")
DARWIN_METAL = SystemInfo((2, 9), True, "metal", None, "aarch64", "darwin")
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
        ]
    ],
)
def test_valid_names_parse_to_their_fields(name: str, expected: dict) -> None:
    assert parse_variant(name) == _variant(name, **expected)
    assert is_valid_variant_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "", "torch", "torch-", "torch-npu", "torch-Universal", "TORCH-universal", "torch-universal ",
        " torch-universal", "torch-universal\n", "torch-universal/", "torch-cuda12",
        # grammar violations
        "torch213-cu128-x86_64-linux",            # linux needs the C++ ABI part
        "torch29-cxx11-metal-aarch64-darwin",     # only linux has an ABI part
        "torch210-cxx11-cu128-x86_64-windows",
        "torch-stable-abi29-cxx11-cu128-x86_64-linux",
        "tvm-ffi01-cxx11-cu128-x86_64-linux",
        "torch2-cxx11-cpu-x86_64-linux",          # torch needs major and minor
        "torch2013-cxx11-cpu-x86_64-linux",       # minor with a leading zero
        "torch213-cxx11-cu-x86_64-linux",         # CUDA needs a version
        "torch213-cxx11-cu8-x86_64-linux",
        "torch213-cxx11-cu0128-x86_64-linux",
        "torch213-cxx11-rocm-x86_64-linux",
        "torch213-cxx11-cpu1-x86_64-linux",       # CPU has no version
        "torch213-cxx11-metal3-aarch64-darwin",
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
    "torch-stable-abi212-cu128-x86_64-linux",
    "torch213-cxx11-cu128-x86_64-linux",
    "torch-stable-abi213-cu128-x86_64-linux",
]


def test_full_preference_order() -> None:
    accepted, rejected = rank_variants(ALL_FOR_CUDA, CUDA_128)
    assert accepted == [
        "torch213-cxx11-cu128-x86_64-linux",
        "torch-stable-abi213-cu128-x86_64-linux",
        "torch-stable-abi212-cu128-x86_64-linux",
        "torch-stable-abi29-cu128-x86_64-linux",
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
         ["torch213-cxx11-cpu-x86_64-linux", "torch-stable-abi29-cpu-x86_64-linux", "torch-cpu", "torch-universal"]),
        (DARWIN_METAL, ["torch-metal", "torch29-metal-aarch64-darwin", "torch28-metal-aarch64-darwin",
                        "torch29-cpu-aarch64-darwin", "torch-stable-abi28-metal-aarch64-darwin", "torch-universal"],
         ["torch29-metal-aarch64-darwin", "torch-stable-abi28-metal-aarch64-darwin", "torch-metal", "torch-universal"]),
        (NO_TORCH, ["torch-universal", "torch-cpu", "torch213-cxx11-cpu-x86_64-linux"], []),
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
    ids=["cuda", "cpu-only", "darwin-metal", "no-torch", "windows", "xpu", "rocm"],
)
def test_ranking_on_synthetic_systems(system: SystemInfo, names: list[str], accepted: list[str]) -> None:
    ranked, rejected = rank_variants(names, system)
    assert ranked == accepted
    assert set(rejected) == set(names) - set(accepted)


@pytest.mark.parametrize(
    ("system", "name", "reason"),
    [
        (CUDA_128, "torch29-cxx11-cu128-x86_64-linux", "torch 2.9 build; this system has torch 2.13"),
        (CUDA_128, "torch213-cxx11-cu126-x86_64-linux", "CUDA 12.6 build; this system has CUDA 12.8"),
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
        (NO_TORCH, "torch-universal", "torch is not installed"),
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
        (DARWIN_METAL, "torch 2.9, Metal, aarch64-darwin"),
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
        ("torch29-metal-aarch64-darwin", SystemInfo((2, 9), None, "metal", None, "aarch64", "darwin")),
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
    system = detect_system()
    assert (system.torch_version, system.cxx11, system.backend, system.backend_version) == (None, None, "cpu", None)
    assert rank_variants(["torch-universal"], system) == ([], {"torch-universal": "torch is not installed"})


def test_importing_variants_does_not_import_torch() -> None:
    code = "import sys, kernel_deps.variants; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


@given(
    torch_version=st.tuples(st.integers(1, 9), st.integers(0, 99)),
    cxx11=st.booleans(),
    backend=st.sampled_from(["cpu", "cuda", "rocm", "xpu", "metal"]),
    backend_version=st.tuples(st.integers(1, 2100), st.integers(0, 9)),
    arch=st.sampled_from(["x86_64", "aarch64"]),
    os=st.sampled_from(["linux", "darwin", "windows"]),
)
def test_exact_build_names_round_trip(torch_version, cxx11, backend, backend_version, arch, os) -> None:
    token = {"cuda": "cu", "rocm": "rocm", "xpu": "xpu"}.get(backend)
    backend_part = f"{token}{backend_version[0]}{backend_version[1]}" if token else backend
    abi_part = ("-cxx11" if cxx11 else "-cxx98") if os == "linux" else ""
    name = f"torch{torch_version[0]}{torch_version[1]}{abi_part}-{backend_part}-{arch}-{os}"
    expected = _variant(
        name, torch_version=torch_version, cxx11=cxx11 if os == "linux" else None, backend=backend,
        backend_version=backend_version if token else None, arch=arch, os=os,
    )
    assert parse_variant(name) == expected
    assert rank_variants([name], system_for_variant(name)) == ([name], {})


def _fake_torch(version: str = "2.13.0", cuda=None, hip=None, xpu=None, xpu_available=False, mps=False):
    from types import SimpleNamespace

    return SimpleNamespace(
        __version__=version,
        compiled_with_cxx11_abi=lambda: True,
        version=SimpleNamespace(cuda=cuda, hip=hip, xpu=xpu),
        xpu=SimpleNamespace(is_available=lambda: xpu_available),
        backends=SimpleNamespace(mps=SimpleNamespace(is_available=lambda: mps)),
    )


@pytest.mark.parametrize(
    ("torch_module", "machine", "platform_name", "expected"),
    [
        (_fake_torch("2.13.0+cu128", cuda="12.8"), "x86_64", "linux", ((2, 13), "cuda", (12, 8), "x86_64", "linux")),
        (_fake_torch("2.9.1+rocm6.3", hip="6.3.42131-fa1d09cbd"), "x86_64", "linux",
         ((2, 9), "rocm", (6, 3), "x86_64", "linux")),
        (_fake_torch("2.13.0+xpu", xpu="20250101"), "x86_64", "linux", ((2, 13), "xpu", (2025, 1), "x86_64", "linux")),
        (_fake_torch("2.13.0", xpu_available=True), "x86_64", "linux", ((2, 13), "xpu", None, "x86_64", "linux")),
        (_fake_torch("2.9.0", mps=True), "arm64", "darwin", ((2, 9), "metal", None, "aarch64", "darwin")),
        (_fake_torch("2.9.0", mps=False), "arm64", "darwin", ((2, 9), "cpu", None, "aarch64", "darwin")),
        (_fake_torch("2.10.0+cu128", cuda="12.8"), "AMD64", "win32", ((2, 10), "cuda", (12, 8), "x86_64", "windows")),
        (_fake_torch("2.13.0a0+gitabc"), "aarch64", "linux", ((2, 13), "cpu", None, "aarch64", "linux")),
    ],
    ids=["cuda", "rocm", "xpu-date", "xpu-probe", "mps", "darwin-cpu", "windows", "dev-build"],
)
def test_detect_system_backends(monkeypatch: pytest.MonkeyPatch, torch_module, machine, platform_name, expected) -> None:
    monkeypatch.setitem(sys.modules, "torch", torch_module)
    monkeypatch.setattr(platform, "machine", lambda: machine)
    monkeypatch.setattr(sys, "platform", platform_name)
    system = detect_system()
    assert (system.torch_version, system.backend, system.backend_version, system.arch, system.os) == expected

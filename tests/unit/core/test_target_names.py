"""Target names and the build that serves each, for every backend the Hugging Face
``kernels`` library knows (CUDA, ROCm, XPU, Metal, CPU, Ascend CANN, Neuron, TPU)."""

from __future__ import annotations

import pytest

from kernel_deps.core.targets import InvalidTargetName, missing_targets, parse_target, parse_targets, serving_variant

# The build variants kernel-builder lists today (docs/source/builder/build-variants.md of
# huggingface/kernels), plus the Ascend, Neuron and TPU builds its variant grammar knows.
HUB_BUILDS = (
    "torch213-cpu-aarch64-darwin", "torch213-metal-aarch64-darwin", "torch213-cxx11-cpu-aarch64-linux",
    "torch213-cxx11-cu126-aarch64-linux", "torch213-cxx11-cu130-aarch64-linux", "torch213-cxx11-cu132-x86_64-linux",
    "torch213-cxx11-cpu-x86_64-linux", "torch213-cxx11-cu126-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux",
    "torch213-cxx11-rocm71-x86_64-linux", "torch213-cxx11-rocm72-x86_64-linux", "torch213-cxx11-xpu20260-x86_64-linux",
    "torch212-cxx11-xpu20253-x86_64-linux", "torch213-cxx11-cann81-aarch64-linux", "torch213-neuron-x86_64-linux",
    "torch213-tpu-x86_64-linux", "torch213-cu130-x86_64-windows",
)  # fmt: skip


@pytest.mark.parametrize("name", HUB_BUILDS)
def test_every_exact_build_name_of_todays_hub_is_a_target_served_by_that_build(name) -> None:
    target = parse_target(name)
    assert serving_variant(target, HUB_BUILDS) == name


@pytest.mark.parametrize(
    ("target", "builds", "served_by"),
    [
        # Python-only builds serve their backend; Ascend's are named after the device, npu.
        ("torch213-cxx11-cann81-aarch64-linux", ("torch-npu", "torch-cuda"), "torch-npu"),
        ("torch213-neuron-x86_64-linux", ("torch-neuron", "torch-cpu"), "torch-neuron"),
        ("torch213-tpu-x86_64-linux", ("torch-tpu", "torch-universal"), "torch-tpu"),
        ("torch213-cxx11-xpu20260-x86_64-linux", ("torch-xpu",), "torch-xpu"),
        ("torch213-metal-aarch64-darwin", ("torch-metal", "torch-cpu"), "torch-metal"),
        ("torch213-cxx11-rocm71-x86_64-linux", ("torch-cuda", "torch-universal"), "torch-universal"),
        # The loader's order: a stable-ABI build first, then the exact build, then noarch.
        ("torch213-cxx11-cu130-x86_64-linux",
         ("torch-cuda", "torch213-cxx11-cu130-x86_64-linux", "torch-stable-abi29-cu130-x86_64-linux"),
         "torch-stable-abi29-cu130-x86_64-linux"),
        ("torch213-cxx11-cu130-x86_64-linux", ("torch-cuda", "torch213-cxx11-cu130-x86_64-linux"),
         "torch213-cxx11-cu130-x86_64-linux"),
        # CUDA minor version compatibility: a 13.0 build serves a 13.2 machine, not the reverse.
        ("torch213-cxx11-cu132-x86_64-linux", ("torch213-cxx11-cu130-x86_64-linux",), "torch213-cxx11-cu130-x86_64-linux"),
        ("torch213-cxx11-cu130-x86_64-linux", ("torch213-cxx11-cu132-x86_64-linux",), None),
        # An untagged target takes either ABI; a stable-ABI build newer than its torch does not fit.
        ("torch213-cu130-x86_64-linux", ("torch213-cxx98-cu130-x86_64-linux",), "torch213-cxx98-cu130-x86_64-linux"),
        ("torch212-cxx11-cpu-x86_64-linux", ("torch-stable-abi213-cpu-x86_64-linux",), None),
    ],
)  # fmt: skip
def test_the_build_that_serves_a_target_is_the_loaders_pick_there(target, builds, served_by) -> None:
    assert serving_variant(parse_target(target), builds) == served_by


def test_names_kernel_deps_cannot_parse_serve_nothing_and_raise_nothing() -> None:
    odd = ("torch-hpu", "torch-cann", "torch213-cxx11-cpu-x86_64-freebsd", "build", "torch213-cxx11-hpu10-x86_64-linux")
    targets = parse_targets(["torch213-cxx11-cpu-x86_64-linux", "torch213-cxx11-cann81-aarch64-linux"])
    assert [t.name for t in missing_targets(targets, odd)] == [t.name for t in targets]
    assert missing_targets(targets, (*odd, "torch-universal")) == []


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("torch-universal", "names no single machine"),
        ("torch-npu", "names no single machine"),
        ("torch-stable-abi29-cu128-x86_64-linux", "names no single machine"),
        ("tvm-ffi01-cu128-x86_64-linux", "names no single machine"),
        ("torch213-cxx11-cu128", "not a build variant name"),
        ("torch213-cxx11-metal-aarch64-darwin", r"C\+\+ ABI tag, which only linux builds use"),
        (None, "expected a string"),
    ],
)
def test_a_name_that_is_not_a_machine_is_refused_with_why(value, reason) -> None:
    with pytest.raises(InvalidTargetName, match=reason):
        parse_target(value)

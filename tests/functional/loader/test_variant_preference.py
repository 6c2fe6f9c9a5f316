"""Which build the loader picks when several fit: the ties that a wrong order would hide.

Each case is chosen so that the alphabetical tie-break (the last part of the ranking)
gives the wrong answer: only the preference itself can put the right build first.
"""

from __future__ import annotations

import pytest

from kernel_deps.core.system import SystemInfo
from kernel_deps.core.variants import rank_variants, select_variant

XPU = SystemInfo((2, 13), True, "xpu", (2025, 1), "x86_64", "linux")
TORCH_3 = SystemInfo((3, 0), None, "cpu", None, "x86_64", "linux")


def test_a_backends_own_noarch_build_beats_torch_universal() -> None:
    # "torch-universal" sorts before "torch-xpu": tied, the universal build would win.
    accepted, rejected = rank_variants(["torch-universal", "torch-xpu"], XPU)
    assert accepted == ["torch-xpu", "torch-universal"] and rejected == {}
    assert select_variant("kernels-test/activation", ["torch-universal", "torch-xpu"], XPU) == "torch-xpu"


@pytest.mark.parametrize(
    ("system", "older", "newer"),
    [
        # a newer ABI major: "...abi29-..." sorts before "...abi30-..."
        (TORCH_3, "torch-stable-abi29-cpu-x86_64-linux", "torch-stable-abi30-cpu-x86_64-linux"),
        # a newer ABI minor of the same major: "...abi28-..." sorts before "...abi29-..."
        (TORCH_3, "torch-stable-abi28-cpu-x86_64-linux", "torch-stable-abi29-cpu-x86_64-linux"),
    ],
)
def test_the_newest_stable_abi_build_is_preferred(system: SystemInfo, older: str, newer: str) -> None:
    accepted, _ = rank_variants([older, newer], system)
    assert accepted == [newer, older]


def test_a_stable_abi_build_beats_an_exact_build_and_noarch() -> None:
    names = ["torch-cpu", "torch30-cpu-x86_64-linux", "torch-stable-abi29-cpu-x86_64-linux", "torch-universal"]
    accepted, _ = rank_variants(names, TORCH_3)
    assert accepted == ["torch-stable-abi29-cpu-x86_64-linux", "torch30-cpu-x86_64-linux", "torch-cpu", "torch-universal"]


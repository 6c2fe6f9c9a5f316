"""Kernel wheel names, versions and tags (kernel_deps.core.wheels), held against packaging's rules.

pip decides with ``packaging``: a file name it cannot parse, a name that is not normalized,
a version that is not PEP 440 or a tag this machine does not support is a wheel pip never
installs. Every case is checked with ``packaging.utils.parse_wheel_filename``,
``packaging.version`` and ``packaging.tags`` as pip uses them.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.requirements import Requirement
from packaging.tags import mac_platforms, sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from kernel_deps.core.variants import parse_variant
from kernel_deps.core.wheels import distribution_name, import_name, wheel_spec
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, METAL_VARIANT, STABLE_ABI_VARIANT, UNIVERSAL_VARIANT

COMMIT = "0a1b2c3d4e5f" + "0" * 28
SO = ["_ops.py", "__init__.py", "_activation_0a1b.abi3.so"]
PURE = ["__init__.py", "layers/__init__.py"]


@pytest.mark.parametrize(
    ("variant", "locked", "paths", "version", "tag", "torch"),
    [
        (CUDA_VARIANT, "v1.2.0", SO, "1.2.0+torch213.cxx11.cu128", "cp39-abi3-manylinux_2_28_x86_64", "torch==2.13.*"),
        (CPU_VARIANT, "v1.2.0", SO, "1.2.0+torch213.cxx11.cpu", "cp39-abi3-manylinux_2_28_x86_64", "torch==2.13.*"),
        ("torch211-cu128-aarch64-linux", "v2.0", SO, "2.0+torch211.cu128", "cp39-abi3-manylinux_2_28_aarch64",
         "torch==2.11.*"),
        (STABLE_ABI_VARIANT, "v1.2.0", SO, "1.2.0+torch.stable.abi29.cu128", "cp39-abi3-manylinux_2_28_x86_64",
         "torch>=2.9"),
        ("torch213-cxx11-rocm71-x86_64-linux", "v1.2.0", SO, "1.2.0+torch213.cxx11.rocm71",
         "cp39-abi3-manylinux_2_28_x86_64", "torch==2.13.*"),
        (METAL_VARIANT, "v1.2.0", SO, "1.2.0+torch29.metal", "cp39-abi3-macosx_26_0_arm64", "torch==2.9.*"),
        ("torch29-cpu-aarch64-darwin", "v1.2.0", SO, "1.2.0+torch29.cpu", "cp39-abi3-macosx_11_0_arm64",
         "torch==2.9.*"),
        ("torch213-cu128-x86_64-windows", "v1.2.0", ["k.pyd"], "1.2.0+torch213.cu128", "cp39-abi3-win_amd64",
         "torch==2.13.*"),
        (CUDA_VARIANT, "v1.2.0", ["_k.cpython-311-x86_64-linux-gnu.so"], "1.2.0+torch213.cxx11.cu128",
         "cp311-cp311-manylinux_2_28_x86_64", "torch==2.13.*"),
        (CUDA_VARIANT, "v1.2.0", PURE, "1.2.0+torch213.cxx11.cu128", "py3-none-manylinux_2_28_x86_64", "torch==2.13.*"),
        (UNIVERSAL_VARIANT, "v1.0.0", PURE, "1.0.0", "py3-none-any", "torch"),
        ("torch-cuda", "v1.0.0", PURE, "1.0.0+cuda", "py3-none-any", "torch"),
        ("tvm-ffi01-cu128-x86_64-linux", "v1.0.0", SO, "1.0.0+tvm.ffi01.cu128", "cp39-abi3-manylinux_2_28_x86_64",
         None),
        # A major branch, a pin by commit: the commit in the local label tells builds apart.
        (CPU_VARIANT, "v1", SO, "1+g0a1b2c3d4e5f.torch213.cxx11.cpu", "cp39-abi3-manylinux_2_28_x86_64",
         "torch==2.13.*"),
        (UNIVERSAL_VARIANT, None, PURE, "0+g0a1b2c3d4e5f", "py3-none-any", "torch"),
        (UNIVERSAL_VARIANT, "v1.3.0rc1", PURE, "1.3.0rc1", "py3-none-any", "torch"),
    ],
)
def test_each_variant_gets_a_name_pip_parses_with_its_version_and_tags(
    variant, locked, paths, version, tag, torch
) -> None:
    spec = wheel_spec("Kernels-Community/Activation_Fast", COMMIT, locked, variant, "sha256-" + "0" * 64, paths)
    name, parsed_version, build, tags = parse_wheel_filename(spec.filename)
    assert name == spec.distribution == "kernels-community-activation-fast" == canonicalize_name(spec.distribution)
    assert parsed_version == Version(version) and str(parsed_version) == spec.version == version
    assert build == () and {str(t) for t in tags} == {tag} == {spec.tag}
    assert spec.requires == ((torch,) if torch else ())
    for requirement in spec.requires:
        Requirement(requirement)  # valid PEP 508


def test_every_variant_of_one_kernel_version_gets_a_file_of_its_own() -> None:
    variants = [CUDA_VARIANT, CPU_VARIANT, METAL_VARIANT, STABLE_ABI_VARIANT, UNIVERSAL_VARIANT, "torch-cuda",
                "torch-cpu", "torch213-cxx98-cu128-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux",
                "torch212-cxx11-cu128-x86_64-linux", "torch213-cxx11-cu128-aarch64-linux",
                "torch-stable-abi210-cu128-x86_64-linux"]  # fmt: skip
    names = {wheel_spec("org/k", COMMIT, "v1.2.0", v, "sha256-" + "0" * 64, SO).filename for v in variants}
    assert len(names) == len(variants)


def test_the_dependencies_are_required_at_their_locked_version_with_any_local_label() -> None:
    spec = wheel_spec("org/layer-norm", COMMIT, "v0.2.0", CUDA_VARIANT, "sha256-" + "0" * 64, SO,
                      {"org/activation": "v1.2.0", "org/rotary": "v2", "org/pinned": None})  # fmt: skip
    assert spec.requires == ("torch==2.13.*", "org-activation==1.2.0", "org-pinned==0", "org-rotary==2")
    activation = Requirement(spec.requires[1])
    assert activation.specifier.contains(Version("1.2.0+torch.stable.abi29.cu128"))  # any build of it
    assert Requirement(spec.requires[3]).specifier.contains(Version("2+g0a1b2c3d4e5f.cpu"))


def test_this_machines_pip_takes_the_linux_tag_and_a_macos_26_pip_the_metal_one() -> None:
    cpu = wheel_spec("org/k", COMMIT, "v1.0.0", CPU_VARIANT, "sha256-" + "0" * 64, SO)
    assert parse_wheel_filename(cpu.filename)[3] & set(sys_tags())  # glibc 2.28 or newer, CPython 3.9 or newer
    metal = wheel_spec("org/k", COMMIT, "v1.0.0", METAL_VARIANT, "sha256-" + "0" * 64, SO)
    assert metal.platform in list(mac_platforms((26, 0), "arm64"))
    assert metal.platform not in list(mac_platforms((15, 0), "arm64"))  # Metal 4 needs macOS 26


_PART = st.from_regex(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,20}[A-Za-z0-9])?", fullmatch=True)


@given(org=_PART, name=_PART)
def test_any_repo_id_gives_a_normalized_name_and_an_importable_package(org, name) -> None:
    repo_id = f"{org}/{name}"
    assert canonicalize_name(distribution_name(repo_id)) == distribution_name(repo_id)
    assert import_name(repo_id).isidentifier()
    spec = wheel_spec(repo_id, COMMIT, "v1.0.0", UNIVERSAL_VARIANT, "sha256-" + "0" * 64, PURE)
    assert parse_wheel_filename(spec.filename)[0] == distribution_name(repo_id)


def test_a_variant_name_that_is_no_build_is_refused() -> None:
    assert parse_variant("torch-foo") is None
    with pytest.raises(ValueError, match="'torch-foo' is not a variant name"):
        wheel_spec("org/k", COMMIT, "v1.0.0", "torch-foo", "sha256-" + "0" * 64, SO)

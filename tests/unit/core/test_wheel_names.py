"""Kernel wheel names, versions and tags (kernel_deps.core.wheels), held against packaging's rules.

pip decides with ``packaging``: a file name it cannot parse, a name that is not normalized,
a version that is not PEP 440 or a tag this machine does not support is a wheel pip never
installs. Every case is checked with ``packaging.utils.parse_wheel_filename``,
``packaging.version`` and ``packaging.tags`` as pip uses them.
"""

from __future__ import annotations

import itertools
import keyword
import re
import string

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from packaging.requirements import Requirement
from packaging.tags import mac_platforms, sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from kernel_deps.core.spec import validate_repo_id
from kernel_deps.core.variants import parse_variant
from kernel_deps.core.wheels import distribution_name, import_name, shared_names, wheel_spec
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
    spec = wheel_spec("kernels-community/activation-fast", COMMIT, locked, variant, "sha256-" + "0" * 64, paths)
    name, parsed_version, build, tags = parse_wheel_filename(spec.filename)
    assert name == spec.distribution == "kernels-community-activation-fast-o2" == canonicalize_name(spec.distribution)
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
    assert spec.requires == ("torch==2.13.*", "org-activation-o1==1.2.0", "org-pinned-o1==0", "org-rotary-o1==2")
    activation = Requirement(spec.requires[1])
    assert activation.specifier.contains(Version("1.2.0+torch.stable.abi29.cu128"))  # any build of it
    assert Requirement(spec.requires[3]).specifier.contains(Version("2+g0a1b2c3d4e5f.cpu"))


def test_this_machines_pip_takes_the_linux_tag_and_a_macos_26_pip_the_metal_one() -> None:
    cpu = wheel_spec("org/k", COMMIT, "v1.0.0", CPU_VARIANT, "sha256-" + "0" * 64, SO)
    assert parse_wheel_filename(cpu.filename)[3] & set(sys_tags())  # glibc 2.28 or newer, CPython 3.9 or newer
    metal = wheel_spec("org/k", COMMIT, "v1.0.0", METAL_VARIANT, "sha256-" + "0" * 64, SO)
    assert metal.platform in list(mac_platforms((26, 0), "arm64"))
    assert metal.platform not in list(mac_platforms((15, 0), "arm64"))  # Metal 4 needs macOS 26


def decode(name: str) -> str:
    """The repo id a distribution name was made from, by the rule docs/wheels.md states: the
    left inverse its proof of one name per repo id exhibits, written apart from the encoder."""
    *words, tag = name.split("-")
    match = re.fullmatch(r"o([1-9][0-9]*)(?:x([0-9a-z]+))?", tag)
    assert match, name
    org_words, number = int(match[1]), int(match[2] or "0", 36)
    bits = (number >> i & 1 for i in itertools.count())  # least significant first, zeros past the end
    decoded = ""
    for i, word in enumerate(words):
        if i == org_words:
            decoded += "/"
        elif i:
            if next(bits):
                while code := next(bits) | next(bits) << 1:
                    decoded += "-_."[code - 1]
            else:
                decoded += "-"
        decoded += "".join(c.upper() if c.isalpha() and next(bits) else c for c in word)
    return decoded


_RUN = st.text("-_.", min_size=1, max_size=3).filter(lambda run: "--" not in run and ".." not in run)


def _part() -> st.SearchStrategy[str]:
    word = st.text(string.ascii_letters + string.digits, min_size=1, max_size=8)
    return st.tuples(word, st.lists(st.tuples(_RUN, word), max_size=5)).map(
        lambda t: t[0] + "".join(run + w for run, w in t[1]))


def repo_ids() -> st.SearchStrategy[str]:
    """Every valid repo id (core.spec's rule, the Hub's: '--' and '..' refused, at most 96 characters)."""
    return st.builds(lambda org, name: f"{org}/{name}", _part(), _part()).filter(lambda repo_id: len(repo_id) <= 96)


def names_of(repo_id: str) -> tuple[str, str, str]:
    """(normalized distribution name, import name, wheel file name) of a repo's wheel."""
    spec = wheel_spec(repo_id, COMMIT, "v1.0.0", UNIVERSAL_VARIANT, "sha256-" + "0" * 64, PURE)
    return canonicalize_name(spec.distribution), spec.package, spec.filename.lower()


@given(repo_id=repo_ids())
def test_any_repo_id_gives_a_normalized_name_and_an_importable_package_that_tell_the_repo_id(repo_id) -> None:
    validate_repo_id(repo_id)
    name = distribution_name(repo_id)
    assert canonicalize_name(name) == name  # PEP 503-normalized already: nothing to fold
    assert decode(name) == repo_id  # the name tells the repo id back, so no other repo id has it
    assert import_name(repo_id).isidentifier() and not keyword.iskeyword(import_name(repo_id))
    spec = wheel_spec(repo_id, COMMIT, "v1.0.0", UNIVERSAL_VARIANT, "sha256-" + "0" * 64, PURE)
    assert parse_wheel_filename(spec.filename)[0] == name
    assert spec.dist_info == f"{import_name(repo_id).lstrip('_')}-1.0.0.dist-info"


@st.composite
def confusable_pairs(draw) -> tuple[str, str]:
    """Two valid repo ids of the same words, lower-cased: what PEP 503 normalization could not
    tell apart, as they differ only by case, by their separators or by where the '/' falls."""
    words = draw(st.lists(st.text("ab1", min_size=1, max_size=3), min_size=2, max_size=6))

    def spelled() -> str:
        slash = draw(st.integers(1, len(words) - 1))
        text = ""
        for i, word in enumerate(words):
            if i:
                text += "/" if i == slash else draw(st.sampled_from(["-", "-", "_", "."]) | _RUN)
            text += "".join(c.upper() if c.isalpha() and draw(st.booleans()) else c for c in word)
        return text

    return spelled(), spelled()


@given(pair=confusable_pairs())
def test_two_repo_ids_never_share_a_distribution_import_or_file_name(pair) -> None:
    first, second = pair
    assume(first != second)
    for mine, theirs in zip(names_of(first), names_of(second)):
        assert mine != theirs, (first, second)


@pytest.mark.parametrize(
    ("first", "second", "names"),
    [
        ("org/kernels-x", "org-kernels/x", ("org-kernels-x-o1", "org-kernels-x-o2")),
        ("org/a.b", "org/a_b", ("org-a-b-o1x34", "org-a-b-o1x28")),
        ("Org/X", "org/x", ("org-x-o1x9", "org-x-o1")),
        ("org/b", "org/b-o1", ("org-b-o1", "org-b-o1-o1")),  # an old-scheme name is not another repo's
    ],
)
def test_repo_ids_the_old_names_confused_get_names_of_their_own(first, second, names) -> None:
    assert (distribution_name(first), distribution_name(second)) == names
    assert len({*names_of(first), *names_of(second)}) == 6


def test_two_builds_that_would_be_one_wheel_and_none_that_would_not_are_told() -> None:
    windows = ["torch213-cpu-x86_64-windows", "torch213-cpu-amd64-windows"]  # both win_amd64
    wheels = [("org/k", COMMIT, "v1.0.0", v) for v in [*windows, CPU_VARIANT, CUDA_VARIANT, UNIVERSAL_VARIANT]]
    assert shared_names(wheels) == [
        "org/k torch213-cpu-x86_64-windows and org/k torch213-cpu-amd64-windows would both be the wheel "
        "org_k_o1-1.0.0+torch213.cpu-*-win_amd64.whl"
    ]
    others = [(repo, COMMIT, "v1.0.0", CPU_VARIANT) for repo in ("org/kernels-x", "org-kernels/x", "org/a.b", "org/a_b")]
    assert shared_names(others) == []


def test_a_variant_name_that_is_no_build_is_refused() -> None:
    assert parse_variant("torch-foo") is None
    with pytest.raises(ValueError, match="'torch-foo' is not a variant name"):
        wheel_spec("org/k", COMMIT, "v1.0.0", "torch-foo", "sha256-" + "0" * 64, SO)

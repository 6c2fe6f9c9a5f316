"""Variant names at the edges of the grammar, and how messages show the names they refuse."""

from __future__ import annotations

import pytest

from kernel_deps.core.system import SystemInfo
from kernel_deps.core.variants import (
    MAX_NAME_LENGTH,
    InvalidVariantError,
    NoMatchingVariantError,
    parse_variant,
    rank_variants,
    select_variant,
    system_for_variant,
)

TORCH_3 = SystemInfo((3, 0), None, "cpu", None, "x86_64", "linux")


def _name_of_length(length: int) -> str:
    """A valid exact CPU build name of ``length`` characters (the arch part fills it up)."""
    head, tail = "torch30-cpu-", "-linux"
    return head + "x" * (length - len(head) - len(tail)) + tail


def test_the_longest_variant_name_is_a_variant_one_more_is_not() -> None:
    longest = _name_of_length(MAX_NAME_LENGTH)
    assert MAX_NAME_LENGTH == 100 and len(longest) == 100
    assert parse_variant(longest) is not None
    too_long = _name_of_length(MAX_NAME_LENGTH + 1)
    assert parse_variant(too_long) is None
    assert rank_variants([too_long], TORCH_3)[1] == {too_long: "not a valid variant name"}


@pytest.mark.parametrize(("digits", "version"), [("20", (2, 0)), ("29", (2, 9)), ("210", (2, 10)), ("205", None)])
def test_a_torch_minor_with_a_leading_zero_is_not_a_version(digits: str, version: tuple[int, int] | None) -> None:
    parsed = parse_variant(f"torch{digits}-cpu-x86_64-linux")
    assert (parsed.torch_version if parsed else None) == version


@pytest.mark.parametrize("tag", ["cxx11", "cxx98"])
def test_a_tagged_build_off_linux_is_refused_with_the_name_to_use(tag: str) -> None:
    with pytest.raises(InvalidVariantError) as caught:
        system_for_variant(f"torch213-{tag}-cpu-x86_64-windows")
    assert str(caught.value).endswith("pass it without the tag, like torch213-cpu-x86_64-windows")


def test_an_invalid_name_is_quoted_whole_up_to_60_characters() -> None:
    name = "n" * 58  # quoted: 60 characters
    assert f"{name!r} (not a valid variant name)" in str(_no_match(name))


def test_a_longer_invalid_name_is_shortened_to_60_characters() -> None:
    name = "n" * 59  # quoted: 61 characters
    message = _no_match(name)
    assert "'" + "n" * 56 + "... (not a valid variant name)" in message and name not in message


def _no_match(name: str) -> str:
    with pytest.raises(NoMatchingVariantError) as caught:
        select_variant("kernels-test/activation", [name], TORCH_3)
    return str(caught.value)

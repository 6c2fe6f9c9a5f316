"""The edges of what a requirement or a lock entry may name: lengths and repeats.

The Hub allows repo ids of at most 96 characters and kernel-deps variant folder names of
at most 100; a kernel's ``kernel-depends`` may name each kernel once.
"""

from __future__ import annotations

import json

import pytest

from kernel_deps.core.errors import InvalidRepoIdError, LockfileError, PyprojectError
from kernel_deps.core.spec import parse_kernel_depends, validate_repo_id
from kernel_deps.lock.model import Lockfile

SHA = "d08b90c89de2" + "0" * 28
HASH = "sha256-" + "a" * 64


def repo_id_of_length(length: int) -> str:
    return "org/" + "n" * (length - len("org/"))


def test_a_96_character_repo_id_is_valid_97_is_not() -> None:
    assert validate_repo_id(repo_id_of_length(96)) == repo_id_of_length(96)
    with pytest.raises(InvalidRepoIdError, match="longer than 96 characters"):
        validate_repo_id(repo_id_of_length(97))


def lock_with_variant(name: str) -> str:
    variant = {"hash": HASH, "hash_type": "git_lfs_concat"}
    entry = {"repo_id": "kernels-test/activation", "sha": SHA, "variants": {name: variant}, "version": "v1.1.0",
             "requirement": ">=1.1", "dependencies": []}  # fmt: skip
    return json.dumps([entry])


def test_a_lock_takes_a_100_character_variant_name_and_refuses_101() -> None:
    longest = "torch-" + "x" * 94
    lock = Lockfile.from_json(lock_with_variant(longest), source="proj/kernels.lock")
    assert list(lock.get("kernels-test/activation").variants) == [longest]
    with pytest.raises(LockfileError) as caught:
        Lockfile.from_json(lock_with_variant(longest + "x"), source="proj/kernels.lock")
    assert "proj/kernels.lock" in str(caught.value) and "at most 100 characters" in str(caught.value)


A, B, C = ({"repo-id": f"kernels-test/{name}", "version": ">=1"} for name in ("a", "b", "c"))


@pytest.mark.parametrize(
    ("entries", "index", "twice"),
    [
        ([A, A], 1, "kernels-test/a"),
        ([A, B, B], 2, "kernels-test/b"),  # the repeat is of the entry just before it
        ([A, B, A], 2, "kernels-test/a"),  # ... or of the first one
        ([A, B, C, B], 3, "kernels-test/b"),
    ],
)
def test_a_kernel_named_twice_in_kernel_depends_is_refused(entries: list, index: int, twice: str) -> None:
    with pytest.raises(PyprojectError) as caught:
        parse_kernel_depends(entries, source="kernels-test/x@v1 build/torch-universal/metadata.json")
    message = str(caught.value)
    assert f"metadata.json: kernel-depends[{index}] = " in message and f"{twice} is listed twice" in message


def test_three_different_kernels_in_kernel_depends_are_read_in_order() -> None:
    found = parse_kernel_depends([A, B, C], source="metadata.json")
    assert [r.repo_id for r in found] == ["kernels-test/a", "kernels-test/b", "kernels-test/c"]

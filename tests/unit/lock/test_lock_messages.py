"""A malformed kernels.lock is one whole line: the file, the entry path, the kernel, what is
wrong, what was expected, and what to do. Each case asserts the complete message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_deps.core.errors import LockfileError
from kernel_deps.lock.model import LockedKernel, Lockfile, VariantLock, lock_path

SHA = "d08b90c89de2" + "0" * 28
HASH = "sha256-" + "a" * 64
FIX = "fix the entry or rerun 'kernels lock'"
REPO_RULE = "expected 'org/name' (letters, digits, '-', '_', '.'), e.g. 'kernels-community/activation'"


def entry(**changes) -> dict:
    fields = {"repo_id": "kernels-test/activation", "sha": SHA, "version": "v1.1.0", "dependencies": [],
              "variants": {"torch-universal": {"hash": HASH, "hash_type": "git_lfs_concat"}}}  # fmt: skip
    fields.update(changes)
    return fields


def bad_hash_under(name: str) -> dict:
    return entry(variants={name: {"hash": "x", "hash_type": "git_lfs_concat"}})


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([entry(extra=1)], "unknown key 'extra' in '[0].extra' (kernels-test/activation); "
                           "expected only repo_id, sha, variants, version, requirement, dependencies, kernel_depends, "
                           f"redirected_from, trusted_by, signatures; {FIX}"),
        # no kernel named after the path when the repo id itself is what is wrong
        ([entry(repo_id="rotary", sha="abc")], f"invalid repo id 'rotary' in '[0].repo_id'; {REPO_RULE}; {FIX}"),
        ([entry(repo_id="org/" + "n" * 93)], "invalid repo id 'org/nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn..."
                                             "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn' in '[0].repo_id'; "
                                             f"longer than 96 characters; {FIX}"),
        ([entry(dependencies=["bad"])], f"invalid repo id 'bad' in '[0].dependencies[0]' (kernels-test/activation); "
                                        f"{REPO_RULE}; {FIX}"),
        ([entry(dependencies=["org/x"])], "dependency 'org/x' in '[0].dependencies[0]' (kernels-test/activation) has "
                                          f"no entry of its own in the lock; {FIX}"),
        ([bad_hash_under("torch-universal")], "invalid variant hash 'x' in '[0].variants.torch-universal.hash' "
                                              "(kernels-test/activation); expected 'sha256-' and 64 lowercase hex "
                                              f"characters; {FIX}"),
        # a plain name of 80 characters stays a dotted step; 81 is quoted and shortened
        ([bad_hash_under("a" * 80)], f"invalid variant hash 'x' in '[0].variants.{'a' * 80}.hash' "
                                     "(kernels-test/activation); expected 'sha256-' and 64 lowercase hex "
                                     f"characters; {FIX}"),
        ([bad_hash_under("a" * 81)], f"invalid variant hash 'x' in '[0].variants['{'a' * 37}...{'a' * 38}'].hash' "
                                     "(kernels-test/activation); expected 'sha256-' and 64 lowercase hex "
                                     f"characters; {FIX}"),
    ],
)
def test_a_malformed_entry_is_one_complete_line(entries: list, message: str) -> None:
    with pytest.raises(LockfileError) as caught:
        Lockfile.from_json(json.dumps(entries), source="app/kernels.lock")
    assert str(caught.value) == f"app/kernels.lock: {message}"


def test_a_number_too_long_to_read_is_named_as_such() -> None:
    with pytest.raises(LockfileError) as caught:
        Lockfile.from_json('[{"repo_id": ' + "1" * 5000 + "}]", source="app/kernels.lock")
    assert str(caught.value) == "app/kernels.lock: holds an integer of 5000 digits (at most 40); fix the file or rerun 'kernels lock'"


def test_records_built_in_code_name_the_field_and_the_value() -> None:
    with pytest.raises(ValueError) as caught:
        LockedKernel(repo_id="kernels-test/a", sha=SHA, variants={"torch-universal": "sha256-x"}, dependencies=())
    assert str(caught.value) == "invalid variant lock 'sha256-x' in 'variants.torch-universal'; expected a VariantLock"
    with pytest.raises(ValueError) as caught:
        LockedKernel(repo_id="kernels-test/a", sha=SHA, variants={"torch-universal": VariantLock(hash=HASH)},
                     dependencies=("bad",))  # fmt: skip
    assert str(caught.value) == f"invalid repo id 'bad' in 'dependencies[0]'; {REPO_RULE}"


def test_a_projects_lock_is_kernels_lock_in_its_folder(tmp_path: Path) -> None:
    assert lock_path(tmp_path) == tmp_path / "kernels.lock"
    assert lock_path(str(tmp_path)) == tmp_path / "kernels.lock"


def test_a_variant_record_names_its_own_keys() -> None:
    with pytest.raises(ValueError) as caught:
        VariantLock.from_dict({"hash": HASH})
    assert str(caught.value) == "missing key 'hash_type' in the record; expected hash, hash_type"
    with pytest.raises(ValueError) as caught:
        VariantLock.from_dict({"hash": HASH, "hash_type": "git_lfs_concat", "Xtra": 1})
    assert str(caught.value) == "unknown key 'Xtra' in 'Xtra'; expected only hash, hash_type"

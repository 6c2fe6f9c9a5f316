"""A kernel locked at the destination of a kernel-status.toml redirect keeps the repo ids
that redirect to it in ``redirected_from``: users get that list back from the file they
wrote, sorted, under its own key, and the entry answers for the old names too. A broken
list, and every other malformed value, is one complete line naming the file, the entry
path, the kernel and what was expected."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernel_deps.core.errors import LockfileError
from kernel_deps.lock.model import LockedKernel, Lockfile, VariantLock, write_lockfile
from kernel_deps.lock.read import read_lock
from tests.fixtures.unprivileged import where_modes_apply

SHA = "d08b90c89de2" + "0" * 28
HASH = "sha256-" + "a" * 64
FIX = "fix the entry or rerun 'kernels lock'"
REPO_RULE = "expected 'org/name' (letters, digits, '-', '_', '.'), e.g. 'kernels-community/activation'"
NEW = "kernels-test/lfr-activation"
OLD_A = "kernels-test/lfr-old-a"
OLD_B = "kernels-test/lfr-old-b"
KEYS = "repo_id, sha, variants, version, requirement, dependencies, kernel_depends, redirected_from, trusted_by, signatures"


def entry(repo_id: str = NEW, **changes) -> dict:
    fields = {"repo_id": repo_id, "sha": SHA, "version": "v1.1.0", "dependencies": [],
              "variants": {"torch-universal": {"hash": HASH, "hash_type": "git_lfs_concat"}}}  # fmt: skip
    fields.update(changes)
    return fields


def test_redirected_from_is_read_sorted_and_written_back_under_its_key(tmp_path: Path) -> None:
    path = tmp_path / "kernels.lock"
    path.write_text(json.dumps([entry(redirected_from=[OLD_B, OLD_A]), entry("kernels-test/lfr-plain")]))
    lock = read_lock(path, purpose="use").lock
    new = lock.get(NEW)
    assert new.redirected_from == (OLD_A, OLD_B)
    # pyproject.toml may still name the old repos: the lock answers with the destination's entry
    assert lock.get(OLD_A) is new and lock.get(OLD_B) is new
    assert lock.get("kernels-test/lfr-plain").redirected_from == ()
    assert lock.repo_ids == ("kernels-test/lfr-activation", "kernels-test/lfr-plain")

    assert write_lockfile(path, lock) is True
    written = json.loads(path.read_text())
    assert written[0]["redirected_from"] == [OLD_A, OLD_B]
    assert list(written[0]) == ["repo_id", "sha", "variants", "version", "dependencies", "redirected_from"]
    assert "redirected_from" not in written[1]  # no redirect, no key
    assert read_lock(path, purpose="use").lock == lock
    assert write_lockfile(path, lock) is False


def test_a_record_built_in_code_keeps_its_redirects_sorted() -> None:
    kernel = LockedKernel(repo_id=NEW, sha=SHA, variants={"torch-universal": VariantLock(hash=HASH)},
                          redirected_from=[OLD_B, OLD_A])  # fmt: skip
    assert kernel.redirected_from == (OLD_A, OLD_B)
    assert kernel.to_dict()["redirected_from"] == [OLD_A, OLD_B]


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        # redirected_from itself
        ([entry(redirected_from=OLD_A)], f"invalid redirected_from '{OLD_A}' in '[0].redirected_from' ({NEW}); "
                                         f"expected a list of repo ids; {FIX}"),
        ([entry(redirected_from=[OLD_A, "bad"])], f"invalid repo id 'bad' in '[0].redirected_from[1]' ({NEW}); "
                                                  f"{REPO_RULE}; {FIX}"),
        ([entry(redirected_from=[NEW])], f"invalid repo id '{NEW}' in '[0].redirected_from[0]' ({NEW}); "
                                         f"expected each other repo id once; {FIX}"),
        ([entry(redirected_from=[OLD_A, OLD_A])], f"invalid repo id '{OLD_A}' in '[0].redirected_from[1]' ({NEW}); "
                                                  f"expected each other repo id once; {FIX}"),
        # a repo both locked in its own right and redirecting elsewhere
        ([entry(redirected_from=[OLD_A]), entry(OLD_A)],
         f"'{OLD_A}' has an entry of its own and also redirects to '{NEW}' in '[0].redirected_from[0]'; "
         f"expected one or the other; {FIX}"),
        ([entry(OLD_A), entry(redirected_from=[OLD_B, OLD_A])],
         f"'{OLD_A}' has an entry of its own and also redirects to '{NEW}' in '[1].redirected_from[1]'; "
         f"expected one or the other; {FIX}"),
        # the other values' rules, each a complete line
        ([entry(repo_id=5)], f"invalid repo id 5 in '[0].repo_id'; expected a string 'org/name'; {FIX}"),
        ([entry(sha="abc")], f"invalid commit 'abc' in '[0].sha' ({NEW}); expected 40 lowercase hex characters "
                             f"(a full commit SHA); {FIX}"),
        ([entry(variants=[])], f"invalid variants [] in '[0].variants' ({NEW}); expected an object of variant "
                               f"name -> hash; {FIX}"),
        ([entry(variants={"torch-universal": {"hash": HASH, "hash_type": "md5"}})],
         f"invalid hash type 'md5' in '[0].variants.torch-universal.hash_type' ({NEW}); "
         f"expected 'git_lfs_concat'; {FIX}"),
        ([entry(version=None)], f"invalid version null in '[0].version' ({NEW}); "
                                f"expected a string, or no key at all; {FIX}"),
        ([entry(requirement=1)], f"invalid requirement 1 in '[0].requirement' ({NEW}); "
                                 f"expected a string, or no key at all; {FIX}"),
        ([entry(version=" ")], f"invalid version ' ' in '[0].version' ({NEW}); "
                               f"expected a non-empty string, or no key at all; {FIX}"),
        ([entry(dependencies=OLD_A)], f"invalid dependencies '{OLD_A}' in '[0].dependencies' ({NEW}); "
                                      f"expected a list of repo ids; {FIX}"),
        ([entry(dependencies=[NEW])], f"invalid dependency '{NEW}' in '[0].dependencies[0]' ({NEW}); "
                                      f"expected each other kernel once, not the kernel itself; {FIX}"),
        ([7], f"invalid value 7 in '[0]'; expected an object with {KEYS}; {FIX}"),
        ([entry(), entry()], f"duplicate repo_id '{NEW}' in '[0].repo_id' and '[1].repo_id'; "
                             f"expected one entry per kernel; {FIX}"),
    ],
)
def test_a_malformed_entry_is_one_complete_line(entries: list, message: str) -> None:
    with pytest.raises(LockfileError) as caught:
        Lockfile.from_json(json.dumps(entries), source="app/kernels.lock")
    assert str(caught.value) == f"app/kernels.lock: {message}"


def test_a_lock_nested_too_deeply_is_named_as_such() -> None:
    with pytest.raises(LockfileError) as caught:
        Lockfile.from_json("[" * 200_000 + "]" * 200_000, source="app/kernels.lock")
    assert str(caught.value) == "app/kernels.lock: nested more than 64 deep; fix the file or rerun 'kernels lock'"


def test_an_unreadable_lock_names_the_reason_only(tmp_path: Path) -> None:
    path = tmp_path / "kernels.lock"
    path.write_text("[]")
    os.chmod(path, 0)
    with pytest.raises(LockfileError) as caught:
        where_modes_apply(read_lock, path, purpose="use")
    assert str(caught.value) == f"{path}: cannot read (Permission denied); check that it is a readable file"


def test_a_lock_built_in_code_names_the_clashing_redirect() -> None:
    variants = {"torch-universal": VariantLock(hash=HASH)}
    destination = LockedKernel(repo_id=NEW, sha=SHA, variants=variants, redirected_from=(OLD_B, OLD_A))
    with pytest.raises(ValueError) as caught:
        Lockfile(kernels=(destination, LockedKernel(repo_id=OLD_A, sha=SHA, variants=variants)))
    assert str(caught.value) == (f"'{OLD_A}' has an entry of its own and also redirects to '{NEW}' "
                                 "in '[0].redirected_from[0]'; expected one or the other")  # fmt: skip

"""kernel_deps.lock.formats: reading locks that other tools wrote (through ``lockread``), for the pins ``kernels lock`` keeps.

Locks of the Hugging Face ``kernels`` library up to 0.16 (our format without ``version``,
``requirement`` and ``dependencies``) and of ``kernels`` 0.17 (``dependency`` / ``lock``
entries), and our own, as prior pins.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernel_deps.core.errors import LockfileError
from kernel_deps.lock.formats import from_kernels016
from kernel_deps.lock.model import Lockfile
from kernel_deps.lock.read import lock_format, parse_lock
from tests.fixtures.builder import ROTARY
from tests.fixtures.locks import SHA_A, SHA_B, entries_with, example_text

# Written by kernels 0.17.2 itself: KernelLocks({KernelDependency(...): KernelLock(...)}).to_json()
KERNELS_017_LOCK = """[
  {
    "dependency": {
      "repo-id": "kernels-community/activation",
      "version": 1
    },
    "lock": {
      "commit": "0123456789abcdef0123456789abcdef01234567"
    }
  },
  {
    "dependency": {
      "repo-id": "kernels-community/rotary",
      "revision": "main"
    },
    "lock": {
      "commit": "89abcdef0123456789abcdef0123456789abcdef"
    }
  }
]"""


def prior_commits(text: str, *, source: str) -> dict[str, str]:
    """Repo id -> commit of the prior pins ``kernels lock`` keeps from the lock ``text``."""
    return {repo_id: pin.commit for repo_id, pin in parse_lock(text, source=source, purpose="lock").pins.items()}


def test_prior_pins_from_a_kernels_017_lock() -> None:
    assert prior_commits(KERNELS_017_LOCK, source="kernels.lock") == {
        "kernels-community/activation": "0123456789abcdef0123456789abcdef01234567",
        "kernels-community/rotary": "89abcdef0123456789abcdef0123456789abcdef",
    }


def pin017(repo_id: str = "a/b", commit: str = SHA_A, **dependency: Any) -> dict[str, Any]:
    return {"dependency": {"repo-id": repo_id, **(dependency or {"version": 1})}, "lock": {"commit": commit}}


def test_kernels_017_commits_are_lower_cased_and_conflicting_pins_dropped() -> None:
    pins = [pin017(commit=SHA_A.upper()), pin017(revision="v1")]
    pins += [pin017("c/d", version=1), pin017("c/d", SHA_B, version=2)]
    text = json.dumps(pins)
    # c/d is pinned at two commits (two majors asked for): no single pin to prefer.
    assert prior_commits(text, source="kernels.lock") == {"a/b": SHA_A}


def test_prior_pins_from_our_lock_and_a_kernels_016_lock() -> None:
    assert prior_commits(example_text(), source="kernels.lock") == {
        k.repo_id: k.sha for k in Lockfile.from_json(example_text()).kernels
    }
    legacy = [{k: v for k, v in e.items() if k in ("repo_id", "sha", "variants")} for e in entries_with()]
    expected = {"kernels-test/activation": SHA_A, ROTARY: SHA_B}
    assert prior_commits(json.dumps(legacy), source="kernels.lock") == expected
    assert prior_commits("[]", source="kernels.lock") == {}
    # kernels 0.16 writes no variants for a repo without build/torch* folders.
    legacy[1]["variants"] = {}
    assert prior_commits(json.dumps(legacy), source="kernels.lock") == expected
    with pytest.raises(LockfileError, match="missing key 'dependencies'"):
        Lockfile.from_json(json.dumps(legacy))


MALFORMED_017 = [
    (
        [{"dependency": {"repo_id": "a/b", "version": 1}, "lock": {"commit": SHA_A}}],
        "'[0].dependency.repo_id'",
        "unknown key 'repo_id'",
    ),
    ([pin017(version=1, revision="main")], "'[0].dependency'", "exactly one of 'version' and 'revision'"),
    ([{"dependency": {"repo-id": "a/b"}, "lock": {"commit": SHA_A}}], "'[0].dependency'", "exactly one"),
    ([pin017(version="1")], "'[0].dependency.version'", "invalid version '1'"),
    ([pin017(version=True)], "'[0].dependency.version'", "invalid version true"),  # as JSON writes it
    ([pin017(version=-1)], "'[0].dependency.version'", "invalid version -1"),
    ([pin017(revision="")], "'[0].dependency.revision'", "invalid revision ''"),
    ([pin017(commit="abc")], "'[0].lock.commit'", "invalid commit 'abc'"),
    ([pin017(commit="a" * 64)], "'[0].lock.commit'", "invalid commit"),
    ([pin017("ab")], "'[0].dependency.repo-id'", "invalid repo id 'ab'"),
    ([{**pin017(), "hash": "x"}], "'[0].hash'", "unknown key 'hash'"),
    ([{**pin017(), "lock": {"commit": SHA_A, "hash": "x"}}], "'[0].lock.hash'", "unknown key 'hash'"),
    ([{"dependency": pin017()["dependency"]}], "'[0]'", "missing key 'lock'"),
    ([pin017(), entries_with()[0]], "'[1].repo_id'", "unknown key 'repo_id'"),
    ([pin017(), {"lock": {"commit": SHA_A}}], "'[1]'", "missing key 'dependency'"),
    ([{"dependency": [], "lock": {}}], "'[0].dependency'", "invalid value []"),
]


@pytest.mark.parametrize(("data", "where", "quoted"), MALFORMED_017)
def test_malformed_kernels_017_lock(data: Any, where: str, quoted: str) -> None:
    with pytest.raises(LockfileError) as info:
        prior_commits(json.dumps(data), source="kernels.lock")
    message = str(info.value)
    assert message.startswith("kernels.lock: ") and "(kernels 0.17 lock)" in message
    assert where in message and quoted in message and "\n" not in message


def test_malformed_prior_lock_in_our_format_is_rejected() -> None:
    with pytest.raises(LockfileError, match=r"'\[1\].sha'"):
        prior_commits(json.dumps(entries_with(sha="abc")), source="kernels.lock")



def test_a_kernels_017_lock_is_not_our_format() -> None:
    with pytest.raises(LockfileError, match=r"unknown key 'dependency' in '\[0\].dependency'"):
        Lockfile.from_json(KERNELS_017_LOCK)


def test_kernels_016_entries_upgrade_to_a_lock_without_dependencies() -> None:
    legacy = [{k: v for k, v in e.items() if k in ("repo_id", "sha", "variants")} for e in entries_with()]
    lock = from_kernels016(legacy, "kernels.lock")
    assert [k.dependencies for k in lock.kernels] == [(), ()]
    assert [k.version for k in lock.kernels] == [None, None]
    # Our own entries are read as they are, dependencies included.
    assert from_kernels016(json.loads(example_text()), "kernels.lock") == Lockfile.from_json(example_text())
    assert lock_format(legacy) == "kernels-0.16" and lock_format([]) == "kernel-deps"
    assert lock_format(json.loads(KERNELS_017_LOCK)) == "kernels-0.17"


def test_malformed_kernels_016_lock_has_our_messages() -> None:
    legacy = [{k: v for k, v in e.items() if k in ("repo_id", "sha", "variants")} for e in entries_with(sha="abc")]
    with pytest.raises(LockfileError, match=r"^kernels\.lock: invalid commit 'abc' in '\[1\]\.sha' \(kernels-test/rotary\)"):
        prior_commits(json.dumps(legacy), source="kernels.lock")
    with pytest.raises(LockfileError, match=r"duplicate repo_id 'kernels-test/rotary' in '\[1\].repo_id' and '\[2\].repo_id'"):
        prior_commits(json.dumps([*legacy[:1], *entries_with()[1:], entries_with()[1]]), source="kernels.lock")

"""A kernels 0.17 lock naming one dependency twice is refused, as kernels 0.17.2 refuses it.

kernels 0.17 keys its lock by the dependency (repo id and version, or repo id and
revision) and its own parser (``KernelLocks.from_json``) refuses a file that names one
twice, whether the entries agree or not. Every read of such a file is refused here with one
line naming the dependency; each case is also given to the real kernels 0.17.2 parser, so
the two libraries agree on which files are invalid.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernel_deps.core.errors import LockfileError
from kernel_deps.lock.read import PURPOSES, parse_lock
from tests.fixtures.locks import SHA_A, SHA_B
from tests.fixtures.peers import run_peer

# The cases' files given to kernels 0.17.2's own parser: argv[1] JSON list of lock texts; its verdict for each.
PARSE_WITH_017 = """
import json, sys
from kernels._rust import KernelLocks
verdicts = []
for text in json.loads(sys.argv[1]):
    try:
        verdicts.append(["ok", len(KernelLocks.from_json(text))])
    except ValueError as exc:
        verdicts.append(["refused", str(exc)])
print(json.dumps(verdicts))
"""


def pin(repo_id: str, commit: str, **dependency: Any) -> dict[str, Any]:
    return {"dependency": {"repo-id": repo_id, **dependency}, "lock": {"commit": commit}}


DUPLICATES = {
    "two-commits": ([pin("a/b", SHA_A, version=1), pin("a/b", SHA_B, version=1)], "'a/b' (version 1)", 0, 1),
    "identical": ([pin("a/b", SHA_A, version=1)] * 2, "'a/b' (version 1)", 0, 1),
    "revision": ([pin("c/d", SHA_A, version=2), pin("a/b", SHA_A, revision="main"), pin("a/b", SHA_B, revision="main")],
                 "'a/b' (revision main)", 1, 2),
    "commit-case": ([pin("a/b", SHA_A, version=1), pin("a/b", SHA_A.upper(), version=1)], "'a/b' (version 1)", 0, 1),
}
# Not duplicates for kernels 0.17 either: another major, a revision naming the major's branch, another repo id's case.
DISTINCT = {
    "two-majors": [pin("a/b", SHA_A, version=1), pin("a/b", SHA_B, version=2)],
    "revision-v1-and-version-1": [pin("a/b", SHA_A, revision="v1"), pin("a/b", SHA_A, version=1)],
    "repo-id-case": [pin("a/b", SHA_A, revision="main"), pin("A/b", SHA_A, revision="main")],
}


@pytest.mark.parametrize("name", DUPLICATES)
@pytest.mark.parametrize("purpose", PURPOSES)
def test_a_dependency_locked_twice_is_one_line_naming_it_for_every_purpose(name: str, purpose: str) -> None:
    entries, named, first, second = DUPLICATES[name]
    with pytest.raises(LockfileError) as caught:
        parse_lock(json.dumps(entries, indent=2), source="app/kernels.lock", purpose=purpose)
    message = str(caught.value)
    assert message.startswith(f"app/kernels.lock: dependency {named} is locked twice, in '[{first}]' and '[{second}]'")
    assert "(kernels 0.17 lock)" in message and "run 'kernels lock'" in message and "\n" not in message


def test_kernels_017_itself_refuses_the_same_files_and_accepts_the_same_others() -> None:
    texts = [json.dumps(entries) for entries, *_ in DUPLICATES.values()] + [json.dumps(e) for e in DISTINCT.values()]
    verdicts = run_peer("0.17", PARSE_WITH_017, json.dumps(texts))
    refused = [verdict for verdict, _ in verdicts]
    assert refused == ["refused"] * len(DUPLICATES) + ["ok"] * len(DISTINCT)
    assert all("duplicate dependency" in detail for _, detail in verdicts[: len(DUPLICATES)])
    for entries in DISTINCT.values():
        assert parse_lock(json.dumps(entries), source="kernels.lock", purpose="lock").format == "kernels-0.17"

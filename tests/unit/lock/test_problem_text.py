"""A problem is a kind and fields; its sentence is made only when shown (lock.problem_text).

Each kind's sentence, exactly as ``kernels verify`` and ``kernels lock --check`` print it and
the JSON ``message`` holds it; and the JSON schemas list every kind a problem can carry.
"""

from __future__ import annotations

import pytest

from kernel_deps.checks.verification import NOTICE_KINDS
from kernel_deps.lock.freshness import Problem
from kernel_deps.lock.problem_text import KINDS, problem_text
from tests.fixtures.schemas import load_schema

SHA, NEW = "0123456789ab" + "c" * 28, "fedcba987654" + "d" * 28
RELOCK = "run 'kernels lock' to update kernels.lock"
CONVERT = "run 'kernels lock' to convert it: it keeps every pin that still holds and records"
UPGRADE = "run 'kernels lock --upgrade-package org/k'"
REINSTALL = "pip install --force-reinstall --require-hashes -r requirements.txt"
LABEL = "v1 (0123456789ab)"

CASES = [
    (Problem("not-locked", "org/k", None, None, asked=">=1"),
     f"org/k is in pyproject.toml ('>=1') but not in kernels.lock; {RELOCK}"),
    (Problem("unsatisfied", "org/k", None, None, ">=2", LABEL),
     f"org/k: the locked {LABEL} does not satisfy '>=2' from pyproject.toml; {RELOCK}"),
    (Problem("version-not-recorded", "org/k", None, None, ">=2", "commit 0123456789ab", written_by="kernels 0.12"),
     "org/k: kernels.lock (written by kernels 0.12) pins commit 0123456789ab but records no version for it, so it "
     f"cannot show that it satisfies '>=2' from pyproject.toml; {CONVERT} the version of each pin"),
    (Problem("signature-missing", "org/k", "torch-cpu", None, "a signer", None, written_by=None),
     "org/k build torch-cpu: [tool.kernels.trust] require-signatures = true, but kernels.lock records no signer "
     f"for it (expected a signed metadata.json; found none locked); {RELOCK}"),
    (Problem("signature-missing", "org/k", None, None, "a signer", None, written_by="kernels 0.12"),
     "org/k: [tool.kernels.trust] require-signatures = true, but kernels.lock (written by kernels 0.12) records no "
     f"signer for its builds (expected a signed metadata.json; found none locked); {CONVERT} the signer of each "
     "build (its 'signatures'), or refuses an unsigned one"),
    (Problem("requirement-changed", "org/k", None, None, ">=2", ">=1"),
     f"org/k: pyproject.toml asks for '>=2' but kernels.lock was locked for '>=1'; {RELOCK}"),
    (Problem("requirement-changed", "org/k", None, None, ">=2", None),
     f"org/k: pyproject.toml asks for '>=2' but kernels.lock was locked only as a dependency of another kernel; {RELOCK}"),
    (Problem("removed", "org/k", None, None, asked=">=1"),
     f"org/k was removed from pyproject.toml but kernels.lock still requires it ('>=1'); {RELOCK}"),
    (Problem("orphan", "org/k", None, None),
     f"org/k is in kernels.lock but no longer required by pyproject.toml or a locked kernel; {RELOCK}"),
    (Problem("dependency-unsatisfied", "org/dep", None, None, ">=2", LABEL, by="org/k", by_locked="v3 (fedcba987654)"),
     f"org/dep: the locked {LABEL} does not satisfy '>=2', which org/k v3 (fedcba987654) requires of it (its "
     f"kernel-depends, as kernels.lock records them); {RELOCK}"),
    (Problem("requirements-not-recorded", None, None, None, repo_ids=("org/a", "org/b")),
     "kernels.lock records which kernels org/a, org/b depend on but not what they require of them, so those pins "
     "are not checked against their kernel-depends; 'kernels lock' records them (kernel_depends in each entry), "
     "keeping every pin that meets them"),
    (Problem("target-not-served", "org/k", None, None, "cuda12", None, locked=LABEL),
     f"org/k {LABEL}: kernels.lock has no build for the target cuda12 (declared in [tool.kernels] targets, not "
     "served by the locked commit); run 'kernels lock' to pick a version that has one"),
    (Problem("trust-removed", "org/k", None, None, "org", None),
     "org/k: kernels.lock trusts it because [tool.kernels.trust] publishers listed 'org', which pyproject.toml no "
     "longer lists; add it back, or run 'kernels lock' to ask the Hub whether it trusts the publisher"),
    (Problem("signer-not-allowed", "org/k", "torch-cpu", None, None, "someone", detail="not in identities"),
     f"org/k build torch-cpu: the signer kernels.lock records is not allowed: not in identities; {RELOCK}"),
    (Problem("local-override", None, None, None, variable="LOCAL_KERNELS", overrides="org/k=/src/k", lock="kernels.lock"),
     "LOCAL_KERNELS is set (org/k=/src/k): loads of those kernels use the local builds instead of kernels.lock; "
     "unset LOCAL_KERNELS to ship"),
    (Problem("foreign-lock", None, None, None, lock="/p/kernels.lock", written_by="kernels 0.12"),
     "/p/kernels.lock was written by kernels 0.12: it records no requirements, no versions and no signers, so only "
     "what it records is judged against pyproject.toml; 'kernels lock' converts it, keeping its pins"),
    (Problem("unreadable", "org/k", "torch-cpu", None, detail="Permission denied"),
     "org/k torch-cpu: cannot read the cached copy (Permission denied); check its permissions"),
    (Problem("unreadable", "org/k", "torch-cpu", None, detail="Permission denied", during="signature-check"),
     "org/k torch-cpu: cannot read the cached copy (Permission denied)"),
    (Problem("unreadable", "org/k", "torch-cpu", "/site/k", detail="Permission denied", wheel="k-1.0 (/site)"),
     "org/k torch-cpu: k-1.0 (/site): cannot read it (Permission denied); check its permissions"),
    (Problem("digest-mismatch", "org/k", "torch-cpu", "a.py", "a.py = 1", "2", detail="the digest refuses it"),
     "the digest refuses it"),
    (Problem("modified", "org/k", "torch-cpu", "a.py", "1", "2"), "org/k torch-cpu: a.py was modified"),
    (Problem("outside-cache", "org/k", "torch-cpu", "a.py", None, "/etc/x"),
     "org/k torch-cpu: a.py links outside the cache (to /etc/x); the loader refuses it, run 'kernels download' to "
     "replace it"),
    (Problem("hash-mismatch", "org/k", "torch-cpu", None, "h1", "h2"),
     "org/k torch-cpu: the cached files hash to a different value than kernels.lock records"),
    (Problem("wheel-record", "org/k", None, "/site/k", wheel="k-1.0 (/site)", detail="has no commit"),
     "org/k: k-1.0 (/site): kernel_deps.json has no commit; the loader skips it"),
    (Problem("wheel-not-locked", "org/k", "torch-cpu", "/site/k", SHA, NEW, wheel="k-1.0 (/site)"),
     "org/k torch-cpu: k-1.0 (/site) holds commit fedcba987654, not a variant kernels.lock pins at 0123456789ab; "
     "install the wheels 'kernels to-wheel' writes from this lock"),
    (Problem("wheel-missing", "org/k", "torch-cpu", "a.py", "1", None, wheel="k-1.0 (/site)"),
     f"org/k torch-cpu: k-1.0 (/site): a.py is missing; reinstall it ({REINSTALL})"),
    (Problem("wheel-hash-mismatch", "org/k", "torch-cpu", "kernel_deps.json", "h1", "h2", wheel="k-1.0 (/site)"),
     "org/k torch-cpu: k-1.0 (/site): its kernel_deps.json records files that hash to a different value than "
     f"kernels.lock records; reinstall it ({REINSTALL})"),
    (Problem("unlocked-variant", "org/k", "torch-odd", None, commit=SHA, folder="/c/build/torch-odd"),
     "org/k torch-odd: in the cache at the locked commit 0123456789ab, but kernels.lock does not list it; delete "
     "/c/build/torch-odd"),
    (Problem("no-variant", "org/k", None, None, variants=("torch-cpu", "torch-cuda"), machine="linux x86_64"),
     "org/k: kernels.lock has no variant for this machine (linux x86_64); locked: torch-cpu, torch-cuda"),
    (Problem("no-variant", "org/k", None, None, "cuda12", None, variants=()),
     "org/k: kernels.lock has no variant for the target cuda12; locked: none"),
    (Problem("not-cached", "org/k", "torch-cpu", None, folder="/c/torch-cpu"),
     "org/k torch-cpu: this machine's variant is not in the cache (/c/torch-cpu); run 'kernels download'"),
    (Problem("target-not-cached", "org/k", "torch-cuda", None, "cuda12", None, folder="/c/torch-cuda"),
     "org/k torch-cuda: the variant for the target cuda12 is not in the cache (/c/torch-cuda); run 'kernels "
     "download --target cuda12'"),
    (Problem("repo-missing", "org/k", None, None, detail="org/k: not on the Hub", commit=SHA),
     "org/k: not on the Hub (kernels.lock pins it at 0123456789ab)"),
    (Problem("hub-error", "org/k", None, None, detail="HTTP 500"), "HTTP 500"),
    (Problem("commit-missing", "org/k", None, None, SHA, None),
     f"org/k: the locked commit 0123456789ab no longer exists on the Hub (history rewritten?); {UPGRADE} to pin a "
     "commit that exists"),
    (Problem("variant-not-on-hub", "org/k", "torch-cpu", None, "h1", None, commit=SHA),
     "org/k torch-cpu: not on the Hub at 0123456789ab; kernels.lock does not match the Hub (edited by hand?); "
     f"{RELOCK}"),
    (Problem("variant-not-locked", "org/k", "torch-cuda", None, None, "h2", commit=SHA),
     "org/k torch-cuda: on the Hub but not in kernels.lock at 0123456789ab; kernels.lock does not match the Hub "
     f"(edited by hand?); {RELOCK}"),
    (Problem("hub-hash-mismatch", "org/k", "torch-cpu", None, "h1", "h2", commit=SHA),
     "org/k torch-cpu: the Hub's files hash differently at 0123456789ab; kernels.lock does not match the Hub "
     f"(edited by hand?); {RELOCK}"),
    (Problem("ref-missing", "org/k", None, None, SHA, None, ref="v1"),
     f"org/k: v1 no longer exists on the Hub (locked at 0123456789ab); {UPGRADE} to pin one that does"),
    (Problem("ref-advanced", "org/k", None, None, SHA, NEW, ref="v1"),
     "org/k: branch v1 has moved on to fedcba987654 since it was locked at 0123456789ab; the lock keeps "
     f"0123456789ab; {UPGRADE} to take the new build"),
    (Problem("ref-moved", "org/k", None, None, SHA, NEW, ref="v1.0.0", ref_kind="tag"),
     "org/k: tag v1.0.0 now points at fedcba987654, not the locked 0123456789ab (the tag was moved); review the "
     f"change, then {UPGRADE} to take it"),
    (Problem("ref-moved", "org/k", None, None, SHA, NEW, ref="v1", ref_kind="branch"),
     "org/k: branch v1 now points at fedcba987654, not the locked 0123456789ab (history rewritten by a "
     f"force-push); review the change, then {UPGRADE} to take it"),
]  # fmt: skip


@pytest.mark.parametrize("problem, text", CASES, ids=[p.kind for p, _ in CASES])
def test_each_kind_is_said_from_its_fields(problem: Problem, text: str) -> None:
    assert problem_text(problem) == problem.message == problem.to_dict()["message"] == text


def test_a_problems_json_holds_its_fields_and_its_sentence_not_its_facts() -> None:
    problem = Problem("not-locked", "org/k", None, None, asked=">=1")
    assert problem.to_dict() == {"kind": "not-locked", "repo_id": "org/k", "variant": None, "path": None,
                                 "message": problem_text(problem), "expected": None, "got": None}  # fmt: skip
    assert problem == Problem("not-locked", "org/k", None, None, asked=">=1") != Problem("not-locked", "org/k", None, None)


def test_the_schemas_list_every_kind_a_problem_can_carry() -> None:
    items = load_schema("verify")["properties"]
    assert set(items["problems"]["items"]["properties"]["kind"]["enum"]) == KINDS - NOTICE_KINDS
    assert set(items["notices"]["items"]["properties"]["kind"]["enum"]) == NOTICE_KINDS
    lock_kinds = set(load_schema("lock")["properties"]["problems"]["items"]["properties"]["kind"]["enum"])
    assert lock_kinds < KINDS and {"not-locked", "trust-removed", "signer-not-allowed"} <= lock_kinds

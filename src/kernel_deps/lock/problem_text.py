"""What a :class:`~kernel_deps.lock.freshness.Problem` says, in words: the one place its
sentence is made, from its kind and fields, for the command line and the JSON ``message``.

A problem's ``facts`` hold what its kind's sentence names beyond the common fields (the
requirement asked, who wrote the lock, a folder, a Hub error's own text as ``detail``...);
each kind's function below names the facts it reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from kernel_deps.lock.freshness import Problem

RELOCK_HINT = "run 'kernels lock' to update kernels.lock"
# What converting a lock another tool wrote adds, for messages about what it cannot show.
CONVERT_HINT = "run 'kernels lock' to convert it: it keeps every pin that still holds and records"
REINSTALL = "pip install --force-reinstall --require-hashes -r requirements.txt"

# What a cached (or installed) file's kind says of it (``path``: the file, ``got``: where it links).
FILE_TEXT = {
    "modified": "{path} was modified",
    "missing": "{path} is missing",
    "extra": "{path} was added; it is not part of the locked variant",
    "not-a-file": "{path} is not a regular file (a broken link or a link to a folder)",
    "outside-cache": "{path} links outside the cache (to {got}); the loader refuses it, run 'kernels download' to replace it",
    "hash-mismatch": "the cached files hash to a different value than kernels.lock records",
}


def problem_text(problem: Problem) -> str:
    """The sentence saying ``problem``, complete on its own."""
    kind = problem.kind
    if kind in FILE_TEXT:
        return f"{problem.repo_id} {problem.variant}: " + _file_text(kind, problem)
    if kind.startswith("wheel-") and kind[len("wheel-"):] in FILE_TEXT:
        return _wheel_file(problem)
    return _TEXT[kind](problem, problem.facts)


def _file_text(kind: str, p: Problem) -> str:
    return FILE_TEXT[kind].format(path=p.path, got=p.got)


def _wheel_file(p: Problem) -> str:
    kind = p.kind[len("wheel-"):]
    if kind == "hash-mismatch":
        text = "its kernel_deps.json records files that hash to a different value than kernels.lock records"
    else:
        text = _file_text(kind, p)
    return f"{p.repo_id} {p.variant}: {p.facts['wheel']}: {text}; reinstall it ({REINSTALL})"


def _short(sha: str | None) -> str:
    return (sha or "")[:12]


# -- the lock against pyproject.toml (lock.freshness) -----------------------------------


def _not_locked(p: Problem, f: dict) -> str:  # asked: the requirement's text
    return f"{p.repo_id} is in pyproject.toml ({f['asked']!r}) but not in kernels.lock; {RELOCK_HINT}"


def _unsatisfied(p: Problem, f: dict) -> str:
    return f"{p.repo_id}: the locked {p.got} does not satisfy {p.expected!r} from pyproject.toml; {RELOCK_HINT}"


def _version_not_recorded(p: Problem, f: dict) -> str:  # written_by: the tool that wrote the lock
    return (
        f"{p.repo_id}: kernels.lock (written by {f['written_by']}) pins {p.got} but records no version for it, so it "
        f"cannot show that it satisfies {p.expected!r} from pyproject.toml; {CONVERT_HINT} the version of each pin"
    )


def _signature_missing(p: Problem, f: dict) -> str:  # written_by: the other tool that wrote the lock, or None
    written_by = f.get("written_by")
    what = f"{p.repo_id} build {p.variant}" if p.variant else p.repo_id
    records = f"kernels.lock (written by {written_by})" if written_by else "kernels.lock"
    message = (
        f"{what}: [tool.kernels.trust] require-signatures = true, but {records} records no signer for "
        f"{'it' if p.variant else 'its builds'} (expected a signed metadata.json; found none locked)"
    )
    hint = (f"{CONVERT_HINT} the signer of each build (its 'signatures'), or refuses an unsigned one" if written_by
            else RELOCK_HINT)  # fmt: skip
    return f"{message}; {hint}"


def _requirement_changed(p: Problem, f: dict) -> str:
    was = f"for {p.got!r}" if p.got else "only as a dependency of another kernel"
    return f"{p.repo_id}: pyproject.toml asks for {p.expected!r} but kernels.lock was locked {was}; {RELOCK_HINT}"


def _removed(p: Problem, f: dict) -> str:  # asked: the requirement the lock still records
    return (f"{p.repo_id} was removed from pyproject.toml but kernels.lock still requires it ({f['asked']!r}); "
            f"{RELOCK_HINT}")  # fmt: skip


def _orphan(p: Problem, f: dict) -> str:
    return f"{p.repo_id} is in kernels.lock but no longer required by pyproject.toml or a locked kernel; {RELOCK_HINT}"


def _dependency_unsatisfied(p: Problem, f: dict) -> str:  # by, by_locked: the kernel requiring it, its pin
    return (
        f"{p.repo_id}: the locked {p.got} does not satisfy {p.expected!r}, which {f['by']} {f['by_locked']} "
        f"requires of it (its kernel-depends, as kernels.lock records them); {RELOCK_HINT}"
    )


def _requirements_not_recorded(p: Problem, f: dict) -> str:  # repo_ids: the kernels without kernel_depends
    return (
        f"kernels.lock records which kernels {', '.join(f['repo_ids'])} depend on but not what they require of them, "
        "so those pins are not checked against their kernel-depends; 'kernels lock' records them "
        "(kernel_depends in each entry), keeping every pin that meets them"
    )


def _target_not_served(p: Problem, f: dict) -> str:  # locked: the pin, as "v1 (sha)" or "commit sha"
    return (
        f"{p.repo_id} {f['locked']}: kernels.lock has no build for the target {p.expected} "
        "(declared in [tool.kernels] targets, not served by the locked commit); "
        "run 'kernels lock' to pick a version that has one"
    )


def _trust_removed(p: Problem, f: dict) -> str:
    return (
        f"{p.repo_id}: kernels.lock trusts it because [tool.kernels.trust] publishers listed "
        f"{p.expected!r}, which pyproject.toml no longer lists; add it back, or run 'kernels lock' "
        "to ask the Hub whether it trusts the publisher"
    )


def _signer_not_allowed(p: Problem, f: dict) -> str:  # detail: why the signature policy refuses the signer
    return (f"{p.repo_id} build {p.variant}: the signer kernels.lock records is not allowed: {f['detail']}; "
            f"{RELOCK_HINT}")  # fmt: skip


# -- the lock against this machine (checks.verification, checks.cache) --------------------


def _local_override(p: Problem, f: dict) -> str:  # variable, overrides: LOCAL_KERNELS and what it names; lock
    variable = f["variable"]
    return (f"{variable} is set ({f['overrides']}): loads of those kernels use the local builds instead of "
            f"{f['lock']}; unset {variable} to ship")  # fmt: skip


def _foreign_lock(p: Problem, f: dict) -> str:  # lock: its path; written_by; checked (kernels 0.17: False when refused)
    if f["written_by"] == "Hugging Face kernels 0.17" and f.get("checked") is False:  # the policy's findings above
        return (f"{f['lock']} was written by {f['written_by']}: it pins commits but no variant hashes and records no "
                "signers, so the project's policy refuses it as it is and no build was checked against the Hub; "
                "'kernels lock' converts it, keeping its pins and recording each build's signer")  # fmt: skip
    if f["written_by"] == "Hugging Face kernels 0.17":  # used as it is: see kernel_deps.resolve.pinned
        return (f"{f['lock']} was written by {f['written_by']}: it pins commits but no variant hashes, so each build "
                "was checked against the Hub's listing at its commit, its metadata.json digest and its signature "
                "where it has one; 'kernels lock' converts it, keeping its pins")  # fmt: skip
    return (f"{f['lock']} was written by {f['written_by']}: it records no requirements, no versions and no signers, "
            "so only what it records is judged against pyproject.toml; 'kernels lock' converts it, "
            "keeping its pins")  # fmt: skip


def _unreadable(p: Problem, f: dict) -> str:  # detail: the OS error; wheel (an installed wheel) or during
    if "wheel" in f:
        return f"{p.repo_id} {p.variant}: {f['wheel']}: cannot read it ({f['detail']}); check its permissions"
    if f.get("during") == "signature-check":
        return f"{p.repo_id} {p.variant}: cannot read the cached copy ({f['detail']})"
    return f"{p.repo_id} {p.variant}: cannot read the cached copy ({f['detail']}); check its permissions"


def _refused_build(p: Problem, f: dict) -> str:  # detail: the digest's or signature's refusal, as trust says it
    return f["detail"]


def _wheel_record(p: Problem, f: dict) -> str:  # wheel: the wheel's label; detail: what is wrong with its record
    return f"{p.repo_id}: {f['wheel']}: kernel_deps.json {f['detail']}; the loader skips it"


def _wheel_not_locked(p: Problem, f: dict) -> str:  # wheel: its label; expected: the locked commit, got: the wheel's
    return (f"{p.repo_id} {p.variant}: {f['wheel']} holds commit {_short(p.got)}, not a variant kernels.lock pins at "
            f"{_short(p.expected)}; install the wheels 'kernels to-wheel' writes from this lock")  # fmt: skip


def _unlocked_variant(p: Problem, f: dict) -> str:  # commit; folder: the variant's folder in the cache
    return (f"{p.repo_id} {p.variant}: in the cache at the locked commit {_short(f['commit'])}, but kernels.lock "
            f"does not list it; delete {f['folder']}")  # fmt: skip


def _no_variant(p: Problem, f: dict) -> str:  # variants: those locked; machine (described) or expected: the target
    locked = ", ".join(f["variants"]) or "none"
    if p.expected is not None:
        return f"{p.repo_id}: kernels.lock has no variant for the target {p.expected}; locked: {locked}"
    return f"{p.repo_id}: kernels.lock has no variant for this machine ({f['machine']}); locked: {locked}"


def _not_cached(p: Problem, f: dict) -> str:  # folder: where the variant belongs
    return (f"{p.repo_id} {p.variant}: this machine's variant is not in the cache ({f['folder']}); "
            "run 'kernels download'")  # fmt: skip


def _target_not_cached(p: Problem, f: dict) -> str:  # folder; expected: the target
    return (f"{p.repo_id} {p.variant}: the variant for the target {p.expected} is not in the cache "
            f"({f['folder']}); run 'kernels download --target {p.expected}'")  # fmt: skip


# -- the lock against the Hub (checks.hub) ----------------------------------------------


def _repo_missing(p: Problem, f: dict) -> str:  # detail: the Hub error; commit: the locked one
    return f"{f['detail']} (kernels.lock pins it at {_short(f['commit'])})"


def _hub_error(p: Problem, f: dict) -> str:  # detail: the Hub error
    return f["detail"]


def _upgrade(p: Problem) -> str:
    return f"run 'kernels lock --upgrade-package {p.repo_id}'"


def _commit_missing(p: Problem, f: dict) -> str:
    return (f"{p.repo_id}: the locked commit {_short(p.expected)} no longer exists on the Hub (history rewritten?); "
            f"{_upgrade(p)} to pin a commit that exists")  # fmt: skip


_HUB_VARIANT = {"variant-not-on-hub": "not on the Hub", "variant-not-locked": "on the Hub but not in kernels.lock",
                "hub-hash-mismatch": "the Hub's files hash differently"}  # fmt: skip


def _hub_variant(p: Problem, f: dict) -> str:  # commit: the locked one
    return (f"{p.repo_id} {p.variant}: {_HUB_VARIANT[p.kind]} at {_short(f['commit'])}; kernels.lock does not match "
            f"the Hub (edited by hand?); {RELOCK_HINT}")  # fmt: skip


def _ref_missing(p: Problem, f: dict) -> str:  # ref: the tag or branch name; expected: the locked commit
    return (f"{p.repo_id}: {f['ref']} no longer exists on the Hub (locked at {_short(p.expected)}); "
            f"{_upgrade(p)} to pin one that does")  # fmt: skip


def _ref_advanced(p: Problem, f: dict) -> str:  # ref; expected: the locked commit, got: the branch's now
    sha = _short(p.expected)
    return (f"{p.repo_id}: branch {f['ref']} has moved on to {_short(p.got)} since it was locked at {sha}; "
            f"the lock keeps {sha}; {_upgrade(p)} to take the new build")  # fmt: skip


def _ref_moved(p: Problem, f: dict) -> str:  # ref, ref_kind ("tag" or "branch"); expected, got: the commits
    ref_kind = f["ref_kind"]
    how = "the tag was moved" if ref_kind == "tag" else "history rewritten by a force-push"
    return (f"{p.repo_id}: {ref_kind} {f['ref']} now points at {_short(p.got)}, not the locked {_short(p.expected)} "
            f"({how}); review the change, then {_upgrade(p)} to take it")  # fmt: skip


_TEXT: dict[str, Callable[[Problem, dict], str]] = {
    "not-locked": _not_locked, "unsatisfied": _unsatisfied, "version-not-recorded": _version_not_recorded,
    "signature-missing": _signature_missing, "requirement-changed": _requirement_changed, "removed": _removed,
    "orphan": _orphan, "dependency-unsatisfied": _dependency_unsatisfied,
    "requirements-not-recorded": _requirements_not_recorded, "target-not-served": _target_not_served,
    "trust-removed": _trust_removed, "signer-not-allowed": _signer_not_allowed,
    "local-override": _local_override, "foreign-lock": _foreign_lock, "unreadable": _unreadable,
    "digest-mismatch": _refused_build, "signature-invalid": _refused_build, "wheel-record": _wheel_record,
    "wheel-not-locked": _wheel_not_locked, "unlocked-variant": _unlocked_variant, "no-variant": _no_variant,
    "not-cached": _not_cached, "target-not-cached": _target_not_cached,
    "repo-missing": _repo_missing, "hub-error": _hub_error, "commit-missing": _commit_missing,
    "variant-not-on-hub": _hub_variant, "variant-not-locked": _hub_variant, "hub-hash-mismatch": _hub_variant,
    "ref-missing": _ref_missing, "ref-advanced": _ref_advanced, "ref-moved": _ref_moved,
}  # fmt: skip
# Every kind a problem can carry (the JSON schemas' enum of "kind" lists the same).
KINDS = frozenset(_TEXT) | frozenset(FILE_TEXT) | frozenset(f"wheel-{kind}" for kind in FILE_TEXT)

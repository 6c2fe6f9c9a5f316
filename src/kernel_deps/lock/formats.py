"""Other tools' lock formats: their entries read as strictly as those tools read them, and ours written in theirs.

- the Hugging Face ``kernels`` library up to 0.16, whose entries are ours without
  ``version``, ``requirement`` and ``dependencies`` (:func:`from_kernels016`);
- ``kernels`` 0.17, a list of ``{"dependency": {"repo-id", "version" | "revision"},
  "lock": {"commit"}}``; it may pin one repo at several commits, one per version asked
  for (:func:`kernels017_named_pins`).

Which format a file is in, and what each command takes from it, is decided once, by
:mod:`kernel_deps.lock.read`, which reads every lock through the readers here. A writer
for a format sits beside its reader.

Our lock is written in either of their formats by :func:`to_kernels016` and
:func:`to_kernels017` (``kernels export``, :mod:`kernel_deps.commands.export`), so a
project can hand its pins to a tool that reads only those.

This module imports :mod:`kernel_deps.lock.model` (the model, its JSON helpers) and
``errors``; ``lockread`` only inside :func:`export_lock` (``lockread`` imports this module).
"""

from __future__ import annotations

import json
import re
from typing import Any

from kernel_deps.core.errors import LockfileError
from kernel_deps.core.fields import FieldError, check_object, invalid
from kernel_deps.lock.entries import COMMIT_SHA, repo_id_problem
from kernel_deps.lock.model import Lockfile, parse_entries

__all__ = [
    "from_kernels016", "kernels017_named_pins", "to_kernels016", "to_kernels017",
]  # fmt: skip


# -- kernels <= 0.16 ----------------------------------------------------------------------------


def from_kernels016(data: list[Any], source: str) -> Lockfile:
    """The decoded entries of a lock in our format or kernels <= 0.16's, as a Lockfile.

    An entry without ``dependencies`` (as kernels <= 0.16 writes them) depends on nothing;
    everything else is checked as strictly as our own lock, with the same messages.
    """
    ours = [
        {**entry, "dependencies": []} if isinstance(entry, dict) and "dependencies" not in entry else entry
        for entry in data
    ]
    return parse_entries(ours, source)


# -- kernels 0.17 -------------------------------------------------------------------------------


def kernels017_named_pins(data: list[Any], source: str) -> dict[str, tuple[str, str | None]]:
    """Repo id -> (commit, the ref it was locked under) of decoded kernels 0.17 entries.

    The ref is ``vN`` for a ``"version": N`` entry (kernels 0.17 resolves a major to that
    branch) and the revision for a branch or tag revision; None for a commit, or when one
    repo has entries naming different refs. Repos pinned at two commits are left out. A
    dependency (repo id and version, or repo id and revision) named by two entries is a
    LockfileError naming it, as kernels 0.17 refuses the file.
    """
    pins: dict[str, tuple[str, str | None]] = {}
    conflicting: set[str] = set()
    first: dict[tuple[str, str, object], int] = {}  # each dependency (repo id, key, value) -> its entry
    for i, entry in enumerate(data):
        try:
            repo_id, commit, ref = _kernels017_pin(entry)
        except FieldError as exc:
            raise LockfileError(
                f"{exc.detail} in '{exc.within(f'[{i}]').key}' (kernels 0.17 lock); "
                f"{exc.expected}",
                subject=source,
                hint="fix the entry, or delete the lock and run 'kernels lock'",
            ) from None
        # kernels 0.17 keys its lock by the dependency and refuses a file naming one twice
        # (same commit or not): which entry would hold is not the file's to say.
        key = "version" if "version" in entry["dependency"] else "revision"
        asked = (repo_id, key, entry["dependency"][key])
        if asked in first:
            raise LockfileError(
                f"{source}: dependency {repo_id!r} ({key} {asked[2]}) is locked twice, in '[{first[asked]}]' and "
                f"'[{i}]' (kernels 0.17 lock); expected one entry per dependency, as Hugging Face kernels refuses "
                "a duplicate dependency; delete one of them, or delete the lock and run 'kernels lock'"
            )
        first[asked] = i
        known = pins.setdefault(repo_id, (commit, ref))
        if known[0] != commit:
            conflicting.add(repo_id)
        elif known[1] != ref:
            pins[repo_id] = (commit, None)
    return {repo_id: pin for repo_id, pin in pins.items() if repo_id not in conflicting}


def _kernels017_pin(entry: Any) -> tuple[str, str, str | None]:
    """(repo id, commit, ref) of one kernels 0.17 entry, checked as strictly as kernels 0.17 does."""
    check_object(entry, "", ("dependency", "lock"), ("dependency", "lock"))
    dep = check_object(entry["dependency"], ".dependency", ("repo-id", "version", "revision"), ("repo-id",))
    lock = check_object(entry["lock"], ".lock", ("commit",), ("commit",))
    if reason := repo_id_problem(dep["repo-id"]):
        raise invalid(".dependency.repo-id", "repo id", dep["repo-id"], reason)
    if ("version" in dep) == ("revision" in dep):
        raise FieldError(".dependency", "need exactly one of 'version' and 'revision'", "expected one of them")
    version = dep.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise invalid(".dependency.version", "version", version, "expected a major version number")
    if not isinstance(dep.get("revision", "-"), str) or not dep.get("revision", "-"):
        raise invalid(".dependency.revision", "revision", dep["revision"], "expected a branch, tag or commit")
    commit = lock["commit"]
    # kernels 0.17 accepts upper case and lower-cases it; SHA-256 object ids name no Hub commit.
    if not isinstance(commit, str) or not COMMIT_SHA.fullmatch(commit.lower()):
        raise invalid(".lock.commit", "commit", commit, "expected 40 hex characters (a full commit SHA)")
    if "version" in dep:
        ref: str | None = f"v{version}"
    else:
        ref = None if COMMIT_SHA.fullmatch(dep["revision"].lower()) else dep["revision"]
    return dep["repo-id"], commit.lower(), ref


# -- writing their formats ----------------------------------------------------------------------

_MAJOR_BRANCH = re.compile(r"^v(0|[1-9][0-9]*)$")


def to_kernels016(lock: Lockfile) -> str:
    """``lock`` as kernels <= 0.16 writes it: ``repo_id``, ``sha`` and ``variants`` per entry."""
    entries = [
        {"repo_id": k.repo_id, "sha": k.sha, "variants": {n: {"hash": v.hash, "hash_type": v.hash_type} for n, v in k.variants.items()}}
        for k in lock.kernels
    ]
    return json.dumps(entries, indent=2)


def to_kernels017(lock: Lockfile) -> str:
    """``lock`` as kernels 0.17 writes it: one ``{"dependency", "lock": {"commit"}}`` per way a
    kernel is asked for, byte for byte as its own writer lays them out.

    kernels 0.17 looks a kernel up by the dependency that asks for it: a project's entry
    for a direct kernel, a parent's ``kernel-depends`` entry for a transitive one. So each
    kernel gets the key its requirement gives (a major: ``{"version": N}``; a revision:
    ``{"revision": ...}``; a PEP 440 range, which kernels 0.17 cannot express: the locked
    tag as a revision), and every kernel gets the key its locked ref gives (the ``vN``
    branch: ``{"version": N}``, which is how kernels 0.17 resolves ``version = N``; another
    tag or branch, or none: a revision), which is what a parent asking for it in
    kernels 0.17's terms names, and the keys its parents' recorded ``kernel-depends`` ask
    with (a major or a revision). All keys of a kernel pin its one locked commit.
    """
    keys: set[tuple[str, int, int | str]] = set()
    commits: dict[str, str] = {}
    for kernel in lock.kernels:
        commits[kernel.repo_id] = kernel.sha
        by_ref = _key_for_ref(kernel.version, kernel.sha)
        keys.add((kernel.repo_id, *by_ref))
        asked = [(kernel.repo_id, kernel.requirement)] if kernel.requirement is not None else []
        asked += [(dep, text) for dep, texts in (kernel.kernel_depends or {}).items() for text in texts]
        for repo_id, text in asked:
            if text.isdigit():
                keys.add((repo_id, 0, int(text)))
            elif text.startswith("revision="):
                keys.add((repo_id, 1, text.removeprefix("revision=")))
    # kernels 0.17 keeps them in a map ordered by repo id, then versions (numerically)
    # before revisions.
    entries = []
    for repo_id, kind, value in sorted(keys):
        dependency = {"repo-id": repo_id, ("version" if kind == 0 else "revision"): value}
        entries.append({"dependency": dependency, "lock": {"commit": commits[repo_id]}})
    return json.dumps(entries, indent=2)


def _key_for_ref(version: str | None, sha: str) -> tuple[int, int | str]:
    """(0, N) for a ``vN`` ref, else (1, the ref name, or the commit when none is recorded)."""
    if version is not None and (match := _MAJOR_BRANCH.fullmatch(version)):
        return 0, int(match.group(1))
    return 1, version if version is not None else sha

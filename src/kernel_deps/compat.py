"""Other tools' lock formats: what kernel-deps takes from a lock it did not write.

``kernels lock`` keeps the commits a prior ``kernels.lock`` pins, whichever tool wrote it:

- kernel-deps itself (:mod:`kernel_deps.lockfile`);
- the Hugging Face ``kernels`` library up to 0.16, whose entries are ours without
  ``version``, ``requirement`` and ``dependencies``;
- ``kernels`` 0.17, a list of ``{"dependency": {"repo-id", "version" | "revision"},
  "lock": {"commit"}}``; it may pin one repo at several commits (one per version asked for).

Each format has its reader here, as strict as the tool that writes it, and a writer for
one would sit beside its reader. The format of a file is told by its first entry.

``kernels download``, ``kernels verify`` and the loader use a kernels <= 0.16 lock as it
is (it pins commits and variant hashes, all they need) and never rewrite it; a kernels
0.17 lock carries no hashes, so they refuse it and say how to convert it.

Our lock is written in either of their formats by :func:`to_kernels016` and
:func:`to_kernels017` (``kernels export``, :mod:`kernel_deps.commands.export`), so a
project can hand its pins to a tool that reads only those.

This module imports :mod:`kernel_deps.lockfile` (the model, its JSON helpers),
``projectedit`` (a lock is not read for use mid-edit) and ``errors``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kernel_deps.errors import LockfileError
from kernel_deps.lockfile import (
    COMMIT_SHA,
    FieldError,
    Lockfile,
    check_object,
    invalid,
    load_entries,
    parse_entries,
    read_lock_text,
    repo_id_problem,
)
from kernel_deps.projectedit import refuse_pending_edit

__all__ = [
    "KERNELS_016", "KERNELS_017", "from_kernels016", "is_kernels017",
    "kernels017_named_pins", "kernels017_pins", "parse_lock_for_use", "read_lock_for_use", "read_prior_pins",
    "to_kernels016", "to_kernels017", "written_by_kernels016",
]  # fmt: skip

KERNELS_016 = "Hugging Face kernels <= 0.16"
KERNELS_017 = "Hugging Face kernels 0.17"


def read_lock_for_use(path: Path) -> tuple[Lockfile, str | None]:
    """The lock at ``path`` for download, verify and the loader, and which other tool
    wrote it (None: kernel-deps). See :func:`parse_lock_for_use`. PendingEditError with an
    edit journal beside it: a lock read for use is never read mid-edit."""
    refuse_pending_edit(Path(path))
    return parse_lock_for_use(read_lock_text(path), source=str(path))


def parse_lock_for_use(text: str, *, source: str) -> tuple[Lockfile, str | None]:
    """Our lock, or a kernels <= 0.16 lock as it is; a kernels 0.17 lock is refused with
    what to do, since it pins commits but no variant hashes to verify against."""
    data = load_entries(text, source)
    if is_kernels017(data):
        raise LockfileError(
            f"{source}: written by Hugging Face kernels 0.17, which records commits but no variant hashes, "
            "so nothing could be verified against it; run 'kernels lock' to convert it (its pins are kept)"
        )
    return from_kernels016(data, source), KERNELS_016 if written_by_kernels016(data) else None


def written_by_kernels016(data: list[Any]) -> bool:
    """Whether decoded lock entries (ours or kernels <= 0.16's) were written by kernels <= 0.16."""
    return any(isinstance(entry, dict) and "dependencies" not in entry for entry in data)


def read_prior_pins(text: str, *, source: str) -> dict[str, str]:
    """Repo id -> locked commit, from our lock, a kernels <= 0.16 lock or a kernels 0.17 lock.

    A repo that a kernels 0.17 lock pins at several commits gets no pin, so the resolver
    chooses afresh.
    """
    data = load_entries(text, source)
    if is_kernels017(data):
        return kernels017_pins(data, source)
    return {k.repo_id: k.sha for k in from_kernels016(data, source).kernels}


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


def is_kernels017(data: list[Any]) -> bool:
    """Whether decoded lock entries are in the kernels 0.17 format (told by the first entry)."""
    return bool(data) and isinstance(data[0], dict) and ("dependency" in data[0] or "lock" in data[0])


def kernels017_pins(data: list[Any], source: str) -> dict[str, str]:
    """Repo id -> commit of decoded kernels 0.17 entries; repos pinned at two commits are left out."""
    return {repo_id: commit for repo_id, (commit, _) in kernels017_named_pins(data, source).items()}


def kernels017_named_pins(data: list[Any], source: str) -> dict[str, tuple[str, str | None]]:
    """Repo id -> (commit, the ref it was locked under) of decoded kernels 0.17 entries.

    The ref is ``vN`` for a ``"version": N`` entry (kernels 0.17 resolves a major to that
    branch) and the revision for a branch or tag revision; None for a commit, or when one
    repo has entries naming different refs. Repos pinned at two commits are left out.
    """
    pins: dict[str, tuple[str, str | None]] = {}
    conflicting: set[str] = set()
    for i, entry in enumerate(data):
        try:
            repo_id, commit, ref = _kernels017_pin(entry)
        except FieldError as exc:
            raise LockfileError(
                f"{source}: {exc.detail} in '{exc.within(f'[{i}]').key}' (kernels 0.17 lock); {exc.expected}; "
                "fix the entry, or delete the lock and run 'kernels lock'"
            ) from None
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

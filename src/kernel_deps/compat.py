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

This module imports :mod:`kernel_deps.lockfile` (the model, its JSON helpers) and
``errors``.
"""

from __future__ import annotations

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

__all__ = [
    "KERNELS_016", "from_kernels016", "is_kernels017", "kernels017_pins", "parse_lock_for_use", "read_lock_for_use",
    "read_prior_pins",
]  # fmt: skip

KERNELS_016 = "Hugging Face kernels <= 0.16"


def read_lock_for_use(path: Path) -> tuple[Lockfile, str | None]:
    """The lock at ``path`` for download, verify and the loader, and which other tool
    wrote it (None: kernel-deps). See :func:`parse_lock_for_use`."""
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
    foreign = any(isinstance(entry, dict) and "dependencies" not in entry for entry in data)
    return from_kernels016(data, source), KERNELS_016 if foreign else None


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
    pins: dict[str, str] = {}
    conflicting: set[str] = set()
    for i, entry in enumerate(data):
        try:
            repo_id, commit = _kernels017_pin(entry)
        except FieldError as exc:
            raise LockfileError(
                f"{source}: {exc.detail} in '{exc.within(f'[{i}]').key}' (kernels 0.17 lock); {exc.expected}; "
                "fix the entry, or delete the lock and run 'kernels lock'"
            ) from None
        if pins.setdefault(repo_id, commit) != commit:
            conflicting.add(repo_id)
    return {repo_id: commit for repo_id, commit in pins.items() if repo_id not in conflicting}


def _kernels017_pin(entry: Any) -> tuple[str, str]:
    """(repo id, commit) of one kernels 0.17 entry, checked as strictly as kernels 0.17 does."""
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
    return dep["repo-id"], commit.lower()

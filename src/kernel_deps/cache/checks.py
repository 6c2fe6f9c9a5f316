"""Checking a cached variant file by file against the lock (:func:`check_variant`,
:func:`check_variants`): every file modified, missing, added, not a file or leading out of
the cache is one :class:`FileProblem`, named by the manifest kernel-deps wrote when it
placed the variant, which is trusted only when its own ``git_lfs_concat`` equals the lock's.
Several variants' files are hashed in one batch, on threads only when they are large.

What counts as cached is decided here, once, for every command and the loader: a folder
another tool left (no manifest of ours) whose every file is a link to a blob holding what
its name says, but which together are not the locked variant, holds only some of its files
(the Hugging Face ``kernels lock`` caches each variant's ``metadata.json`` alone;
``huggingface_hub`` leaves whatever a filtered or interrupted download fetched). Such a
partial snapshot is not cached (``present`` is False): a download fetches the variant,
``verify --require-cached`` names it absent, and nothing calls it modified.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from kernel_deps.cache.layout import content_hash_of, find_repo_dir, hash_kind, manifest_path, repo_dir, variant_dir
from kernel_deps.cache.pools import shared_map
from kernel_deps.core import jsondoc
from kernel_deps.core.boundedread import RECORD_LIMIT, read_bounded
from kernel_deps.core.hashing import is_hashed_path, variant_hash
from kernel_deps.core.records import Record
from kernel_deps.core.settings import BUILD_DIR, hash_threads

ProblemKind = Literal["modified", "missing", "extra", "not-a-file", "outside-cache", "hash-mismatch"]


class FileProblem(Record):
    """One way a cached variant differs from what was locked."""

    __slots__ = ("kind", "path", "expected", "got")
    kind: ProblemKind
    path: str
    expected: str | None
    got: str | None

    def __init__(self, kind: ProblemKind, path: str, expected: str | None = None, got: str | None = None) -> None:
        self._init(kind, path, expected, got)


class VariantCheck(Record):
    """The result of checking one cached variant against its locked hash."""

    __slots__ = ("repo_id", "commit", "variant", "path", "present", "expected_hash", "actual_hash", "problems",
                 "files")  # fmt: skip
    repo_id: str
    commit: str
    variant: str
    path: Path
    present: bool
    expected_hash: str
    actual_hash: str | None
    problems: tuple[FileProblem, ...]
    # Every hashed file as found (relative path -> content hash): when ``ok``, exactly
    # the locked files; the loader imports from this set only.
    files: Mapping[str, str]

    def __init__(self, repo_id: str, commit: str, variant: str, path: Path, present: bool, expected_hash: str,
                 actual_hash: str | None, problems: tuple[FileProblem, ...],
                 files: Mapping[str, str] | None = None) -> None:  # fmt: skip
        self._init(repo_id, commit, variant, path, present, expected_hash, actual_hash, problems,
                   {} if files is None else files)  # fmt: skip

    @property
    def ok(self) -> bool:
        return self.present and self.actual_hash == self.expected_hash and not self.problems


def walk_variant(folder: Path) -> list[tuple[str, Path]]:
    """Every file (and link) under a variant folder: (path relative to it, POSIX; its path), sorted."""
    return list(walk_files(folder))


def walk_files(folder: Path) -> Iterable[tuple[str, Path]]:
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames.sort()
        base = Path(dirpath)
        for name in sorted(filenames) + [d for d in dirnames if (base / d).is_symlink()]:
            path = base / name
            yield path.relative_to(folder).as_posix(), path


def read_manifest(repo: Path, commit: str, variant: str, expected_hash: str) -> dict[str, str] | None:
    """The recorded files of a variant, only if they hash to the locked value. A manifest that
    cannot be read (JSONDocumentError is a ValueError) is no record: the files are still
    hashed and checked against the lock, only not named one by one."""
    try:
        entries = jsondoc.loads(read_bounded(manifest_path(repo, commit, variant), RECORD_LIMIT))
        files = {str(path): str(digest) for path, digest in entries["files"].items() if is_hashed_path(str(path))}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return files if variant_hash(files.items()) == expected_hash else None


def check_variant(repo_id: str, commit: str, variant: str, expected_hash: str, *, root: Path | None = None) -> VariantCheck:
    """Recompute a cached variant's hash from file contents and name every difference."""
    (outcome,) = check_variants([(repo_id, commit, variant, expected_hash)], root=root)
    if isinstance(outcome, OSError):
        raise outcome
    return outcome


def check_variants(
    wanted: Sequence[tuple[str, str, str, str]], *, root: Path | None = None
) -> list[VariantCheck | OSError]:
    """:func:`check_variant` of each (repo id, commit, variant, locked hash), in order: its
    result, or the OSError checking it alone raises. The files of all of them are hashed at
    once on the shared hashing threads, or in this thread when together they are small:
    handing small files to other threads costs more than hashing them."""
    outcomes: list[VariantCheck | _Walked | OSError] = []
    for repo_id, commit, variant, expected_hash in wanted:
        try:
            outcomes.append(_walk_variant(repo_id, commit, variant, expected_hash, root))
        except OSError as exc:
            outcomes.append(exc)
    walked = [found for found in outcomes if isinstance(found, _Walked)]
    if walked:
        jobs = [job for found in walked for job in found.to_hash]
        threads = hash_threads()  # read first: a malformed KERNELS_HASH_THREADS is bad input either way
        if _total_size(jobs) < SMALL_VARIANT_BYTES:
            threads = 1
        hashes = iter(shared_map(_hash_or_error, jobs, threads))
        for found in walked:
            found.hashes = [next(hashes) for _ in found.to_hash]
    return [found.result() if isinstance(found, _Walked) else found for found in outcomes]


class _Walked:
    """A cached variant walked, its files' links checked, waiting for its files' hashes."""

    __slots__ = ("repo_id", "commit", "variant", "folder", "expected_hash", "expected_files", "problems", "to_hash",
                 "hashes", "addressed")  # fmt: skip

    def __init__(self, repo_id: str, commit: str, variant: str, folder: Path, expected_hash: str,
                 expected_files: dict[str, str] | None, problems: list[FileProblem],
                 to_hash: list[tuple[str, Path, str | None]], addressed: bool) -> None:  # fmt: skip
        self.repo_id, self.commit, self.variant, self.folder = repo_id, commit, variant, folder
        self.expected_hash, self.expected_files = expected_hash, expected_files
        self.problems, self.to_hash = problems, to_hash
        self.hashes: list[str | OSError] = []
        # Whether every file is a link naming the blob it should hold (so each is checked on its own).
        self.addressed = addressed

    def result(self) -> VariantCheck | OSError:
        """The check, once ``hashes`` holds each file's hash (or the error hashing it) in walk order."""
        problems = self.problems
        actual: dict[str, str] = {}
        for (rel, _, wanted), got in zip(self.to_hash, self.hashes):
            if isinstance(got, OSError):
                return got  # the first failure in walk order, as a plain loop meets it
            actual[rel] = got
            if wanted and got != wanted:
                problems.append(FileProblem("modified", rel, wanted, got))
        expected_files, expected_hash = self.expected_files, self.expected_hash
        if expected_files is not None:
            elsewhere = {p.path for p in problems if p.kind == "outside-cache"}
            problems += [FileProblem("missing", rel, digest, None) for rel, digest in expected_files.items()
                         if rel not in actual and rel not in elsewhere]  # fmt: skip
            problems += [FileProblem("extra", rel, None, digest) for rel, digest in actual.items()
                         if rel not in expected_files]  # fmt: skip
        actual_hash = variant_hash(actual.items())
        if actual_hash != expected_hash and not problems and expected_files is None and self.addressed:
            # Every file holds what its blob name says, yet they are not the locked variant:
            # another tool's partial snapshot (see the module's docstring), not cached.
            return VariantCheck(self.repo_id, self.commit, self.variant, self.folder, False, expected_hash, actual_hash,
                                (), actual)  # fmt: skip
        if actual_hash != expected_hash and not problems:
            problems.append(FileProblem("hash-mismatch", ".", expected_hash, actual_hash))
        problems.sort(key=lambda p: p.path)
        return VariantCheck(self.repo_id, self.commit, self.variant, self.folder, True, expected_hash, actual_hash,
                            tuple(problems), actual)  # fmt: skip


def _walk_variant(
    repo_id: str, commit: str, variant: str, expected_hash: str, root: Path | None
) -> VariantCheck | _Walked:
    """A variant that is not cached (its check), or its files walked and their links checked."""
    repo = find_repo_dir(repo_id, root)
    folder = variant_dir(repo, commit, variant) if repo else Path()
    if repo is None or not folder.is_dir():
        where = folder if repo else repo_dir(repo_id, root=root)
        return VariantCheck(repo_id, commit, variant, where, False, expected_hash, None, ())

    expected_files = read_manifest(repo, commit, variant, expected_hash)
    # A file's real location must be a blob of this repo, or the variant folder itself
    # (tools that copy instead of linking): a link elsewhere is refused even when the
    # bytes it reaches are right, since whoever controls the target controls them later.
    real_repo = Path(os.path.realpath(repo))
    inside = (real_repo / "blobs", real_repo / "snapshots" / commit / BUILD_DIR / variant)
    problems: list[FileProblem] = []
    to_hash: list[tuple[str, Path, str | None]] = []  # (relative path, path, the hash it should have)
    addressed = True
    for rel, path in walk_files(folder):
        if not is_hashed_path(rel):
            continue
        if not path.is_file():
            problems.append(FileProblem("not-a-file", rel))
            continue
        real = Path(os.path.realpath(path))
        if not any(real.is_relative_to(place) for place in inside):
            problems.append(FileProblem("outside-cache", rel, None, str(real)))
            continue
        # The blob a symlink points at is named by its content hash; a plain file (placed
        # by a tool that does not use symlinks) is hashed as the manifest says, else SHA-1.
        blob_name = Path(os.readlink(path)).name if path.is_symlink() else None
        addressed = addressed and blob_name is not None and real == real_repo / "blobs" / blob_name
        to_hash.append((rel, path, (expected_files or {}).get(rel) or blob_name))
    return _Walked(repo_id, commit, variant, folder, expected_hash, expected_files, problems, to_hash, addressed)


# Below this many bytes (all the variants checked at once) files are hashed in the calling thread.
SMALL_VARIANT_BYTES = 1 << 20


def _total_size(jobs: list[tuple[str, Path, str | None]]) -> int:
    total = 0
    for _, path, _ in jobs:
        try:
            total += path.stat().st_size
        except OSError:
            return SMALL_VARIANT_BYTES  # let the hashing name the failure, on the threads as before
        if total >= SMALL_VARIANT_BYTES:
            break
    return total


def _hash_or_error(job: tuple[str, Path, str | None]) -> str | OSError:
    """:func:`_hash_wanted`, or the OSError it raised: each variant meets its own first failure."""
    try:
        return _hash_wanted(job)
    except OSError as exc:
        return exc


def _hash_wanted(job: tuple[str, Path, str | None]) -> str:
    """A file's content hash, by the algorithm of the hash it should have (SHA-1 if none)."""
    _, path, wanted = job
    return content_hash_of(path, hash_kind(wanted) if wanted else "sha1")

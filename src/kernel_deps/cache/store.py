"""The Hugging Face Hub cache, as kernel-deps uses it: locate, place atomically, verify.

The layout is huggingface_hub's, so every HF tool shares what kernel-deps downloads::

    <root>/kernels--<org>--<name>/
        blobs/<hash>                          content; named by LFS SHA-256 or git blob SHA-1
        snapshots/<commit>/build/<variant>/…  relative symlinks into blobs/
        .kernel-deps/<commit>/<variant>.json  manifest: every file of the variant, its hash

A variant is assembled in a staging folder (:func:`staged_variant`) and renamed into
``snapshots/`` only after every blob is verified, the variant's ``git_lfs_concat`` equals
the lock's and the caller's own checks of the staged files pass, so nothing unverified is
ever visible there. The manifest lets ``verify`` name the exact file that
was modified, removed or added; it is trusted only when its own ``git_lfs_concat``
equals the lock's hash, so editing it gains an attacker nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Literal, Sequence

from kernel_deps.cache.pools import shared_map
from kernel_deps.core import atomicfile, jsondoc
from kernel_deps.core.boundedread import RECORD_LIMIT, read_bounded
from kernel_deps.core.hashing import git_blob_id, git_blob_id_of_file, is_hashed_path, sha256_of_file, variant_hash
from kernel_deps.core.records import Record
from kernel_deps.core.settings import BUILD_DIR, KERNEL, REPO_TYPE_PLURALS, hash_threads

_OWN = ".kernel-deps"


def cache_root() -> Path:
    """``KERNELS_CACHE``, else the Hugging Face Hub cache as huggingface_hub locates it.

    That is ``HF_HUB_CACHE``, else the legacy ``HUGGINGFACE_HUB_CACHE``, else ``hub`` in
    ``HF_HOME``, else in ``$XDG_CACHE_HOME/huggingface``, else in ``~/.cache/huggingface``:
    the rule of ``huggingface_hub.constants``, computed here (and read now, not at
    import) so that commands which never reach the Hub do not import its client.
    """
    value = os.environ.get("KERNELS_CACHE")
    if value:
        return Path(value).expanduser()
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        value = os.environ.get(name)
        if value:
            return Path(_expanded(value))
    hf_home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface"
    )
    return Path(_expanded(hf_home)) / "hub"


def _expanded(path: str) -> str:
    """A path with ``~`` and environment variables expanded, as huggingface_hub expands them."""
    return os.path.expandvars(os.path.expanduser(path))


def repo_dir(repo_id: str, repo_type: str = KERNEL, root: Path | None = None) -> Path:
    """The cache folder of a repo (``kernels--org--name`` or ``models--org--name``)."""
    plural = REPO_TYPE_PLURALS[repo_type]
    return (root or cache_root()) / "--".join([plural, *repo_id.split("/")])


def find_repo_dir(repo_id: str, root: Path | None = None) -> Path | None:
    """The existing cache folder of ``repo_id`` (kernel repo first, then legacy model repo)."""
    for repo_type in REPO_TYPE_PLURALS:
        candidate = repo_dir(repo_id, repo_type, root)
        if candidate.is_dir():
            return candidate
    return None


def variant_dir(repo: Path, commit: str, variant: str) -> Path:
    """``snapshots/<commit>/build/<variant>`` of a repo folder."""
    return repo / "snapshots" / commit / BUILD_DIR / variant


def manifest_path(repo: Path, commit: str, variant: str) -> Path:
    """Where kernel-deps records the files of a placed variant."""
    return repo / _OWN / commit / f"{variant}.json"


def content_hash_of(path: Path, kind: Literal["sha256", "sha1"]) -> str:
    """The hash that names a file's content: SHA-256 (LFS files) or git blob SHA-1."""
    return sha256_of_file(path) if kind == "sha256" else git_blob_id_of_file(path)


def hash_kind(content_hash: str) -> Literal["sha256", "sha1"]:
    """Which algorithm a blob name or tree hash uses, by its length."""
    return "sha256" if len(content_hash) == 64 else "sha1"


# -- verification ---------------------------------------------------------------------

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
    return list(_walk_files(folder))


def _walk_files(folder: Path) -> Iterable[tuple[str, Path]]:
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames.sort()
        base = Path(dirpath)
        for name in sorted(filenames) + [d for d in dirnames if (base / d).is_symlink()]:
            path = base / name
            yield path.relative_to(folder).as_posix(), path


def _read_manifest(repo: Path, commit: str, variant: str, expected_hash: str) -> dict[str, str] | None:
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
                 "hashes")  # fmt: skip

    def __init__(self, repo_id: str, commit: str, variant: str, folder: Path, expected_hash: str,
                 expected_files: dict[str, str] | None, problems: list[FileProblem],
                 to_hash: list[tuple[str, Path, str | None]]) -> None:  # fmt: skip
        self.repo_id, self.commit, self.variant, self.folder = repo_id, commit, variant, folder
        self.expected_hash, self.expected_files = expected_hash, expected_files
        self.problems, self.to_hash = problems, to_hash
        self.hashes: list[str | OSError] = []

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

    expected_files = _read_manifest(repo, commit, variant, expected_hash)
    # A file's real location must be a blob of this repo, or the variant folder itself
    # (tools that copy instead of linking): a link elsewhere is refused even when the
    # bytes it reaches are right, since whoever controls the target controls them later.
    real_repo = Path(os.path.realpath(repo))
    inside = (real_repo / "blobs", real_repo / "snapshots" / commit / BUILD_DIR / variant)
    problems: list[FileProblem] = []
    to_hash: list[tuple[str, Path, str | None]] = []  # (relative path, path, the hash it should have)
    for rel, path in _walk_files(folder):
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
        to_hash.append((rel, path, (expected_files or {}).get(rel) or blob_name))
    return _Walked(repo_id, commit, variant, folder, expected_hash, expected_files, problems, to_hash)


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


# -- placement ------------------------------------------------------------------------


def blob_path(repo: Path, content_hash: str) -> Path:
    """Where the blob named ``content_hash`` lives."""
    return repo / "blobs" / content_hash


def blob_is_valid(repo: Path, content_hash: str) -> bool:
    """True when the blob exists and its content hashes to its name."""
    path = blob_path(repo, content_hash)
    try:
        return path.is_file() and content_hash_of(path, hash_kind(content_hash)) == content_hash
    except OSError:
        return False


def read_blob(repo: Path, content_hash: str, limit: int) -> bytes | None:
    """The bytes of blob ``content_hash`` when it is present, at most ``limit`` bytes and
    hashes to its name; else None (absent, damaged or unreadable: fetch it again)."""
    try:
        data = read_bounded(blob_path(repo, content_hash), limit)  # a FIFO planted there is never waited on
    except OSError:  # RefusedFileError too: not a regular file, or over the limit
        return None
    return data if content_hash_of_bytes(data, hash_kind(content_hash)) == content_hash else None


def keep_blob(repo: Path, content_hash: str, data: bytes) -> bool:
    """Place ``data``, which must hash to ``content_hash``, as that blob (atomically), so a
    later lock or download reads it from here; False when the cache cannot take it,
    which costs only a request next time."""
    if content_hash_of_bytes(data, hash_kind(content_hash)) != content_hash:
        raise ValueError(f"the bytes given for blob {content_hash} hash to something else")
    target = blob_path(repo, content_hash)
    try:  # replaces a damaged copy too
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{content_hash}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            temporary.write_bytes(data)
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)
    except OSError:
        return False
    return True


def content_hash_of_bytes(data: bytes, kind: Literal["sha256", "sha1"]) -> str:
    """The hash that names ``data`` as a blob: SHA-256 (LFS files) or git blob SHA-1."""
    return hashlib.sha256(data).hexdigest() if kind == "sha256" else git_blob_id(data)


# A partial download this old belongs to no running download: remove it.
STALE_PARTIAL_SECONDS = 24 * 3600


def partial_path(repo: Path, content_hash: str) -> Path:
    """Where the blob ``content_hash`` is downloaded, outside ``blobs/`` and ``snapshots/``.

    The name depends on the content only, so a run resumes what an interrupted one left;
    the download holds :func:`partial_lock_path` while it writes there.
    """
    folder = repo / _OWN / "tmp"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{content_hash}.part"


def lock_dir(repo: Path) -> Path:
    """Where the lock files of a repo's downloads live (``<cache>/.locks/<repo folder>``)."""
    return repo.parent / ".locks" / repo.name


def partial_lock_path(repo: Path, content_hash: str) -> Path:
    """The lock file a download of blob ``content_hash`` holds (one writer per blob, any process)."""
    folder = lock_dir(repo)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{content_hash}.part.kernel-deps.lock"


def remove_stale_partials(repo: Path, max_age: float = STALE_PARTIAL_SECONDS) -> list[Path]:
    """Remove partial downloads, and their lock files, untouched for ``max_age`` seconds."""
    cutoff = time.time() - max_age
    candidates = [*(repo / _OWN / "tmp").glob("*.part"), *lock_dir(repo).glob("*.part.kernel-deps.lock")]
    removed = []
    for path in sorted(candidates):
        try:
            if path.lstat().st_mtime < cutoff:
                path.unlink()
                removed.append(path)
        except OSError:
            continue  # gone already, or not ours to remove: the next run tries again
    return removed


def place_blob(repo: Path, verified_file: Path, content_hash: str) -> None:
    """Move a verified download into ``blobs/<content_hash>`` atomically."""
    target = blob_path(repo, content_hash)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(verified_file, target)


def variant_lock_path(repo: Path, commit: str, variant: str) -> Path:
    """The lock file held while a variant is placed in (or removed from) ``snapshots/``: by a
    download from before it looks at the cache until it has checked what it placed, and by
    ``kernels cache prune`` while it decides what of the repo goes."""
    return lock_dir(repo) / f"{commit}.{variant}.kernel-deps.lock"


class StagedVariant:
    """A variant linked in a staging folder of its own, at the depth of its place in
    ``snapshots/`` (so its relative links already reach ``blobs/``): what a check reads
    before :meth:`place` makes it visible. Made by :func:`staged_variant`."""

    __slots__ = ("repo", "commit", "variant", "files", "folder", "placed")

    def __init__(self, repo: Path, commit: str, variant: str, files: Mapping[str, str], folder: Path) -> None:
        self.repo, self.commit, self.variant, self.files, self.folder = repo, commit, variant, dict(files), folder
        self.placed: Path | None = None

    def place(self) -> Path:
        """Write the manifest, then rename the staged folder into ``snapshots/<commit>/build/<variant>``,
        replacing any previous copy; a kill in between leaves a manifest that still matches the
        lock and no half-built folder under ``snapshots/``."""
        import secrets
        import shutil

        final = variant_dir(self.repo, self.commit, self.variant)
        manifest = manifest_path(self.repo, self.commit, self.variant)
        manifest.parent.mkdir(parents=True, exist_ok=True)
        atomicfile.write_text(manifest, json.dumps({"files": dict(sorted(self.files.items()))}, indent=1) + "\n")
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists() or final.is_symlink():
            trash = _staging_root(self.repo) / f"old-{self.variant}.{secrets.token_hex(6)}"
            os.replace(final, trash)
            shutil.rmtree(trash, ignore_errors=True)
        os.replace(self.folder, final)
        self.placed = final
        return final


def _staging_root(repo: Path) -> Path:
    return repo / _OWN / "staging"


@contextmanager
def staged_variant(repo: Path, commit: str, variant: str, files: Mapping[str, str]) -> Iterator[StagedVariant]:
    """``files`` (relative path -> blob) linked in a staging folder; whatever is not placed
    (:meth:`StagedVariant.place`) by the end of the block is removed, so a refused or failed
    attempt leaves nothing under ``snapshots/`` and no half-built folder anywhere."""
    import secrets  # placing is for downloads; checking, what most commands do, needs neither
    import shutil

    final = variant_dir(repo, commit, variant)
    depth = len(final.relative_to(repo).parts)  # snapshots/<commit>/build/<variant>
    staging_root = _staging_root(repo)
    staging_root.mkdir(parents=True, exist_ok=True)
    attempt = staging_root / f"{variant}.{secrets.token_hex(6)}"
    folder = attempt / variant  # .kernel-deps/staging/<attempt>/<variant>: as deep as its place in snapshots/
    assert len(folder.relative_to(repo).parts) == depth
    try:
        folder.mkdir(parents=True)
        for rel, content_hash in files.items():
            link = folder / rel
            link.parent.mkdir(parents=True, exist_ok=True)
            up = "../" * (depth + rel.count("/"))
            os.symlink(f"{up}blobs/{content_hash}", link)
        yield StagedVariant(repo, commit, variant, files, folder)
    finally:
        shutil.rmtree(attempt, ignore_errors=True)  # a refused or failed attempt leaves no half-built folder


def place_variant(repo: Path, commit: str, variant: str, files: dict[str, str]) -> Path:
    """Make ``snapshots/<commit>/build/<variant>`` link ``files`` (relative path -> blob), with no
    check beyond what the caller made: for a folder of variants already verified in the cache
    (``--into``). A download admits what it fetched through its own checks instead
    (:func:`kernel_deps.fetch.gate.admit_variant`)."""
    with staged_variant(repo, commit, variant, files) as staged:
        return staged.place()


def remove_placed_variant(repo: Path, commit: str, variant: str, expected_hash: str) -> bool:
    """Remove ``snapshots/<commit>/build/<variant>`` and its manifest when kernel-deps placed it
    there: its manifest matches ``expected_hash`` and names exactly the links the folder holds,
    each a link into this repo's ``blobs/`` (which stay). Anything else (a folder another tool
    wrote, a real file in it) is left as it is; returns whether it was removed."""
    import secrets
    import shutil

    final = variant_dir(repo, commit, variant)
    recorded = _read_manifest(repo, commit, variant, expected_hash)
    if recorded is None or final.is_symlink() or not final.is_dir():
        return False
    blobs = Path(os.path.realpath(repo / "blobs"))
    found = {}
    for rel, path in _walk_files(final):
        if not path.is_symlink() or not Path(os.path.realpath(path)).is_relative_to(blobs):
            return False
        found[rel] = Path(os.readlink(path)).name
    if found != recorded:
        return False
    trash = _staging_root(repo) / f"old-{variant}.{secrets.token_hex(6)}"
    trash.parent.mkdir(parents=True, exist_ok=True)
    os.replace(final, trash)
    manifest_path(repo, commit, variant).unlink(missing_ok=True)
    shutil.rmtree(trash, ignore_errors=True)
    return True

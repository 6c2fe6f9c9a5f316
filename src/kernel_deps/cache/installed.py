"""Kernel wheels installed in this Python environment, found and checked as a cached variant is.

A wheel ``kernels to-wheel`` wrote carries ``.dist-info/kernel_deps.json`` (the repo id,
commit, variant, the lock's variant hash and every file's content hash). Its distribution
is found by the repo's wheel name (:func:`kernel_deps.core.wheels.distribution_name`,
one name per repo id: no other repo's wheel has it) among the ``.dist-info`` folders on
``sys.path``, as ``importlib.metadata`` finds them but without importing it; the record is
read as hostile input (a regular file of at most ``RECORD_LIMIT``, one JSON parse, every
field checked, unsafe paths refused) and trusted only when its files
hash, by the ``git_lfs_concat`` rule, to the hash the lock pins. Then every installed file
of the package is hashed again by the algorithm its recorded hash uses, exactly as
:func:`kernel_deps.cache.store.check_variant` checks a cached variant, and the result is
the same :class:`~kernel_deps.cache.store.VariantCheck`, for the loader's verified import.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from kernel_deps.cache.store import FileProblem, VariantCheck, content_hash_of, hash_kind
from kernel_deps.core import jsondoc
from kernel_deps.core.boundedread import RECORD_LIMIT, read_bounded
from kernel_deps.core.hashing import is_hashed_path, variant_hash
from kernel_deps.core.records import Record
from kernel_deps.core.wheels import KERNEL_RECORD_NAME, KERNEL_RECORD_SCHEMA, distribution_name, import_name

_HASH = r"[0-9a-f]{40}|[0-9a-f]{64}"
_MAX_FILES = 100_000


class InstalledWheel(Record):
    """One installed kernel wheel: what its record says it holds, and where."""

    __slots__ = ("distribution", "version", "repo_id", "commit", "variant", "hash", "folder", "files", "problem")
    distribution: str
    version: str
    repo_id: str
    commit: str
    variant: str
    hash: str
    folder: Path  # the installed package folder
    files: dict[str, str]  # relative path -> content hash, as recorded
    problem: str | None  # why the record cannot be trusted (None: it can)

    def __init__(self, distribution: str, version: str, repo_id: str, commit: str, variant: str, hash: str,
                 folder: Path, files: dict[str, str], problem: str | None = None) -> None:  # fmt: skip
        self._init(distribution, version, repo_id, commit, variant, hash, folder, files, problem)

    @property
    def label(self) -> str:
        return f"the installed wheel {self.distribution} {self.version} ({self.folder})"


def installed_wheels(repo_id: str, *, on_path: frozenset[str] | None = None) -> list[InstalledWheel]:
    """Every installed kernel wheel of ``repo_id`` on ``sys.path``, in path order; a record
    that cannot be read is returned with its ``problem``. ``on_path`` is :func:`dist_info_names`
    when the caller asks for many repos: ``sys.path`` is then listed once, not once per repo."""
    key = distribution_name(repo_id).replace("-", "_")
    if key not in (dist_info_names() if on_path is None else on_path):
        return []
    found: list[InstalledWheel] = []
    seen: set[Path] = set()
    for entry, info in _dist_infos(key):
        folder = entry / import_name(repo_id)
        if folder in seen:  # the same folder twice on sys.path, or two records of one package
            continue
        seen.add(folder)
        found.append(_read(entry / info, repo_id, folder))
    return found


def find_installed(repo_id: str, commit: str, variant: str) -> InstalledWheel | None:
    """The first installed wheel of ``repo_id`` whose record names ``commit`` and ``variant``."""
    for wheel in installed_wheels(repo_id):
        if wheel.problem is None and wheel.commit == commit and wheel.variant == variant:
            return wheel
    return None


def unusable_wheels(repo_id: str) -> list[str]:
    """One line per installed wheel of ``repo_id`` whose record cannot be trusted, saying why."""
    return [f"{wheel.label}: {KERNEL_RECORD_NAME} {wheel.problem}" for wheel in installed_wheels(repo_id)
            if wheel.problem is not None]  # fmt: skip


def check_installed(wheel: InstalledWheel, expected_hash: str) -> VariantCheck:
    """Every installed file of ``wheel`` hashed and held against ``expected_hash`` (the lock's)."""
    def result(problems: list[FileProblem], actual: dict[str, str], actual_hash: str | None) -> VariantCheck:
        problems.sort(key=lambda p: p.path)
        return VariantCheck(wheel.repo_id, wheel.commit, wheel.variant, wheel.folder, True, expected_hash,
                            actual_hash, tuple(problems), actual)  # fmt: skip

    if wheel.problem is not None:
        return result([FileProblem("modified", KERNEL_RECORD_NAME, None, wheel.problem)], {}, None)
    recorded = variant_hash(wheel.files.items())
    if recorded != expected_hash:
        return result([FileProblem("hash-mismatch", KERNEL_RECORD_NAME, expected_hash, recorded)], {}, recorded)
    problems: list[FileProblem] = []
    actual: dict[str, str] = {}
    real_folder = Path(os.path.realpath(wheel.folder))
    for rel, wanted in sorted(wheel.files.items()):
        path = wheel.folder.joinpath(*rel.split("/"))
        if not path.is_file():
            absent = not path.exists() and not path.is_symlink()
            problems.append(FileProblem("missing" if absent else "not-a-file", rel))
            continue
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(real_folder):
            problems.append(FileProblem("outside-cache", rel, None, str(real)))
            continue
        got = content_hash_of(path, hash_kind(wanted))
        actual[rel] = got
        if got != wanted:
            problems.append(FileProblem("modified", rel, wanted, got))
    for dirpath, dirnames, filenames in os.walk(wheel.folder):
        dirnames.sort()
        for name in sorted(filenames):
            rel = (Path(dirpath) / name).relative_to(wheel.folder).as_posix()
            if is_hashed_path(rel) and rel not in wheel.files:
                problems.append(FileProblem("extra", rel))
    actual_hash = variant_hash(actual.items()) if not problems else None
    return result(problems, actual, actual_hash)


def _read(info: Path, repo_id: str, folder: Path) -> InstalledWheel:
    """The record of one ``.dist-info`` folder, every field checked; a bad one keeps its problem."""
    version = info.name[: -len(".dist-info")].partition("-")[2] or "?"  # <name>-<version>.dist-info
    name = distribution_name(repo_id)

    def bad(problem: str) -> InstalledWheel:
        return InstalledWheel(name, version, repo_id, "", "", "", folder, {}, problem)

    try:  # a regular file of at most RECORD_LIMIT: a FIFO or a link to /dev/zero there is refused, not read
        text = read_bounded(info / KERNEL_RECORD_NAME, RECORD_LIMIT).decode("utf-8")
    except FileNotFoundError:
        return bad("is absent: not a wheel kernels to-wheel wrote")
    except (OSError, UnicodeDecodeError) as exc:
        return bad(f"cannot be read ({exc.strerror if isinstance(exc, OSError) and exc.strerror else exc})")
    try:
        record = jsondoc.loads(text, no_duplicate_keys=True)
    except ValueError as exc:
        return bad(f"is not a JSON document ({exc})")
    if not isinstance(record, dict) or record.get("schema_version") != KERNEL_RECORD_SCHEMA:
        return bad(f"is not an object with schema_version {KERNEL_RECORD_SCHEMA}")
    fields = {key: record.get(key) for key in ("repo_id", "commit", "variant", "hash")}
    if not all(isinstance(value, str) for value in fields.values()):
        return bad("has a repo_id, commit, variant or hash that is not a string")
    if fields["repo_id"] != repo_id:
        return bad(f"names {fields['repo_id']!r}, not {repo_id!r}")
    files = record.get("files")
    if not isinstance(files, dict) or not files or len(files) > _MAX_FILES:
        return bad("has no files object of relative path -> content hash")
    for rel, digest in files.items():
        if not isinstance(digest, str) or not re.fullmatch(_HASH, digest):
            return bad(f"files[{rel!r}] is not a git blob SHA-1 or an SHA-256 in hex")
        if _unsafe(rel):
            return bad(f"files: {rel!r} is not a safe relative path")
    return InstalledWheel(name, version, repo_id, fields["commit"], fields["variant"], fields["hash"], folder,
                          dict(files))  # fmt: skip


def dist_info_names() -> frozenset[str]:
    """The distribution of every ``.dist-info`` folder on ``sys.path``, by importlib.metadata's
    rule (the part before the first ``-``, normalized with ``_``)."""
    found = set()
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        found.update(_dist_info_key(name) for name in names if name.endswith(".dist-info"))
    return frozenset(found)


def _dist_infos(key: str) -> list[tuple[Path, str]]:
    """(``sys.path`` entry, ``.dist-info`` folder name) of every distribution named ``key`` (normalized
    with ``_``), in path order: where importlib.metadata finds them, without its import or its reads."""
    found = []
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        found += [(Path(entry or "."), name) for name in names
                  if name.endswith(".dist-info") and _dist_info_key(name) == key]  # fmt: skip
    return found


def _dist_info_key(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name.split("-", 1)[0]).lower()


def _unsafe(rel: str) -> bool:
    parts = rel.split("/")
    return (
        not rel or "\\" in rel or "\0" in rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts)
        or not is_hashed_path(rel) or (len(parts[0]) == 2 and parts[0][1] == ":")
    )  # fmt: skip

"""``kernels export --format pylock``: the kernel wheels of a lock, added to the project's own ``pylock.toml``.

``kernels to-wheel`` writes the kernel wheels and their ``pylock.toml`` (:mod:`kernel_deps.core.pylock`);
a project whose Python dependencies are locked by uv or pip (``uv export -o pylock.toml``,
``pip lock``) has a ``pylock.toml`` of its own. :func:`pylock_export` makes one file of the
two: every package of the project's file kept byte for byte, the kernel packages added
below a marker line (and replaced there by the next export), so ``uv pip install -r
pylock.toml`` or ``pip install -r pylock.toml`` installs the whole environment. Before
anything is added, the kernel packages are held to the lock they are exported from (the
same kernels, commits and variant hashes: a stale wheels folder is refused) and each wheel
file to the size and SHA-256 its ``pylock.toml`` records. Reads files; writes none (the
command writes the text). Imports ``core.pylock``, ``core.boundedread``, ``core.errors``, ``lock.model``.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kernel_deps.core import pylock
from kernel_deps.core.hashing import sha256_of_file
from kernel_deps.core.boundedread import PROJECT_FILE_LIMIT, read_bounded
from kernel_deps.core.errors import KernelIntegrityError, UsageError
from kernel_deps.lock.model import Lockfile

EXPORTED_HEADER = "# Kernel wheels exported by kernels export --format pylock (kernel-deps)."


def pylock_export(lock: Lockfile, lock_file: Path, wheels_file: Path, output: Path) -> tuple[str, int]:
    """The new text of ``output`` and how many kernel packages it holds: the packages of
    ``wheels_file`` (a ``pylock.toml`` kernels to-wheel wrote from ``lock``) added to the lock
    already at ``output``, or alone when there is none. UsageError naming the file and key
    for a file that is no pylock, or kernel packages that are not ``lock``'s;
    KernelIntegrityError for a wheel changed since to-wheel wrote it."""
    packages = kernel_packages(lock, lock_file, wheels_file, output.parent)
    try:
        theirs = read_bounded(output, PROJECT_FILE_LIMIT).decode("utf-8")
    except FileNotFoundError:
        theirs = "\n".join([EXPORTED_HEADER, f'lock-version = "{pylock.LOCK_VERSION}"',
                            f'created-by = "{pylock.CREATED_BY}"']) + "\n"  # fmt: skip
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"cannot read it ({getattr(exc, 'strerror', None) or exc})",
            subject=f"--output {output}",
            hint="name a pylock.toml file, or a new one",
        ) from None
    try:
        return pylock.merge_pylock(theirs, packages), len(packages)
    except pylock.PylockError as exc:
        raise UsageError(f"{exc}; the kernel packages were not added", subject=f"--output {output}") from None


def kernel_packages(lock: Lockfile, lock_file: Path, wheels_file: Path, into: Path) -> list[dict[str, Any]]:
    """The packages of ``wheels_file``, each held to ``lock`` and to its wheel file, with each
    wheel's ``path`` made relative to the folder ``into`` (where the file they go into lies)."""
    try:
        doc = pylock.parse_pylock(read_bounded(wheels_file, PROJECT_FILE_LIMIT).decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"cannot read it ({getattr(exc, 'strerror', None) or exc})",
            subject=f"--wheels {wheels_file}",
            hint="pass the pylock.toml kernels to-wheel wrote beside the wheels",
        ) from None
    except pylock.PylockError as exc:
        raise UsageError(
            f"not a valid pylock.toml ({exc})",
            subject=f"--wheels {wheels_file}",
            hint="pass the one kernels to-wheel wrote beside the wheels",
        ) from None
    if doc.get("created-by") != pylock.CREATED_BY:
        raise UsageError(
            f"created by {doc.get('created-by')!r}, not kernels to-wheel",
            subject=f"--wheels {wheels_file}",
            hint="pass the pylock.toml kernels to-wheel wrote beside the wheels",
        )
    found: dict[str, dict[str, Any]] = {}
    for position, package in enumerate(doc["packages"]):
        where = f"--wheels {wheels_file}: packages[{position}] ({package['name']})"
        facts = (package.get("tool") or {}).get(pylock.TOOL)
        if not isinstance(facts, Mapping):
            raise UsageError(f"{where} has no [packages.tool.{pylock.TOOL}]: it is no kernel wheel of kernels to-wheel")
        _check_against_lock(lock, lock_file, facts, where)
        wheels = [_relocated(wheel, wheels_file.parent, into, where) for wheel in package.get("wheels", [])]
        found[facts["repo-id"]] = {**package, "wheels": wheels}
    missing = [kernel.repo_id for kernel in lock.kernels if kernel.repo_id not in found]
    if missing:
        raise UsageError(
            f"has no wheel of {missing[0]}, which {lock_file} locks",
            subject=f"--wheels {wheels_file}",
            hint="run 'kernels to-wheel' again, then export",
        )
    return list(found.values())


def _check_against_lock(lock: Lockfile, lock_file: Path, facts: Mapping[str, Any], where: str) -> None:
    """UsageError unless the package is the wheel of a build ``lock`` pins, as it pins it."""
    rerun = "run 'kernels to-wheel' again, then export"
    kernel = lock.get(facts.get("repo-id")) if isinstance(facts.get("repo-id"), str) else None
    if kernel is None:
        raise UsageError(f"{facts.get('repo-id')!r} is not a kernel {lock_file} locks", subject=where, hint=rerun)
    variant = kernel.variants.get(facts.get("variant")) if isinstance(facts.get("variant"), str) else None
    if facts.get("commit") != kernel.sha or variant is None or facts.get("variant-hash") != variant.hash:
        raise UsageError(
            f"is the build {facts.get('variant')!r} at commit {str(facts.get('commit'))[:12]}, "
            f"not one {lock_file} pins ({kernel.sha[:12]})",
            subject=where,
            hint=rerun,
        )


def _relocated(wheel: Mapping[str, Any], folder: Path, into: Path, where: str) -> dict[str, Any]:
    """``wheel`` with its path made relative to ``into``, once its file has the size and SHA-256
    recorded (a wheel named by URL is left as it is: the installers check it when they fetch it)."""
    if "path" not in wheel:
        return dict(wheel)
    path = folder / wheel["path"]
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):  # no device or FIFO opened
            raise IsADirectoryError(errno.EISDIR, "not a regular file")
        size, sha256 = info.st_size, sha256_of_file(path)
    except OSError as exc:
        raise UsageError(
            f"cannot read its wheel {path} ({exc.strerror or exc})",
            subject=where,
            hint="run 'kernels to-wheel' again, then export",
        ) from None
    if size != wheel.get("size") or sha256 != wheel["hashes"].get("sha256"):
        raise KernelIntegrityError(
            f"the wheel {path} is not the file kernels to-wheel wrote (its size or SHA-256 "
            "differs)",
            subject=where,
            hint="run 'kernels to-wheel' again, then export",
        )
    relative = os.path.relpath(path.resolve(), Path(into).resolve())
    return {**wheel, "path": Path(relative).as_posix()}

"""Build hooks: a wheel of a project that depends on kernels carries its ``kernels.lock``.

At run time an installed library has no ``pyproject.toml`` beside it, so the loader reads
the lock from the library's distribution metadata instead. The setuptools hook
(``kernel_deps.build_hooks.setuptools``, an ``egg_info.writers`` entry point) and the
hatchling hook (``kernel_deps.build_hooks.hatch``, build hook ``kernels``) are thin
adapters around :func:`lock_for_build`, which decides, offline, what a build embeds:

- no ``[tool.kernels.dependencies]`` table: nothing, and no message;
- the table but no ``kernels.lock``: nothing, and a warning;
- a lock that disagrees with the project (the offline rules of ``kernels lock --check``:
  each requirement locked as written, every target served, no publisher trusted on a
  ``[tool.kernels.trust] publishers`` entry since removed, no signer the signature policy
  no longer allows, no unsigned build where signatures are required): the build is
  refused, unless ``KERNELS_ALLOW_STALE_LOCK=1`` or ``[tool.kernels] allow-stale-lock =
  true`` says to embed it anyway (with a warning);
- otherwise the lock, byte for byte.

A build never writes the project, so it never finishes the edit journal an interrupted
``kernels add`` / ``kernels remove`` leaves: with one beside the files, the build is
refused (:class:`~kernel_deps.core.errors.PendingEditError`, naming the journal and what to
run), as every command that only reads refuses it.

This module is imported by every setuptools build whose environment has kernel-deps, so
it imports nothing heavy at import. pyproject.toml is read and parsed once, by
:func:`kernel_deps.project.pyproject.read_kernels_source`, the reader ``kernels lock`` uses, so a build
reports a bad pyproject.toml as ``kernels lock`` does.

A lock the Hugging Face ``kernels`` library wrote (<= 0.16, or 0.17) is embedded as it
is, with a warning: that library's own ``egg_info.writers`` entry writes the same file
byte for byte, so with both packages installed the wheel carries one copy whichever
writer runs last.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_deps.core.errors import KernelDepsError, PyprojectError
from kernel_deps.core.records import Record
from kernel_deps.core.settings import ALLOW_STALE_ENV, LOCK_NAME, PYPROJECT_NAME, env_flag

if TYPE_CHECKING:
    from kernel_deps.lock.read import LockRead

ALLOW_STALE_KEY = "allow-stale-lock"
_OPT_OUT = f"set {ALLOW_STALE_ENV}=1 or add '{ALLOW_STALE_KEY} = true' under [tool.kernels] in pyproject.toml"


class StaleLockError(KernelDepsError):
    """``kernels.lock`` disagrees with ``[tool.kernels.dependencies]``: the build is refused."""

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message)
        self.problems = problems


class BuildLock(Record):
    """What a build puts into the wheel's metadata: a lock (or nothing), and what to warn about."""

    __slots__ = ("text", "source", "warnings")
    text: str | None
    source: Path | None
    warnings: tuple[str, ...]

    def __init__(self, text: str | None = None, source: Path | None = None, warnings: tuple[str, ...] = ()) -> None:
        self._init(text, source, warnings)


def lock_for_build(project_dir: str | os.PathLike[str], *, fallback: Path | None = None) -> BuildLock:
    """The kernels.lock a wheel of ``project_dir`` carries, checked against pyproject.toml offline.

    ``fallback`` is a lock to use when the project has none of its own: the copy in the
    metadata folder of an unpacked sdist, which does not contain the project's lock file.
    Raises StaleLockError, PyprojectError, LockfileError or UsageError.
    """
    # Imported here, not at the top: every setuptools build imports this module.
    from kernel_deps.project.pyproject import read_kernels_source

    project_dir = Path(project_dir)
    pyproject = project_dir / PYPROJECT_NAME
    text, kernels_table, requirements = read_kernels_source(project_dir, missing_ok=True)
    if text is None or kernels_table is None or requirements is None:
        return BuildLock()
    allow_stale, why = _allow_stale(kernels_table, pyproject)

    # The offline rules of `kernels lock --check`, as every consumer judges a lock: no network.
    from kernel_deps.lock.freshness import judge_lock, rules_from_table
    from kernel_deps.lock.read import read_lock

    rules = rules_from_table(text, kernels_table, requirements, project_dir)

    # Absent is no entry at all: a FIFO or a link to a device in its place is read (and refused) as the lock.
    path = project_dir / LOCK_NAME
    if not os.path.lexists(path) and fallback is not None and os.path.lexists(fallback):
        path = fallback
    if not os.path.lexists(path):
        if not requirements:
            return BuildLock()
        return BuildLock(warnings=(
            f"{pyproject} declares kernels in [tool.kernels.dependencies] but {project_dir / LOCK_NAME} does not "
            "exist, so the wheel carries no kernel lock and load_kernel() will not find one for this package; "
            f"run 'kernels lock' in {project_dir} and build again",
        ))  # fmt: skip
    found = read_lock(path, purpose="embed")  # any tool's lock, checked as strictly as that tool reads it
    text = found.text
    # Judged whichever tool wrote it: a lock in another format is held to the same rules as far
    # as it can show them, and one that cannot show what the policy asks is refused.
    found_problems = judge_lock(found, rules)
    notes = (_foreign_lock_warning(found, path, project_dir),) if found.written_by is not None else ()
    problems = [problem.message for problem in found_problems]
    if not problems:
        return BuildLock(text, path, notes)
    listed = "".join(f"\n  - {problem}" for problem in problems)
    if allow_stale:
        warning = f"{path} is out of date with {pyproject}; embedding it anyway because {why}:{listed}"
        return BuildLock(text, path, (*notes, warning))
    raise StaleLockError(
        f"refusing to build: {path} is out of date with {pyproject}, so the wheel would pin the wrong "
        f"kernels:{listed}\nrun 'kernels lock' in {project_dir} and build again; to build with this lock "
        f"anyway, {_OPT_OUT}",
        problems,
    )


def _foreign_lock_warning(found: LockRead, path: Path, project_dir: Path) -> str:
    """For a lock the Hugging Face library wrote, what to warn while embedding it as it is.

    With both packages installed, a setuptools build runs both ``kernels.lock`` writers on
    the same file: embedding their lock byte for byte, as their writer does, keeps one
    correct copy whichever runs last. Its sync with pyproject cannot be checked: it
    records no requirements.
    """
    if found.format == "kernels-0.17":
        return (
            f"{path} was written by {found.written_by}; the wheel carries it as it is, for that library's loader, but "
            "kernel-deps' loader refuses it (it records no variant hashes), and only its pins are judged against "
            f"pyproject.toml; run 'kernels lock' in {project_dir} to convert it, keeping its pins"
        )
    return (
        f"{path} was written by {found.written_by}: it records no versions, requirements or signers, so only what "
        f"it records is judged against pyproject.toml; run 'kernels lock' in {project_dir} to convert it, keeping "
        "its pins"
    )


def _allow_stale(kernels_table: dict[str, Any], pyproject: Path) -> tuple[bool, str]:
    """Whether the user opted out of the stale-lock check, and where they said so."""
    if env_flag(ALLOW_STALE_ENV):
        return True, f"{ALLOW_STALE_ENV}={os.environ[ALLOW_STALE_ENV]}"
    value = kernels_table.get(ALLOW_STALE_KEY, False)
    if not isinstance(value, bool):
        raise PyprojectError(f"{pyproject}: [tool.kernels] {ALLOW_STALE_KEY} = {value!r}: expected true or false")
    return value, f"[tool.kernels] {ALLOW_STALE_KEY} = true in {pyproject}"


__all__ = ["ALLOW_STALE_ENV", "ALLOW_STALE_KEY", "LOCK_NAME", "BuildLock", "StaleLockError", "lock_for_build"]

"""setuptools: an ``egg_info.writers`` entry point that puts kernels.lock into the metadata.

setuptools runs every registered writer while it writes ``<name>.egg-info``; wheels copy
that folder into ``<name>-<version>.dist-info``, so the file lands where the loader (and
the Hugging Face ``kernels`` library, which reads the same name) looks for it. Registered
in kernel-deps' own metadata as::

    [project.entry-points."egg_info.writers"]
    "kernels.lock" = "kernel_deps.build_hooks.setuptools:write_lock"

A project opts in by listing ``kernel-deps`` in ``[build-system] requires``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kernel_deps.build_hooks import lock_for_build
from kernel_deps.core.errors import KernelDepsError, render


def write_lock(cmd: Any, basename: str, filename: str) -> None:
    """Write the project's checked kernels.lock to ``filename`` in the egg-info, or remove it."""
    project_dir = Path.cwd()  # setuptools runs from the project root (PEP 517 and setup.py alike)
    try:
        found = lock_for_build(project_dir, fallback=_sdist_copy(cmd, project_dir, basename))
    except KernelDepsError as exc:
        from setuptools.errors import SetupError

        # setuptools prints "error: <message>"
        raise SetupError(f"kernel-deps: {render(exc.subject, exc.reason, exc.hint)}") from None
    for warning in found.warnings:
        cmd.warn(f"kernel-deps: {warning}")
    # "" (not None) removes a copy left by an earlier build, e.g. after the kernels were removed.
    cmd.write_or_delete_file("kernels lock", filename, found.text or "", force=True)


def _sdist_copy(cmd: Any, project_dir: Path, basename: str) -> Path | None:
    """In an unpacked sdist, the lock in the egg-info folder it ships; None elsewhere.

    setuptools does not put the project's kernels.lock into an sdist, but the sdist carries
    ``<name>.egg-info`` with the copy written when the sdist was made. The writer's own
    target may be a temporary folder (PEP 517 metadata preparation), so look where the
    sdist keeps it: beside the packages, as egg_info's default ``egg_base``.
    """
    if not (project_dir / "PKG-INFO").is_file():  # an sdist has PKG-INFO at its root; a checkout does not
        return None
    egg_base = (cmd.distribution.package_dir or {}).get("", os.curdir)
    return project_dir / egg_base / Path(cmd.egg_info).name / basename  # egg_info: "<egg_base>/<name>.egg-info"

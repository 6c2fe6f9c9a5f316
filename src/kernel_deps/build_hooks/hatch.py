"""hatchling: the ``kernels`` build hook, which puts kernels.lock into the wheel's metadata.

Enabled in a project with ``kernel-deps`` in ``[build-system] requires`` and::

    [tool.hatch.build.hooks.kernels]

For a wheel the lock goes to ``<name>-<version>.dist-info/extra_metadata/kernels.lock``
(hatchling keeps files added by hooks under ``extra_metadata/``); for an sdist the project's
``kernels.lock`` is force-included at its root, so a wheel built from the sdist has it.
Registered in kernel-deps' own metadata under the ``hatch`` entry point group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.plugin import hookimpl

from kernel_deps.build_hooks import lock_for_build
from kernel_deps.core.errors import KernelDepsError, render
from kernel_deps.core.settings import LOCK_NAME


class KernelsBuildHook(BuildHookInterface):
    """Checks kernels.lock against pyproject.toml and embeds it in wheels and sdists."""

    PLUGIN_NAME = "kernels"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Refuse a stale lock; add the lock to the artifact's metadata (wheel) or files (sdist)."""
        try:
            found = lock_for_build(Path(self.root))
        except KernelDepsError as exc:
            self.app.abort(f"kernel-deps: {render(exc.subject, exc.reason, exc.hint)}")
            raise SystemExit(1) from None  # abort() exits; this line only makes that explicit
        for warning in found.warnings:
            self.app.display_warning(f"kernel-deps: {warning}")
        if found.text is None or found.source is None:
            return
        if self.target_name == "wheel":
            build_data["extra_metadata"][str(found.source)] = LOCK_NAME
        elif self.target_name == "sdist":
            build_data["force_include"][str(found.source)] = LOCK_NAME


@hookimpl
def hatch_register_build_hook() -> type[BuildHookInterface]:
    """Register the ``kernels`` build hook with hatchling."""
    return KernelsBuildHook

"""The ``kernels`` command line: the only package that knows click.

:mod:`~kernel_deps.cli.entry` holds the console scripts, :mod:`~kernel_deps.cli.group` the
command group, and each verb of :mod:`kernel_deps.commands` has its module here of the same
name. This package's own module imports nothing: the console script's entry point is
imported before its handler of Ctrl-C is in place, and a library caller of a renderer
(:mod:`~kernel_deps.cli.render_lock`) does not pay for the group. :data:`main` (the
group, what the ``kernels`` script runs) is imported from :mod:`~kernel_deps.cli.group` on
first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernel_deps.cli.group import main

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    if name == "main":
        from kernel_deps.cli.group import main

        return main
    raise AttributeError(f"module 'kernel_deps.cli' has no attribute {name!r}")

"""A download's progress as ``kernels download``, ``sync`` and ``to-wheel`` show it.

A bar on a terminal (tqdm, imported only then), a line per variant on stdout, messages on
stderr; nothing with ``-q``.
"""

from __future__ import annotations

import sys

import click


def download_progress(quiet: bool, lines: bool = True):
    """Progress for a download: a bar only on a terminal; a line per variant on stdout
    unless ``lines`` is off (--json, whose stdout is the report); messages on stderr."""
    from kernel_deps.commands.download import Progress

    class Lines(Progress):
        def variant_done(self, task, *, cached, files, size):
            if lines:
                state = "already in the cache, verified" if cached else f"downloaded {files} files ({size:,} bytes), verified"
                click.echo(f"{task.label}: {state}")

        def message(self, text):
            click.echo(text, err=True)

    class Bar(Lines):
        def start(self, tasks):
            from tqdm import tqdm

            self.bar = tqdm(total=None, unit="B", unit_scale=True, desc="kernels", leave=False)

        def add_bytes(self, count):
            self.bar.update(count)

        def variant_done(self, task, **kwargs):
            self.bar.clear()
            super().variant_done(task, **kwargs)

        def message(self, text):
            self.bar.clear()
            super().message(text)

    if quiet:
        return Progress()
    return Bar() if sys.stderr.isatty() else Lines()

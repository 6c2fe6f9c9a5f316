"""The ``kernels`` subcommands' definitions: what they share, here; each command (or a few
related ones) in a module of its own below this package.

click's decorators build every option of a command when its module is imported, so a
module is imported only when its command runs or its own help is asked for: ``kernels
--help`` lists the commands from :data:`kernel_deps.cli.COMMAND_TABLE`, which also names the
module each lives in, and the group (:func:`kernel_deps.cli.main`) imports only that
module for a command it looks up (``kernels verify`` defines verify alone).
:data:`COMMANDS`, every command by its name, imports them all;
``tests/test_cli_table.py`` holds the table and the definitions together.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kernel_deps.cli_common import _JSON_META, _QUIET_META, _echo_json, _remember

_PROJECT_DIR = click.Path(file_okay=False, path_type=Path)


# Every command that reports takes --json (its schema: docs/schemas/<command>.schema.json)
# and -q/--quiet; `kernels -q COMMAND` is the same as `kernels COMMAND -q`.
_JSON_OPTION = click.option(
    "--json", "as_json", is_flag=True, callback=_remember(_JSON_META),
    help="Print machine-readable JSON (schema: docs/schemas/).",
)
_QUIET_OPTION = click.option(
    "--quiet", "-q", is_flag=True, callback=_remember(_QUIET_META),
    help="Print nothing but errors and problems found; the exit code tells the rest.",
)


def _into_option(what: str):
    """``--into DIR``, as download and sync take it: ``what`` is placed there, verified."""
    return click.option("--into", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
                        help=f"Also place exactly {what} in DIR, in the Hugging Face cache layout, verified.")  # fmt: skip


def _target_options(target_help: str, all_help: str):
    """``--target NAME`` (repeatable) and ``--all-targets``, as download and verify take them."""

    def decorate(command):
        command = click.option("--all-targets", is_flag=True, help=all_help)(command)
        return click.option("--target", "targets", multiple=True, metavar="NAME", help=target_help)(command)

    return decorate


def _quiet() -> bool:
    return bool(click.get_current_context().meta.get(_QUIET_META))


def _notice():
    """Where a library function's notices go (waiting for another command): stderr, or nowhere with -q."""
    return None if _quiet() else (lambda text: click.echo(text, err=True))


def _echo_table(rows: list[tuple[str, ...]]) -> None:
    """Columns aligned by their widest cell, two spaces apart; the last one left ragged."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])


def _render_lock(report, *, as_json: bool, check: bool, quiet: bool = False) -> None:
    """A lock report (also add's and remove's relock): --json, lock --check's verdict, or the changes."""
    from kernel_deps.render import change_line, note_line

    name = report.path.name
    changes = [change_line(change) for change in report.changes]
    notes = [note_line(note) for note in report.notes]
    if as_json:
        _echo_json(report.to_json())
    elif check:
        if report.up_to_date:
            if not quiet:
                click.echo(f"{name} is up to date ({len(report.lock.kernels)} kernels)")
        else:
            why = "is out of date" if report.existed else "is missing"
            # What the prior lock breaks: a requirement, a dependency's pin, a target added since.
            for problem in (*report.problems, *report.uncovered):
                click.echo(problem.message, err=True)
            click.echo(f"{name} {why}; run 'kernels lock' to update it{':' if changes else ''}", err=True)
            for line in changes:
                click.echo(f"  {line}", err=True)
        for line in notes:
            click.echo(f"note: {line}", err=True)
    elif not quiet:
        if report.converted_from is not None:
            verb = "Converted" if report.written else "Would convert"
            click.echo(
                f"{verb} {name} from the {report.converted_from} format to kernel-deps' "
                "(its pins are kept; 'kernels export' writes the old format again)"
            )
        for line in changes:
            click.echo(line)
        if not changes and not report.up_to_date:  # offline: why it would change, not how
            for problem in report.problems:
                click.echo(problem.message)
        for line in notes:
            click.echo(f"note: {line}")
        if report.written:
            state = f"wrote {name}"
        elif report.up_to_date:
            state = f"{name} is up to date"
        else:
            state = f"would update {name} (dry run: nothing written)"
        click.echo(f"Locked {len(report.lock.kernels)} kernels; {state}")
    if check and not report.up_to_date:
        sys.exit(1)


def _download_progress(quiet: bool, lines: bool = True):
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


def __getattr__(name: str):
    if name == "COMMANDS":  # every command by its name, each module of the table imported
        from kernel_deps.cli import main

        return main.commands
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""``kernels export``: the lock in another tool's format; the verb of :mod:`kernel_deps.commands.export`."""

from __future__ import annotations

from pathlib import Path

import click

from kernel_deps.cli.group import counted, echo_json
from kernel_deps.cli.options import JSON_OPTION, QUIET_OPTION, is_quiet, project_argument


@click.command()
@project_argument()
@click.option("--format", "format_name", required=True, metavar="FORMAT",
              help="kernels-0.17: the lock Hugging Face kernels 0.17 reads; kernels-0.16: the one 0.16 and older read; "
                   "pylock: the kernel wheels of --wheels added to the pylock.toml --output names.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
              help="Write to FILE instead of stdout ('-': stdout); not the project's kernels.lock or pyproject.toml.")
@click.option("--wheels", type=click.Path(dir_okay=False, path_type=Path), metavar="PYLOCK",
              help="With --format pylock: the pylock.toml (or pylock.<target>.toml) kernels to-wheel wrote.")
@JSON_OPTION
@QUIET_OPTION
def export(project_dir: Path, format_name: str, output: Path | None, wheels: Path | None, as_json: bool,
           quiet: bool) -> None:  # fmt: skip
    """Write kernels.lock in the format of another tool (commit pins, transitive kernels included)."""
    from kernel_deps.commands.export import export_project

    if output is not None and str(output) == "-":
        output = None
    report = export_project(project_dir, format_name, output=output, wheels=wheels)
    for line in report.warnings:  # on stderr, -q or not: the lock is exported though it disagrees with pyproject.toml
        click.echo(f"warning: {line}", err=True)
    if as_json:  # the exported text is the JSON's "text" when no file was written
        echo_json(report.to_json())
    elif report.output is None:
        click.echo(report.text)  # the export itself, -q or not
    elif not is_quiet():
        click.echo(f"Wrote {report.output} ({report.format} format, {counted(report.kernels, 'kernel')})", err=True)

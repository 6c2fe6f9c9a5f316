"""``kernels export``: the lock in another tool's format; the verb of :mod:`kernel_deps.commands.export`."""

from __future__ import annotations

from pathlib import Path

import click

from kernel_deps.cli.options import PROJECT_DIR


@click.command()
@click.argument("project_dir", default=".", type=PROJECT_DIR)
@click.option("--format", "format_name", required=True, metavar="FORMAT",
              help="kernels-0.17: the lock Hugging Face kernels 0.17 reads; kernels-0.16: the one 0.16 and older read; "
                   "pylock: the kernel wheels of --wheels added to the pylock.toml --output names.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
              help="Write to FILE instead of stdout ('-': stdout); not the project's kernels.lock or pyproject.toml.")
@click.option("--wheels", type=click.Path(dir_okay=False, path_type=Path), metavar="PYLOCK",
              help="With --format pylock: the pylock.toml (or pylock.<target>.toml) kernels to-wheel wrote.")
def export(project_dir: Path, format_name: str, output: Path | None, wheels: Path | None) -> None:
    """Write kernels.lock in the format of another tool (commit pins, transitive kernels included)."""
    from kernel_deps.commands.export import export_project

    if output is not None and str(output) == "-":
        output = None
    report = export_project(project_dir, format_name, output=output, wheels=wheels)
    if report.output is None:
        click.echo(report.text)
        return
    click.echo(f"Wrote {report.output} ({report.format} format, {report.kernels} kernels)", err=True)

"""``kernels cache`` and its subcommand ``prune``: the verb of :mod:`kernel_deps.commands.prune`."""

from __future__ import annotations

from pathlib import Path

import click

from kernel_deps.cli.group import counted, echo_json
from kernel_deps.cli.options import JSON_OPTION, QUIET_OPTION, is_quiet, project_argument


@click.group()
def cache() -> None:
    """Manage the kernel cache."""


@cache.command()
@project_argument("project_dirs", nargs=-1)
@click.option("--dry-run", is_flag=True, help="List what would be removed, with sizes; remove nothing.")
@JSON_OPTION
@QUIET_OPTION
def prune(project_dirs: tuple[Path, ...], dry_run: bool, as_json: bool, quiet: bool) -> None:
    """Remove every kernel commit no PROJECT_DIR's kernels.lock pins (default: the project around .), and stale downloads."""
    from kernel_deps.commands.prune import prune_cache

    report = prune_cache(project_dirs or (Path("."),), dry_run=dry_run)
    if as_json:
        echo_json(report.to_json())
        return
    if is_quiet():
        return
    for entry in report.removed:
        click.echo(f"{'would remove' if dry_run else 'removed'} {entry.kind} {entry.path} ({entry.size:,} bytes)")
    for skipped in report.skipped:
        click.echo(f"skipped {skipped.path}: {skipped.reason}")
    verb = "Would free" if dry_run else "Freed"
    click.echo(f"{verb} {counted(report.bytes, 'byte')} ({counted(len(report.removed), 'entry', 'entries')}); "
               f"kept {counted(len(report.kept), 'locked commit')}")

"""``kernels lock``: the verb of :mod:`kernel_deps.commands.lock`."""

from __future__ import annotations

from pathlib import Path

import click

from kernel_deps.cli.options import JSON_OPTION, QUIET_OPTION, is_quiet, notice, project_argument, require_lock
from kernel_deps.core.errors import UsageError


@click.command()
@project_argument()
@click.option("--check", is_flag=True, help="Exit 1 if kernels.lock would change (2 if there is none); write nothing.")
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@click.option("--upgrade", "-U", is_flag=True, help="Ignore locked pins: take the newest allowed versions.")
@click.option("--upgrade-package", "-P", "upgrade_packages", multiple=True, metavar="ORG/NAME",
              help="Release the pin of one kernel (repeatable).")
@JSON_OPTION
@QUIET_OPTION
def lock(
    project_dir: Path, check: bool, dry_run: bool, upgrade: bool, upgrade_packages: tuple[str, ...], as_json: bool,
    quiet: bool,
) -> None:
    """Resolve [tool.kernels.dependencies] into kernels.lock (commits and variant hashes)."""
    from kernel_deps.cli.render_lock import echo_lock_report
    from kernel_deps.commands.lock import LockMode, lock_project

    if check and dry_run:
        raise UsageError("--check and --dry-run exclude each other; pass one of them")
    if check:
        require_lock(project_dir)
    write = not (check or dry_run)
    report = lock_project(
        project_dir,
        upgrade=upgrade,
        upgrade_packages=upgrade_packages,
        mode=LockMode.WRITE if write else LockMode.CHECK,
        notice=notice(),
    )
    echo_lock_report(report, as_json=as_json, check=check, quiet=is_quiet())

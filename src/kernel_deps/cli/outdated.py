"""``kernels outdated``: what a relock would change; the verb of :mod:`kernel_deps.commands.outdated`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kernel_deps.cli.group import colour, counted, echo_json
from kernel_deps.cli.options import JSON_OPTION, QUIET_OPTION, echo_table, is_quiet, project_argument
from kernel_deps.cli.render_lock import short


@click.command()
@project_argument()
@JSON_OPTION
@QUIET_OPTION
@click.option("--exit-code", is_flag=True, help="Exit 1 when any pin has drifted (for CI).")
def outdated(project_dir: Path, as_json: bool, quiet: bool, exit_code: bool) -> None:
    """Show, per locked kernel, what --upgrade would take, newer releases and moved refs."""
    from kernel_deps.commands.outdated import outdated_project
    from kernel_deps.hub.redirects import describe_redirects

    report = outdated_project(project_dir)
    if as_json:
        echo_json(report.to_json())
    elif not is_quiet():
        rows = [("KERNEL", "LOCKED", "UPGRADE", "LATEST")]
        for k in report.kernels:
            rows.append((
                k.repo_id,
                short(k.locked_version, k.locked_commit),
                _upgrade_cell(k) if k.upgradable else "-",
                short(k.latest_version, k.latest_commit) if k.latest_version else "-",
            ))  # fmt: skip
        echo_table(rows)
        for k in report.kernels:
            if k.redirects:
                then = _upgrade_cell(k) if k.upgradable else "nothing"
                click.echo(
                    f"{colour('note:', fg='yellow')} {describe_redirects(k.redirects)}; "
                    f"kernels lock --upgrade would lock {then} in its place"
                )
            for held in k.held_back:  # newer in range, but refused as kernels lock would refuse it
                click.echo(
                    f"{colour('note:', fg='yellow')} {k.repo_id} {held.version} ({held.commit[:12]}) is held back, "
                    f"kernels lock --upgrade would not take it: {held.reason}"
                )
            if k.ref_moved_to:
                changed = ", ".join(k.changed_variants) or "none"
                click.echo(
                    f"{colour('note:', fg='yellow')} {k.repo_id}: {k.locked_version} now points at {k.ref_moved_to[:12]} (locked "
                    f"{k.locked_commit[:12]}); variants that would change: {changed}"
                )
        if not report.drifted:
            click.echo("the locked kernel is current" if len(report.kernels) == 1
                       else f"all {counted(len(report.kernels), 'locked kernel')} are current")
    if exit_code and report.drifted:
        sys.exit(1)


def _upgrade_cell(k) -> str:
    """What --upgrade would lock, with the repo it lies in when redirects lead elsewhere."""
    upgrade = short(k.upgrade_version, k.upgrade_commit)
    return f"{k.upgrade_repo_id} {upgrade}" if k.redirects else upgrade

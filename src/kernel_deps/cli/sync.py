"""``kernels sync``: lock when out of date, download, verify, in one step; the verb of :mod:`kernel_deps.commands.sync`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kernel_deps.cli.group import counted, echo_json
from kernel_deps.cli.options import (
    JSON_OPTION,
    QUIET_OPTION,
    into_option,
    is_quiet,
    notice,
    project_argument,
    require_lock,
    target_options,
)
from kernel_deps.cli.render_lock import change_line, echo_lock_report

if TYPE_CHECKING:
    from kernel_deps.cache.subset import PlacedMismatch
    from kernel_deps.lock.freshness import Problem


@click.command()
@project_argument()
@click.option("--locked", is_flag=True,
              help="Exit 1 if kernels.lock is out of date (2 if there is none); write and fetch nothing.")
@click.option("--frozen", is_flag=True, help="Use kernels.lock as it is; never check pyproject.toml for changes.")
@target_options(
    "Download and verify the build serving this deployment target (repeatable), instead of this machine's.",
    "As --target, for every target [tool.kernels] declares.",
)
@into_option("the locked variants")
@JSON_OPTION
@QUIET_OPTION
def sync(
    project_dir: Path,
    locked: bool,
    frozen: bool,
    targets: tuple[str, ...],
    all_targets: bool,
    into: Path | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Lock if pyproject.toml changed, download the locked kernels, verify them (one step)."""
    from kernel_deps.cli.progress import download_progress
    from kernel_deps.commands.sync import sync_project

    if locked and not frozen:  # both: the usage error, from sync_project
        require_lock(project_dir)
    report = sync_project(
        project_dir, locked=locked, frozen=frozen, targets=targets, all_targets=all_targets, into=into,
        progress=download_progress(is_quiet(), as_json=as_json), notice=notice(),
        on_locked=None if as_json or is_quiet() else _echo_changes,  # before the downloads they cause
    )  # fmt: skip
    for line in report.download.warnings if report.download is not None else ():  # --frozen: said, not refused
        click.echo(f"warning: {line}", err=True)
    if as_json:
        echo_json(report.to_json())
    elif report.lock_state == "out-of-date":
        echo_lock_report(report.lock, as_json=False, check=True, quiet=is_quiet())
    else:
        for problem in report.problems:
            click.echo(problem_line(problem))
        if not is_quiet():
            name = report.lockfile.name
            lock_text = {"up-to-date": f"{name} up to date", "updated": f"wrote {name}",
                         "created": f"wrote {name}", "frozen": f"{name} used as it is"}[report.lock_state]  # fmt: skip
            download = report.download
            present = len(download.fetched) + len(download.already_cached)
            where = f"; placed in {report.into.folder}, verified" if report.into is not None and report.ok else ""
            verdict = "verified" if report.ok else f"{counted(len(report.problems), 'problem')} found"
            click.echo(
                f"Synced {counted(report.verify.kernels, 'kernel')}: {lock_text}; {counted(present, 'variant')} present, "
                f"{verdict} ({len(download.fetched)} downloaded, {counted(download.files_fetched, 'file')}, "
                f"{counted(download.bytes_fetched, 'byte')})"
                f"{where}"
            )
    if not report.ok:
        sys.exit(1)


def _echo_changes(lock_report) -> None:
    """What the relock changed, one line each, printed as soon as it is written."""
    for change in lock_report.changes:
        click.echo(change_line(change))


def problem_line(problem: Problem | PlacedMismatch) -> str:
    """The line for one thing a sync found: a verify problem, or a variant --into placed that does not check out."""
    from kernel_deps.cache.subset import PlacedMismatch, placed_mismatch_text

    return placed_mismatch_text(problem) if isinstance(problem, PlacedMismatch) else problem.message

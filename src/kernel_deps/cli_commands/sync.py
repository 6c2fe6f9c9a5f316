"""``kernels sync``: lock when out of date, download, verify, in one step."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kernel_deps.cli_commands import (
    _JSON_OPTION, _PROJECT_DIR, _QUIET_OPTION, _download_progress, _echo_json, _into_option, _notice, _quiet,
    _render_lock, _target_options,
)  # fmt: skip
from kernel_deps.render import change_line


@click.command()
@click.argument("project_dir", default=".", type=_PROJECT_DIR)
@click.option("--locked", is_flag=True,
              help="Exit 1 if kernels.lock is missing or out of date; write and fetch nothing.")
@click.option("--frozen", is_flag=True, help="Use kernels.lock as it is; never check pyproject.toml for changes.")
@_target_options(
    "Download and verify the build serving this deployment target (repeatable), instead of this machine's.",
    "As --target, for every target [tool.kernels] declares.",
)
@_into_option("the locked variants")
@_JSON_OPTION
@_QUIET_OPTION
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
    from kernel_deps.commands.sync import sync_project

    report = sync_project(
        project_dir, locked=locked, frozen=frozen, targets=targets, all_targets=all_targets, into=into,
        progress=_download_progress(_quiet(), lines=not as_json), notice=_notice(),
    )  # fmt: skip
    for line in report.download.warnings if report.download is not None else ():  # --frozen: said, not refused
        click.echo(f"warning: {line}", err=True)
    if as_json:
        _echo_json(report.to_json())
    elif report.lock_state == "out-of-date":
        _render_lock(report.lock, as_json=False, check=True, quiet=_quiet())
    else:
        if report.lock_state in ("updated", "created") and not _quiet():
            for line in (change_line(change) for change in report.lock.changes):
                click.echo(line)
        for line in report.messages:
            click.echo(line)
        if not _quiet():
            name = report.lockfile.name
            lock_text = {"up-to-date": f"{name} up to date", "updated": f"wrote {name}",
                         "created": f"wrote {name}", "frozen": f"{name} used as it is"}[report.lock_state]  # fmt: skip
            download = report.download
            present = len(download.fetched) + len(download.already_cached)
            where = f"; placed in {report.into.folder}, verified" if report.into is not None and report.ok else ""
            verdict = "verified" if report.ok else f"{len(report.messages)} problems found"
            click.echo(
                f"Synced {report.verify.kernels} kernels: {lock_text}; {present} variants present, {verdict} "
                f"({len(download.fetched)} downloaded, {download.files_fetched} files, {download.bytes_fetched:,} bytes)"
                f"{where}"
            )
    if not report.ok:
        sys.exit(1)

"""``kernels verify``: pyproject.toml, kernels.lock, the cache (and with --online, the Hub) checked; the verb of
:mod:`kernel_deps.commands.verify`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kernel_deps.cli.group import colour, counted, echo_json
from kernel_deps.cli.options import (
    EXPORTS_HELP, JSON_OPTION, QUIET_OPTION, echo_exports, is_quiet, project_argument, target_options,
)


@click.command()
@project_argument()
@click.option("--online", is_flag=True,
              help="Also ask the Hub: do the locked commits still exist, do the locked tags and branches still point at them?")
@click.option("--require-cached", is_flag=True, help="Also fail when this machine's variant of a kernel is not in the cache.")
@target_options(
    "Also fail when the build serving this deployment target is not in the cache (repeatable).",
    "As --target, for every target [tool.kernels] targets declares.",
)
@click.option("--exports", is_flag=True, help=EXPORTS_HELP)
@JSON_OPTION
@QUIET_OPTION
def verify(
    project_dir: Path,
    online: bool,
    require_cached: bool,
    targets: tuple[str, ...],
    all_targets: bool,
    exports: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Check that pyproject.toml, kernels.lock and the cache agree (no network unless --online)."""
    from kernel_deps.commands.verify import FILE_KINDS, WHEEL_KINDS, verify_project

    if exports and as_json:
        raise click.UsageError("--exports lists as text only; leave out --json")

    report = verify_project(
        project_dir, online=online, require_cached=require_cached, targets=targets, all_targets=all_targets
    )
    if as_json:
        echo_json(report.to_json())
    else:
        for notice in () if is_quiet() else report.notices:
            click.echo(f"{colour('note:', fg='yellow')} {notice.message}")
        for problem in report.problems:
            click.echo(problem.message)
            if problem.expected is not None or problem.got is not None:
                click.echo(f"    Expected: {problem.expected or '(none)'}")
                click.echo(f"    Got:      {problem.got or '(none)'}")
        count = len(report.problems)
        if is_quiet():
            pass
        elif count:
            click.echo(f"{count} problem{'s' if count != 1 else ''} found")
            if any(p.kind in FILE_KINDS for p in report.problems):
                click.echo(f"{colour('hint:', fg='cyan')} the cache differs from kernels.lock; run 'kernels download' to replace what differs")
            if any(p.kind in WHEEL_KINDS for p in report.problems):
                hint = colour("hint:", fg="cyan")
                click.echo(f"{hint} an installed kernel wheel differs from kernels.lock; reinstall "
                           "the wheels 'kernels to-wheel' writes from this lock")  # fmt: skip
        elif not report.verified and not report.wheels:  # nothing to check the lock's hashes against
            hub = "; every locked commit, tag and branch checked on the Hub" if report.online else ""
            click.echo(f"kernels.lock and pyproject.toml agree ({counted(report.kernels, 'kernel')}){hub}; "
                       "nothing locked is in the cache yet, so no file was checked: 'kernels download' fetches "
                       "this machine's builds")  # fmt: skip
        else:
            hub = "; every locked commit, tag and branch checked on the Hub" if report.online else ""
            wheels = f", {counted(len(report.wheels), 'installed kernel wheel')} verified" if report.wheels else ""
            click.echo(
                f"kernels.lock, pyproject.toml and the cache agree "
                f"({counted(report.kernels, 'kernel')}, {counted(len(report.verified), 'cached variant')} verified"
                f"{wheels}){hub}"
            )
        if not is_quiet() and any(tier == "shared" for tier, _ in report.tiers.values()):
            for check in report.verified:  # which cache tier each variant came from
                tier, root = report.tiers[(check.repo_id, check.variant)]
                click.echo(f"  {check.repo_id} {check.variant}: {tier} cache {root}")
        if exports:
            echo_exports(project_dir)
    if not report.ok:
        sys.exit(1)

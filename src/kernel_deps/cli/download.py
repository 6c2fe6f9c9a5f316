"""``kernels download``: the verb of :mod:`kernel_deps.commands.download`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kernel_deps.cli.group import counted, echo_json
from kernel_deps.cli.options import JSON_OPTION, QUIET_OPTION, into_option, is_quiet, project_argument, target_options


@click.command()
@project_argument()
@click.option("--all-variants", is_flag=True, help="Download every locked variant, not just this machine's.")
@click.option("--variant", "variants", multiple=True, metavar="NAME",
              help="Download this variant (repeatable), e.g. to build an image for another machine.")
@target_options(
    "Download the build serving this deployment target (repeatable), e.g. torch213-cpu-aarch64-darwin.",
    "Download the builds serving every target [tool.kernels] declares.",
)
@into_option("these variants")
@JSON_OPTION
@QUIET_OPTION
def download(
    project_dir: Path,
    all_variants: bool,
    variants: tuple[str, ...],
    targets: tuple[str, ...],
    all_targets: bool,
    into: Path | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Fetch exactly what kernels.lock pins into the Hugging Face cache, verified."""
    from kernel_deps.cli.progress import download_progress
    from kernel_deps.commands.download import download_project

    progress = download_progress(is_quiet(), as_json=as_json)
    report = download_project(
        project_dir, all_variants=all_variants, variants=variants, targets=targets, all_targets=all_targets,
        progress=progress, into=into,
    )  # fmt: skip
    for line in report.warnings:  # on stderr, -q or not: the lock is used though it disagrees with pyproject.toml
        click.echo(f"warning: {line}", err=True)
    if as_json:
        echo_json(report.to_json())
    else:
        for line in report.into.problems if report.into is not None else ():
            click.echo(line)
        if not is_quiet():
            placed = f"; placed in {report.into.folder}, verified" if report.into is not None and report.into.ok else ""
            click.echo(
                f"{counted(len(report.fetched) + len(report.already_cached), 'variant')} present and verified "
                f"({len(report.fetched)} downloaded, {counted(report.files_fetched, 'file')}, "
                f"{counted(report.bytes_fetched, 'byte')})"
                f"{placed}"
            )
    if report.into is not None and not report.into.ok:
        sys.exit(1)

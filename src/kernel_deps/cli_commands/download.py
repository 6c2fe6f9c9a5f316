"""``kernels download``, and ``kernels to-wheel``, which fetches the same way."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kernel_deps.cli_commands import (
    _JSON_OPTION, _PROJECT_DIR, _QUIET_OPTION, _download_progress, _echo_json, _into_option, _quiet,
    _target_options,
)  # fmt: skip
from kernel_deps.core.errors import UsageError


@click.command()
@click.argument("project_dir", default=".", type=_PROJECT_DIR)
@click.option("--all-variants", is_flag=True, help="Download every locked variant, not just this machine's.")
@click.option("--variant", "variants", multiple=True, metavar="NAME",
              help="Download this variant (repeatable), e.g. to build an image for another machine.")
@_target_options(
    "Download the build serving this deployment target (repeatable), e.g. torch213-cpu-aarch64-darwin.",
    "Download the builds serving every target [tool.kernels] declares.",
)
@_into_option("these variants")
@_JSON_OPTION
@_QUIET_OPTION
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
    from kernel_deps.commands.download import download_project

    progress = _download_progress(_quiet(), lines=not as_json)
    report = download_project(
        project_dir, all_variants=all_variants, variants=variants, targets=targets, all_targets=all_targets,
        progress=progress, into=into,
    )  # fmt: skip
    for line in report.warnings:  # on stderr, -q or not: the lock is used though it disagrees with pyproject.toml
        click.echo(f"warning: {line}", err=True)
    if as_json:
        _echo_json(report.to_json())
    else:
        for line in report.into.problems if report.into is not None else ():
            click.echo(line)
        if not _quiet():
            placed = f"; placed in {report.into.folder}, verified" if report.into is not None and report.into.ok else ""
            click.echo(
                f"{len(report.fetched) + len(report.already_cached)} variants present and verified "
                f"({len(report.fetched)} downloaded, {report.files_fetched} files, {report.bytes_fetched:,} bytes)"
                f"{placed}"
            )
    if report.into is not None and not report.into.ok:
        sys.exit(1)


@click.command("to-wheel")
@click.argument("source", default=".", metavar="[PROJECT_DIR | ORG/NAME@REVISION]")
@click.option("--output", "-o", required=True, type=click.Path(path_type=Path), metavar="DIR",
              help="The folder the wheels and requirements.txt go into (created).")
@click.option("--all-variants", is_flag=True, help="A wheel of every locked variant, not just this machine's.")
@_target_options(
    "A wheel of the build serving this deployment target (repeatable); one requirements file per target.",
    "As --target, for every target [tool.kernels] declares.",
)
@click.option("--trust", "trusted", multiple=True, metavar="ORG[/NAME]",
              help="With ORG/NAME@REVISION: allow this publisher (or repo) besides those the Hub trusts.")
@click.option("--wheel-url", metavar="URL",
              help="pylock.toml names each wheel as published under URL (URL/<wheel file>), not by its path.")
@_JSON_OPTION
@_QUIET_OPTION
def to_wheel(
    source: str,
    output: Path,
    all_variants: bool,
    targets: tuple[str, ...],
    all_targets: bool,
    trusted: tuple[str, ...],
    wheel_url: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Write the locked kernels as wheels (verified bytes only) and a hash-pinned requirements.txt."""
    from kernel_deps.commands.to_wheel import wheels_from_kernel, wheels_from_project

    progress = _download_progress(_quiet(), lines=False)
    if "@" in source and not Path(source).is_dir():
        if all_targets:
            raise UsageError("--all-targets reads a project's targets; with ORG/NAME@REVISION pass --target NAME")
        report = wheels_from_kernel(source, output, trusted=trusted, all_variants=all_variants, targets=targets,
                                    progress=progress, wheel_url=wheel_url)  # fmt: skip
    else:
        if trusted:
            raise UsageError("--trust is for ORG/NAME@REVISION; a project's publishers are in [tool.kernels.trust]")
        report = wheels_from_project(Path(source), output, all_variants=all_variants, targets=targets,
                                     all_targets=all_targets, progress=progress, wheel_url=wheel_url)  # fmt: skip
    for line in report.warnings:  # on stderr, -q or not
        click.echo(f"warning: {line}", err=True)
    if as_json:
        _echo_json(report.to_json())
    elif not _quiet():
        for wheel in report.wheels:
            click.echo(f"{wheel.spec.repo_id} {wheel.spec.variant}: {wheel.path.name}")
        pinned = ", ".join(str(r.path) for r in (*report.requirements, *report.pylocks))
        pinned_in = f"; pinned in {pinned}" if pinned else ""
        click.echo(f"Wrote {len(report.wheels)} wheels to {report.output}{pinned_in}")

"""``kernels to-wheel``: the verb of :mod:`kernel_deps.commands.to_wheel`."""

from __future__ import annotations

from pathlib import Path

import click

from kernel_deps.cli.group import counted, echo_json
from kernel_deps.cli.options import JSON_OPTION, QUIET_OPTION, is_quiet, project_argument, target_options
from kernel_deps.core.errors import UsageError


@click.command("to-wheel")
@project_argument("source", metavar="[PROJECT_DIR | ORG/NAME@REVISION]")
@click.option("--output", "-o", required=True, type=click.Path(path_type=Path), metavar="DIR",
              help="The folder the wheels and requirements.txt go into (created).")
@click.option("--all-variants", is_flag=True, help="A wheel of every locked variant, not just this machine's.")
@target_options(
    "A wheel of the build serving this deployment target (repeatable); one requirements file per target.",
    "As --target, for every target [tool.kernels] declares.",
)
@click.option("--trust", "trusted", multiple=True, metavar="ORG[/NAME]",
              help="With ORG/NAME@REVISION: allow this publisher (or repo) besides those the Hub trusts.")
@click.option("--wheel-url", metavar="URL",
              help="pylock.toml names each wheel as published under URL (URL/<wheel file>), not by its path.")
@JSON_OPTION
@QUIET_OPTION
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
    """Write the locked kernels as wheels (verified bytes only), a hash-pinned requirements.txt and pylock.toml."""
    from kernel_deps.cli.progress import download_progress
    from kernel_deps.commands.to_wheel import wheels_from_kernel, wheels_from_project

    progress = download_progress(is_quiet(), as_json=as_json, lines=False)
    source = str(source)
    if "@" not in source and source.count("/") == 1 and not Path(source).exists():
        raise UsageError(f"{source} is no project folder; to package a kernel from the Hub, give its revision: "
                         f"kernels to-wheel {source}@REVISION (a tag such as v1.0.0, a branch or a full commit)")  # fmt: skip
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
        echo_json(report.to_json())
    elif not is_quiet():
        for wheel in report.wheels:
            click.echo(f"{wheel.spec.repo_id} {wheel.spec.variant}: {wheel.path.name}")
        pinned = ", ".join(str(r.path) for r in (*report.requirements, *report.pylocks))
        pinned_in = f"; pinned in {pinned}" if pinned else ""
        click.echo(f"Wrote {counted(len(report.wheels), 'wheel')} to {report.output}{pinned_in}")

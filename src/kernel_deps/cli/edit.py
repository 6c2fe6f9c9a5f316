"""``kernels add`` and ``kernels remove``, which edit pyproject.toml and relock: the verbs of
:mod:`kernel_deps.commands.edit`."""

from __future__ import annotations

from pathlib import Path

import click

from kernel_deps.cli.options import JSON_OPTION, PROJECT_DIR, QUIET_OPTION, is_quiet, notice, project_argument
from kernel_deps.core.errors import UsageError


def _project_argument(positional: Path | None, option: Path | None) -> Path:
    """The project folder of add/remove: PROJECT_DIR, or the older --project spelling."""
    if positional is not None and option is not None:
        raise UsageError(
            f"the project folder is given twice ({positional} and --project {option}); "
            "give it once, as PROJECT_DIR"
        )
    return positional or option or Path(".")


def toml_value(value) -> str:
    """``value`` as pyproject.toml holds it: ``">=1.2,<2"``, ``1``, ``{ revision = "v1.0.0" }``."""
    import json  # a JSON string, number, boolean or array of them is TOML too

    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {toml_value(item)}" for key, item in value.items()) + " }"
    return json.dumps(value)


# PROJECT_DIR is positional for every command; add and remove also still accept the
# --project spelling they used to take, hidden from --help.
_LEGACY_PROJECT = click.option("--project", "legacy_project", type=PROJECT_DIR, hidden=True)


@click.command()
@click.argument("requirement", metavar="ORG/NAME[SPEC]")
@project_argument()
@_LEGACY_PROJECT
@JSON_OPTION
@QUIET_OPTION
def add(requirement: str, project_dir: Path | None, legacy_project: Path | None, as_json: bool, quiet: bool) -> None:
    """Add a kernel to [tool.kernels.dependencies] of PROJECT_DIR (default: the project around .) and relock.

    SPEC is a PEP 440 range (kernels-community/activation>=1.2,<2) or @REVISION; without
    one, the newest release's major series is taken (>=X.Y.Z,<X+1).
    """
    project_dir = _project_argument(project_dir, legacy_project)
    from kernel_deps.cli.render_lock import echo_lock_report
    from kernel_deps.commands.edit import add_kernel

    report = add_kernel(project_dir, requirement, notice=notice())
    if not (as_json or is_quiet()):
        word = {"updated": "Updated", "unchanged": "Unchanged"}.get(report.status or "", "Added")
        click.echo(f"{word} {report.repo_id} = {toml_value(report.requirement)}")
    echo_lock_report(report.lock, as_json=as_json, check=False, quiet=is_quiet())


@click.command()
@click.argument("repo_id", metavar="ORG/NAME")
@project_argument()
@_LEGACY_PROJECT
@JSON_OPTION
@QUIET_OPTION
def remove(repo_id: str, project_dir: Path | None, legacy_project: Path | None, as_json: bool, quiet: bool) -> None:
    """Remove a kernel from [tool.kernels.dependencies] of PROJECT_DIR (default: the project around .) and relock."""
    project_dir = _project_argument(project_dir, legacy_project)
    from kernel_deps.cli.render_lock import echo_lock_report
    from kernel_deps.commands.edit import remove_kernel

    report = remove_kernel(project_dir, repo_id, notice=notice())
    if not (as_json or is_quiet()):
        click.echo(f"Removed {repo_id}")
    echo_lock_report(report.lock, as_json=as_json, check=False, quiet=is_quiet())

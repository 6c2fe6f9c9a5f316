"""``kernels lock``, and ``kernels add`` and ``kernels remove``, which edit pyproject.toml and relock."""

from __future__ import annotations

from pathlib import Path

import click

from kernel_deps.cli_commands import _JSON_OPTION, _PROJECT_DIR, _QUIET_OPTION, _notice, _quiet, _render_lock
from kernel_deps.core.errors import UsageError


@click.command()
@click.argument("project_dir", default=".", type=_PROJECT_DIR)
@click.option("--check", is_flag=True, help="Exit 1 if kernels.lock is missing or would change; write nothing.")
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@click.option("--upgrade", "-U", is_flag=True, help="Ignore locked pins: take the newest allowed versions.")
@click.option("--upgrade-package", "-P", "upgrade_packages", multiple=True, metavar="ORG/NAME",
              help="Release the pin of one kernel (repeatable).")
@_JSON_OPTION
@_QUIET_OPTION
def lock(
    project_dir: Path, check: bool, dry_run: bool, upgrade: bool, upgrade_packages: tuple[str, ...], as_json: bool,
    quiet: bool,
) -> None:
    """Resolve [tool.kernels.dependencies] into kernels.lock (commits and variant hashes)."""
    from kernel_deps.commands.lock import LockMode, lock_project

    if check and dry_run:
        raise UsageError("--check and --dry-run exclude each other; pass one of them")
    write = not (check or dry_run)
    report = lock_project(
        project_dir,
        upgrade=upgrade,
        upgrade_packages=upgrade_packages,
        mode=LockMode.WRITE if write else LockMode.CHECK,
        notice=_notice(),
    )
    _render_lock(report, as_json=as_json, check=check, quiet=_quiet())


def _project_argument(positional: Path | None, option: Path | None) -> Path:
    """The project folder of add/remove: PROJECT_DIR, or the older --project spelling."""
    if positional is not None and option is not None:
        raise UsageError(
            f"the project folder is given twice ({positional} and --project {option}); "
            "give it once, as PROJECT_DIR"
        )
    return positional or option or Path(".")


# PROJECT_DIR is positional for every command; add and remove also still accept the
# --project spelling they used to take, hidden from --help.
_LEGACY_PROJECT = click.option("--project", "legacy_project", type=_PROJECT_DIR, hidden=True)


@click.command()
@click.argument("requirement", metavar="ORG/NAME[SPEC]")
@click.argument("project_dir", required=False, type=_PROJECT_DIR)
@_LEGACY_PROJECT
@_JSON_OPTION
@_QUIET_OPTION
def add(requirement: str, project_dir: Path | None, legacy_project: Path | None, as_json: bool, quiet: bool) -> None:
    """Add a kernel to [tool.kernels.dependencies] of PROJECT_DIR (default .) and relock.

    SPEC is a PEP 440 range (kernels-community/activation>=1.2,<2) or @REVISION; without
    one, the newest release's major series is taken (>=X.Y.Z,<X+1).
    """
    project_dir = _project_argument(project_dir, legacy_project)
    from kernel_deps.commands.edit import add_kernel

    report = add_kernel(project_dir, requirement, notice=_notice())
    if not (as_json or _quiet()):
        value = report.requirement
        import json

        click.echo(f"Added {report.repo_id} = {json.dumps(value) if isinstance(value, str) else value}")
    _render_lock(report.lock, as_json=as_json, check=False, quiet=_quiet())


@click.command()
@click.argument("repo_id", metavar="ORG/NAME")
@click.argument("project_dir", required=False, type=_PROJECT_DIR)
@_LEGACY_PROJECT
@_JSON_OPTION
@_QUIET_OPTION
def remove(repo_id: str, project_dir: Path | None, legacy_project: Path | None, as_json: bool, quiet: bool) -> None:
    """Remove a kernel from [tool.kernels.dependencies] of PROJECT_DIR (default .) and relock."""
    project_dir = _project_argument(project_dir, legacy_project)
    from kernel_deps.commands.edit import remove_kernel

    report = remove_kernel(project_dir, repo_id, notice=_notice())
    if not (as_json or _quiet()):
        click.echo(f"Removed {repo_id}")
    _render_lock(report.lock, as_json=as_json, check=False, quiet=_quiet())

"""What the ``kernels`` verbs share: their options and the helpers they print with.

``--json`` and ``-q`` (remembered in the context under :mod:`kernel_deps.cli.group`'s
keys, so that ``kernels -q COMMAND`` is ``kernels COMMAND -q``), the project folder
argument (:func:`project_argument`: the folder given, or the project found around the
working directory, :func:`discover_project`), ``--into`` and ``--target`` /
``--all-targets``; whether ``-q`` is in force (:func:`is_quiet`), the one missing-lock
error of a check (:func:`require_lock`), where a library function's notices go
(:func:`notice`) and columns of text (:func:`echo_table`). Imported by each verb's module, never by the group, so ``kernels
--help`` does not import it.
"""

from __future__ import annotations

from pathlib import Path

import click

from kernel_deps.cli.group import JSON_META, QUIET_META, remember

PROJECT_DIR = click.Path(file_okay=False, path_type=Path)


def discover_project(ctx: click.Context, param: click.Parameter, value):
    """The project folder argument's callback: the folder given, as given; without one, the
    project around the working directory (:func:`kernel_deps.project.discovery.find_project`),
    ``using FOLDER`` said once on stderr when that is not ``.`` (not with -q); when there is
    none, the one error naming where it looked (:func:`~kernel_deps.project.discovery.no_project_found`).

    click processes the options given on the command line before an argument left out, so
    ``-q`` is known here, wherever it was given. ``add`` and ``remove`` given the older
    ``--project`` take their folder from it."""
    if value not in (None, ()):
        return value
    if ctx.params.get("legacy_project") is not None:
        return None
    from kernel_deps.project.discovery import no_project_found, search_project

    search = search_project()
    found = search.folder
    if found is None:
        raise no_project_found(search)
    if found == Path.cwd():  # found: the working directory exists
        folder = Path(".")
    else:
        folder = found
        if not ctx.meta.get(QUIET_META):
            click.echo(f"using {found}", err=True)
    return (folder,) if param.multiple or param.nargs == -1 else folder


def project_argument(name: str = "project_dir", *, nargs: int = 1, metavar: str | None = None):
    """The project folder argument of every project command: optional; without it, the
    project is found around the working directory (:func:`discover_project`)."""
    return click.argument(name, nargs=nargs, required=False, default=None, type=None if metavar else PROJECT_DIR,
                          metavar=metavar, callback=discover_project)  # fmt: skip


# Every command that reports takes --json (its schema: docs/schemas/<command>.schema.json)
# and -q/--quiet; `kernels -q COMMAND` is the same as `kernels COMMAND -q`.
JSON_OPTION = click.option(
    "--json", "as_json", is_flag=True, callback=remember(JSON_META),
    help="Print machine-readable JSON (schema: docs/schemas/).",
)
QUIET_OPTION = click.option(
    "--quiet", "-q", is_flag=True, callback=remember(QUIET_META),
    help="Print nothing but errors and problems found; the exit code tells the rest.",
)


def into_option(what: str):
    """``--into DIR``, as download and sync take it: ``what`` is placed there, verified."""
    return click.option("--into", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
                        help=f"Also place exactly {what} in DIR, in the Hugging Face cache layout, verified.")  # fmt: skip


def target_options(target_help: str, all_help: str):
    """``--target NAME`` (repeatable) and ``--all-targets``, as download and verify take them."""

    def decorate(command):
        command = click.option("--all-targets", is_flag=True, help=all_help)(command)
        return click.option("--target", "targets", multiple=True, metavar="NAME", help=target_help)(command)

    return decorate


def require_lock(project_dir: Path) -> None:
    """The one missing-lock error (LockfileError, exit 2, as every command that reads a lock
    gives it) when ``<project_dir>/kernels.lock`` does not exist, before any network: for
    the checks of a lock (``lock --check``, ``sync --locked``), which would otherwise resolve first.
    pyproject.toml is judged first, as those checks judge it: its bad input is told before."""
    from kernel_deps.lock.model import lock_path

    path = lock_path(project_dir)
    if not (path.exists() or path.is_symlink()):
        from kernel_deps.lock.read import read_lock
        from kernel_deps.project.record import read_project_record

        project = read_project_record(project_dir)
        assert project is not None
        project.requirements, project.targets, project.publishers, project.policy  # noqa: B018 - each judged
        read_lock(path, purpose="use")  # raises the error every reader of a lock raises


def is_quiet() -> bool:
    """Whether -q was given, to the group or to the command."""
    return bool(click.get_current_context().meta.get(QUIET_META))


def notice():
    """Where a library function's notices go (waiting for another command): stderr, or nowhere with -q."""
    return None if is_quiet() else (lambda text: click.echo(text, err=True))


def echo_table(rows: list[tuple[str, ...]]) -> None:
    """Columns aligned by their widest cell, two spaces apart; the last one left ragged."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])


EXPORTS_HELP = (
    "Also list the layers and functions each locked kernel's build for this machine exports "
    "(read from its verified cached files, not imported)."
)


def echo_exports(project_dir: Path) -> None:
    """`tree --exports` and `verify --exports`: per locked kernel, what its build exports, or why not told."""
    from kernel_deps.layers.exports import project_exports

    found = project_exports(project_dir)
    click.echo("\nexports of this machine's builds (for kernel_deps.layers)")
    if found:
        echo_table([(f"  {kernel.repo_id}", kernel.describe()) for kernel in found])


"""``kernels tree``: the locked kernels as a dependency tree and the builds serving each target; the verb of
:mod:`kernel_deps.commands.tree`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kernel_deps.cli.group import echo_json
from kernel_deps.cli.options import EXPORTS_HELP, JSON_OPTION, QUIET_OPTION, echo_exports, echo_table, is_quiet, project_argument
from kernel_deps.cli.render_lock import short


@click.command()
@project_argument()
@click.option("--exports", is_flag=True, help=EXPORTS_HELP)
@JSON_OPTION
@QUIET_OPTION
def tree(project_dir: Path, exports: bool, as_json: bool, quiet: bool) -> None:
    """Show the locked kernels as a dependency tree, and the build serving each target and this machine."""
    from kernel_deps.commands.tree import tree_project

    if exports and as_json:
        raise click.UsageError("--exports lists as text only; leave out --json")
    report = tree_project(project_dir)
    if report.warning is not None:  # on stderr, -q or not: the lock is shown though it disagrees with pyproject.toml
        click.echo(f"warning: {report.warning}", err=True)
    if as_json:
        echo_json(report.to_json())
        return
    if is_quiet():
        return
    click.echo(f"{project_dir} ({report.lockfile.name})")
    drawing = _TREE_LINES if _stdout_can_write("".join(_TREE_LINES)) else _TREE_LINES_ASCII
    lines: list[str] = []
    for position, node in enumerate(report.roots):
        _node_lines(node, "", position == len(report.roots) - 1 and not report.missing, drawing, lines)
    for position, (repo_id, requirement) in enumerate(report.missing):
        branch = drawing[1] if position == len(report.missing) - 1 else drawing[0]
        lines.append(f"{branch}{repo_id} {requirement} -> not locked{_UNMET_MARK}")
    for line in lines:
        click.echo(line)
    for mark, meaning in _LEGEND:  # what each mark shown means
        if any(mark in line for line in lines):
            click.echo(f"{mark.strip()} {meaning}")
    for serving in (*report.targets, report.this_machine):
        title = serving.name or f"this machine ({serving.system.describe()})"
        click.echo(f"\n{title}")
        rows = [
            (f"  {repo_id}", (variant or "none") + _signed_by(serving.signers.get(repo_id)))
            for repo_id, variant in serving.variants.items()
        ]
        if rows:
            echo_table(rows)
    if exports:
        echo_exports(project_dir)


# The marks ending a line of the tree, and what the legend below it says of each.
_REPEATED_MARK = " (*)"
_UNMET_MARK = " (!)"
_LEGEND = (
    (_REPEATED_MARK, "shown in full above, not repeated"),
    (_UNMET_MARK, "kernels.lock does not meet this requirement; run 'kernels lock' (or 'kernels sync') to update it"),
)


def _signed_by(signer) -> str:
    """`` (signed by org/repo .github/workflows/build.yml@refs/heads/main)``, or nothing when unsigned."""
    if signer is None:
        return ""
    from kernel_deps.trust.signers import describe_signer

    return f" (signed by {describe_signer(signer.issuer, signer.repository, signer.workflow, signer.ref)})"


# A branch, the last branch and the line down past a branch, as ``tree`` draws them; and as
# ``tree --charset=ascii`` does, for an output whose encoding (cp1252, a Windows code page) has
# no box-drawing characters.
_TREE_LINES = ("├── ", "└── ", "│   ")
_TREE_LINES_ASCII = ("|-- ", "`-- ", "|   ")


def _stdout_can_write(text: str) -> bool:
    """Whether stdout's encoding has every character of ``text`` (a Windows console, which
    click writes to in UTF-16, says UTF-8)."""
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        text.encode(encoding)
    except (UnicodeError, LookupError):
        return False
    return True


def _node_lines(node, prefix: str, last: bool, drawing: tuple[str, str, str], lines: list[str]) -> None:
    branch, last_branch, down = drawing
    requirement = f" {node.requirement}" if node.requirement else ""
    locked = short(node.version, node.commit)
    marks = (_UNMET_MARK if node.unmet else "") + (_REPEATED_MARK if node.repeated else "")
    lines.append(f"{prefix}{last_branch if last else branch}{node.repo_id}{requirement} -> {locked}{marks}")
    below = prefix + ("    " if last else down)
    for position, child in enumerate(node.dependencies):
        _node_lines(child, below, position == len(node.dependencies) - 1, drawing, lines)

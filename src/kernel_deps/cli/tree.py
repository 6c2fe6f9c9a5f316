"""``kernels tree``: the locked kernels as a dependency tree and the builds serving each target; the verb of
:mod:`kernel_deps.commands.tree`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kernel_deps.cli.group import echo_json
from kernel_deps.cli.options import EXPORTS_HELP, JSON_OPTION, PROJECT_DIR, echo_exports, echo_table
from kernel_deps.cli.render_lock import short


@click.command()
@click.argument("project_dir", default=".", type=PROJECT_DIR)
@click.option("--exports", is_flag=True, help=EXPORTS_HELP)
@JSON_OPTION
def tree(project_dir: Path, exports: bool, as_json: bool) -> None:
    """Show the locked kernels as a dependency tree, and the build serving each target and this machine."""
    from kernel_deps.commands.tree import tree_project

    if exports and as_json:
        raise click.UsageError("--exports lists as text only; leave out --json")
    report = tree_project(project_dir)
    if as_json:
        echo_json(report.to_json())
        return
    click.echo(f"{project_dir} ({report.lockfile.name})")
    drawing = _TREE_LINES if _stdout_can_write("".join(_TREE_LINES)) else _TREE_LINES_ASCII
    for position, node in enumerate(report.roots):
        _echo_node(node, "", position == len(report.roots) - 1, drawing)
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


def _echo_node(node, prefix: str, last: bool, drawing: tuple[str, str, str] = _TREE_LINES) -> None:
    branch, last_branch, down = drawing
    requirement = f" {node.requirement}" if node.requirement else ""
    locked = short(node.version, node.commit)
    repeated = " (*)" if node.repeated else ""
    click.echo(f"{prefix}{last_branch if last else branch}{node.repo_id}{requirement} -> {locked}{repeated}")
    below = prefix + ("    " if last else down)
    for position, child in enumerate(node.dependencies):
        _echo_node(child, below, position == len(node.dependencies) - 1, drawing)

"""``kernels versions``, ``kernels outdated`` and ``kernels tree``: what a repo or a lock holds, shown."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kernel_deps.cli_common import _colour
from kernel_deps.cli_commands import _JSON_OPTION, _PROJECT_DIR, _QUIET_OPTION, _echo_json, _echo_table, _quiet
from kernel_deps.render import short


@click.command()
@click.argument("repo_id")
@_JSON_OPTION
@_QUIET_OPTION
def versions(repo_id: str, as_json: bool, quiet: bool) -> None:
    """List the versions (tags vX.Y.Z and branches vN) a kernel repo offers, newest first."""
    from kernel_deps.commands.versions import list_versions

    listing = list_versions(repo_id)
    if as_json:
        _echo_json(listing.to_json())
        return
    if _quiet():
        return

    legacy = " (legacy model repo)" if listing.is_legacy else ""
    if not listing.versions:
        click.echo(f"{repo_id}{legacy}: no versions (no vX.Y.Z tags or vN branches)")
        return
    click.echo(f"{repo_id}{legacy}")
    rows = [("VERSION", "KIND", "COMMIT", "VARIANTS")]
    rows += [(v.ref, v.kind, v.commit[:12], str(v.variants)) for v in listing.versions]
    _echo_table(rows)


@click.command()
@click.argument("project_dir", default=".", type=_PROJECT_DIR)
@_JSON_OPTION
@_QUIET_OPTION
@click.option("--exit-code", is_flag=True, help="Exit 1 when any pin has drifted (for CI).")
def outdated(project_dir: Path, as_json: bool, quiet: bool, exit_code: bool) -> None:
    """Show, per locked kernel, what --upgrade would take, newer releases and moved refs."""
    from kernel_deps.commands.outdated import outdated_project
    from kernel_deps.hub.redirects import describe_redirects

    report = outdated_project(project_dir)
    if as_json:
        _echo_json(report.to_json())
    elif not _quiet():
        rows = [("KERNEL", "LOCKED", "UPGRADE", "LATEST")]
        for k in report.kernels:
            rows.append((
                k.repo_id,
                short(k.locked_version, k.locked_commit),
                _upgrade_cell(k) if k.upgradable else "-",
                short(k.latest_version, k.latest_commit) if k.latest_version else "-",
            ))  # fmt: skip
        _echo_table(rows)
        for k in report.kernels:
            if k.redirects:
                then = _upgrade_cell(k) if k.upgradable else "nothing"
                click.echo(
                    f"{_colour('note:', fg='yellow')} {describe_redirects(k.redirects)}; "
                    f"kernels lock --upgrade would lock {then} in its place"
                )
            if k.ref_moved_to:
                changed = ", ".join(k.changed_variants) or "none"
                click.echo(
                    f"{_colour('note:', fg='yellow')} {k.repo_id}: {k.locked_version} now points at {k.ref_moved_to[:12]} (locked "
                    f"{k.locked_commit[:12]}); variants that would change: {changed}"
                )
        if not report.drifted:
            click.echo(f"all {len(report.kernels)} locked kernels are current")
    if exit_code and report.drifted:
        sys.exit(1)


def _upgrade_cell(k) -> str:
    """What --upgrade would lock, with the repo it lies in when redirects lead elsewhere."""
    upgrade = short(k.upgrade_version, k.upgrade_commit)
    return f"{k.upgrade_repo_id} {upgrade}" if k.redirects else upgrade


# -- kernels tree -----------------------------------------------------------------------


@click.command()
@click.argument("project_dir", default=".", type=_PROJECT_DIR)
@_JSON_OPTION
def tree(project_dir: Path, as_json: bool) -> None:
    """Show the locked kernels as a dependency tree, and the build serving each target and this machine."""
    from kernel_deps.commands.tree import tree_project

    report = tree_project(project_dir)
    if as_json:
        _echo_json(report.to_json())
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
            _echo_table(rows)


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

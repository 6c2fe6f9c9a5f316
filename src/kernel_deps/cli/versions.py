"""``kernels versions``: the versions a kernel repo offers; the verb of :mod:`kernel_deps.commands.versions`."""

from __future__ import annotations

import click

from kernel_deps.cli.group import echo_json
from kernel_deps.cli.options import JSON_OPTION, QUIET_OPTION, echo_table, is_quiet


@click.command()
@click.argument("repo_id")
@JSON_OPTION
@QUIET_OPTION
def versions(repo_id: str, as_json: bool, quiet: bool) -> None:
    """List the versions (tags vX.Y.Z and branches vN) a kernel repo offers, newest first."""
    from kernel_deps.commands.versions import list_versions

    listing = list_versions(repo_id)
    if as_json:
        echo_json(listing.to_json())
        return
    if is_quiet():
        return

    legacy = " (legacy model repo)" if listing.is_legacy else ""
    if not listing.versions:
        click.echo(f"{repo_id}{legacy}: no versions (no vX.Y.Z tags or vN branches)")
        return
    click.echo(f"{repo_id}{legacy}")
    rows = [("VERSION", "KIND", "COMMIT", "VARIANTS")]
    rows += [(v.ref, v.kind, v.commit[:12], str(v.variants)) for v in listing.versions]
    echo_table(rows)

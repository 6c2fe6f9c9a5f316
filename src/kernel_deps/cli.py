"""The ``kernels`` command (also installed as ``kernel-deps``): parse, call, render, exit."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor

import click

from kernel_deps import __version__
from kernel_deps.errors import KernelDepsError
from kernel_deps.hub import HubClient
from kernel_deps.versions import versions_from_refs


class _Group(click.Group):
    """Renders every KernelDepsError as one line on stderr, with its exit code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KernelDepsError as exc:
            click.echo(f"error: {exc.message}", err=True)
            sys.exit(exc.exit_code)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="kernel-deps")
def main() -> None:
    """Lock, download, verify and load compute kernels from the Hugging Face Hub."""


@main.command()
@click.argument("repo_id")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def versions(repo_id: str, as_json: bool) -> None:
    """List the versions (tags vX.Y.Z and branches vN) a kernel repo offers, newest first."""
    hub = HubClient()
    listing = hub.list_refs(repo_id)
    found = versions_from_refs(listing.refs)
    commits = sorted({v.ref.commit for v in found})
    with ThreadPoolExecutor(max_workers=8) as pool:
        counts = dict(zip(commits, pool.map(lambda c: len(hub.list_variants(repo_id, c)), commits)))

    if as_json:
        payload = {
            "repo_id": repo_id,
            "repo_type": listing.repo_type,
            "versions": [
                {
                    "name": v.ref.name,
                    "kind": v.ref.kind,
                    "version": str(v.version),
                    "commit": v.ref.commit,
                    "variants": counts[v.ref.commit],
                }
                for v in found
            ],
        }
        click.echo(json.dumps(payload, indent=2))
        return

    legacy = " (legacy model repo)" if listing.repo_type != "kernel" else ""
    if not found:
        click.echo(f"{repo_id}{legacy}: no versions (no vX.Y.Z tags or vN branches)")
        return
    click.echo(f"{repo_id}{legacy}")
    rows = [("VERSION", "KIND", "COMMIT", "VARIANTS")]
    rows += [(v.ref.name, v.ref.kind, v.ref.commit[:12], str(counts[v.ref.commit])) for v in found]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[3])

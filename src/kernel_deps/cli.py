"""The ``kernels`` command (also installed as ``kernel-deps``): parse, call, render, exit."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from kernel_deps import __version__
from kernel_deps.errors import KernelDepsError, UsageError
from kernel_deps.hub import HubClient
from kernel_deps.settings import HUB_WORKERS
from kernel_deps.versions import default_requirement, versions_from_refs

_PROJECT_DIR = click.Path(file_okay=False, path_type=Path)


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
    with hub.operation():
        listing = hub.list_refs(repo_id)
        found = versions_from_refs(listing.refs)
        commits = sorted({v.ref.commit for v in found})
        with ThreadPoolExecutor(max_workers=HUB_WORKERS) as pool:
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


def _render_outcome(outcome, *, as_json: bool, check: bool) -> None:
    name = outcome.path.name
    if as_json:
        payload = {
            "lockfile": str(outcome.path),
            "up_to_date": outcome.up_to_date,
            "written": outcome.written,
            "changes": outcome.changes,
            "kernels": [
                {"repo_id": k.repo_id, "version": k.version, "sha": k.sha, "variants": len(k.variants)}
                for k in outcome.lock.kernels
            ],
        }
        click.echo(json.dumps(payload, indent=2))
    elif check:
        if outcome.up_to_date:
            click.echo(f"{name} is up to date ({len(outcome.lock.kernels)} kernels)")
        else:
            why = "is missing" if outcome.previous is None and not outcome.path.exists() else "is out of date"
            click.echo(f"{name} {why}; run 'kernels lock' to update it:", err=True)
            for line in outcome.changes:
                click.echo(f"  {line}", err=True)
    else:
        for line in outcome.changes:
            click.echo(line)
        state = f"wrote {name}" if outcome.written else f"{name} is up to date"
        click.echo(f"Locked {len(outcome.lock.kernels)} kernels; {state}")
    if check and not outcome.up_to_date:
        sys.exit(1)


@main.command()
@click.argument("project_dir", default=".", type=_PROJECT_DIR)
@click.option("--check", is_flag=True, help="Exit 1 if kernels.lock is missing or would change; write nothing.")
@click.option("--upgrade", "-U", is_flag=True, help="Ignore locked pins: take the newest allowed versions.")
@click.option("--upgrade-package", "-P", "upgrade_packages", multiple=True, metavar="ORG/NAME",
              help="Release the pin of one kernel (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
def lock(project_dir: Path, check: bool, upgrade: bool, upgrade_packages: tuple[str, ...], as_json: bool) -> None:
    """Resolve [tool.kernels.dependencies] into kernels.lock (commits and variant hashes)."""
    from kernel_deps.locking import lock_project

    outcome = lock_project(project_dir, upgrade=upgrade, upgrade_packages=upgrade_packages, write=not check)
    _render_outcome(outcome, as_json=as_json, check=check)


@main.command()
@click.argument("requirement", metavar="ORG/NAME[SPEC]")
@click.option("--project", "project_dir", default=".", type=_PROJECT_DIR, help="The project directory.")
def add(requirement: str, project_dir: Path) -> None:
    """Add a kernel to [tool.kernels.dependencies] and relock.

    SPEC is a PEP 440 range (kernels-community/activation>=1.2,<2) or @REVISION; without
    one, the newest release's major series is taken (>=X.Y.Z,<X+1).
    """
    from kernel_deps.locking import edit_and_relock
    from kernel_deps.spec import add_requirement, parse_add_argument

    repo_id, value = parse_add_argument(requirement)
    hub = HubClient()
    with hub.operation():  # one time budget for the look-up and the relock
        if value is None:
            value = default_requirement(versions_from_refs(hub.list_refs(repo_id).refs))
            if value is None:
                raise UsageError(f"{repo_id} has no versions (no vX.Y.Z tags or vN branches); add it as {repo_id}@REVISION")
        source = str(project_dir / "pyproject.toml")
        outcome = edit_and_relock(project_dir, lambda text: add_requirement(text, repo_id, value, source=source), hub=hub)
    click.echo(f"Added {repo_id} = {json.dumps(value) if isinstance(value, str) else value}")
    _render_outcome(outcome, as_json=False, check=False)


@main.command()
@click.argument("repo_id", metavar="ORG/NAME")
@click.option("--project", "project_dir", default=".", type=_PROJECT_DIR, help="The project directory.")
def remove(repo_id: str, project_dir: Path) -> None:
    """Remove a kernel from [tool.kernels.dependencies] and relock."""
    from kernel_deps.locking import edit_and_relock
    from kernel_deps.spec import remove_requirement

    source = str(project_dir / "pyproject.toml")
    outcome = edit_and_relock(project_dir, lambda text: remove_requirement(text, repo_id, source=source))
    click.echo(f"Removed {repo_id}")
    _render_outcome(outcome, as_json=False, check=False)


def _download_progress(quiet: bool):
    from kernel_deps.download import Progress

    class Lines(Progress):
        def variant_done(self, task, *, cached, files, size):
            state = "already in the cache, verified" if cached else f"downloaded {files} files ({size:,} bytes), verified"
            click.echo(f"{task.label}: {state}")

        def message(self, text):
            click.echo(text, err=True)

    class Bar(Lines):
        def start(self, tasks):
            from tqdm import tqdm

            self.bar = tqdm(total=None, unit="B", unit_scale=True, desc="kernels", leave=False)

        def add_bytes(self, count):
            self.bar.update(count)

        def variant_done(self, task, **kwargs):
            self.bar.clear()
            super().variant_done(task, **kwargs)

        def message(self, text):
            self.bar.clear()
            super().message(text)

    if quiet:
        return Progress()
    return Bar() if sys.stderr.isatty() else Lines()


@main.command()
@click.argument("project_dir", default=".", type=_PROJECT_DIR)
@click.option("--all-variants", is_flag=True, help="Download every locked variant, not just this machine's.")
@click.option("--variant", "variants", multiple=True, metavar="NAME",
              help="Download this variant (repeatable), e.g. to build an image for another machine.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
def download(project_dir: Path, all_variants: bool, variants: tuple[str, ...], quiet: bool) -> None:
    """Fetch exactly what kernels.lock pins into the Hugging Face cache, verified."""
    from kernel_deps.download import download_project

    report = download_project(project_dir, all_variants=all_variants, variants=variants, progress=_download_progress(quiet))
    if not quiet:
        click.echo(
            f"{len(report.fetched) + len(report.already_cached)} variants present and verified "
            f"({len(report.fetched)} downloaded, {report.files_fetched} files, {report.bytes_fetched:,} bytes)"
        )


# -- kernels verify ---------------------------------------------------------------------


@main.command()
@click.argument("project_dir", default=".", type=_PROJECT_DIR)
@click.option("--online", is_flag=True,
              help="Also ask the Hub: do the locked commits still exist, do the locked tags and branches still point at them?")
@click.option("--require-cached", is_flag=True, help="Also fail when this machine's variant of a kernel is not in the cache.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable report.")
def verify(project_dir: Path, online: bool, require_cached: bool, as_json: bool) -> None:
    """Check that pyproject.toml, kernels.lock and the cache agree (no network unless --online)."""
    from dataclasses import asdict

    from kernel_deps.verify import FILE_KINDS, verify_project

    try:
        report = verify_project(project_dir, online=online, require_cached=require_cached)
    except KernelDepsError as exc:
        if as_json:  # CI tools still get JSON; the group prints the one-line error and exits
            click.echo(json.dumps({"ok": False, "error": exc.message, "problems": [], "verified": []}, indent=2))
        raise
    if as_json:
        payload = {
            "ok": report.ok,
            "lockfile": str(report.lockfile),
            "online": report.online,
            "kernels": report.kernels,
            "problems": [asdict(problem) for problem in report.problems],
            "verified": [
                {"repo_id": c.repo_id, "commit": c.commit, "variant": c.variant, "hash": c.actual_hash, "path": str(c.path)}
                for c in report.verified
            ],
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        for problem in report.problems:
            click.echo(problem.message)
            if problem.expected is not None or problem.got is not None:
                click.echo(f"    Expected: {problem.expected or '(none)'}")
                click.echo(f"    Got:      {problem.got or '(none)'}")
        count = len(report.problems)
        if count:
            click.echo(f"{count} problem{'s' if count != 1 else ''} found")
            if any(p.kind in FILE_KINDS for p in report.problems):
                click.echo("hint: the cache differs from kernels.lock; run 'kernels download' to replace what differs")
        else:
            hub = "; every locked commit, tag and branch checked on the Hub" if report.online else ""
            click.echo(
                f"kernels.lock, pyproject.toml and the cache agree "
                f"({report.kernels} kernels, {len(report.verified)} cached variants verified){hub}"
            )
    if not report.ok:
        sys.exit(1)

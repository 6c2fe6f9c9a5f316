"""The ``kernels`` subcommands: parse their options, call one library function, render.

click's decorators build every option of every command when this module is imported, so
it is imported only when a command runs or its own help is asked for: ``kernels --help``
lists the commands from :data:`kernel_deps.cli.COMMAND_TABLE`, the group
(:func:`kernel_deps.cli.main`) asks this module for a command by its name
(:data:`COMMANDS`), and ``tests/test_cli_table.py`` holds the table and these
definitions together.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kernel_deps.cli_common import _JSON_META, _QUIET_META, _colour, _echo_json, _remember
from kernel_deps.core.errors import UsageError
from kernel_deps.render import change_line, note_line, short

# Collects the commands defined below; the group users run is kernel_deps.cli.main.
_defined = click.Group("kernels")

_PROJECT_DIR = click.Path(file_okay=False, path_type=Path)


# Every command that reports takes --json (its schema: docs/schemas/<command>.schema.json)
# and -q/--quiet; `kernels -q COMMAND` is the same as `kernels COMMAND -q`.
_JSON_OPTION = click.option(
    "--json", "as_json", is_flag=True, callback=_remember(_JSON_META),
    help="Print machine-readable JSON (schema: docs/schemas/).",
)
_QUIET_OPTION = click.option(
    "--quiet", "-q", is_flag=True, callback=_remember(_QUIET_META),
    help="Print nothing but errors and problems found; the exit code tells the rest.",
)


def _target_options(target_help: str, all_help: str):
    """``--target NAME`` (repeatable) and ``--all-targets``, as download and verify take them."""

    def decorate(command):
        command = click.option("--all-targets", is_flag=True, help=all_help)(command)
        return click.option("--target", "targets", multiple=True, metavar="NAME", help=target_help)(command)

    return decorate


def _quiet() -> bool:
    return bool(click.get_current_context().meta.get(_QUIET_META))


def _notice():
    """Where a library function's notices go (waiting for another command): stderr, or nowhere with -q."""
    return None if _quiet() else (lambda text: click.echo(text, err=True))


@_defined.command()
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


def _echo_table(rows: list[tuple[str, ...]]) -> None:
    """Columns aligned by their widest cell, two spaces apart; the last one left ragged."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])


def _render_lock(report, *, as_json: bool, check: bool, quiet: bool = False) -> None:
    """A lock report (also add's and remove's relock): --json, lock --check's verdict, or the changes."""
    name = report.path.name
    changes = [change_line(change) for change in report.changes]
    notes = [note_line(note) for note in report.notes]
    if as_json:
        _echo_json(report.to_json())
    elif check:
        if report.up_to_date:
            if not quiet:
                click.echo(f"{name} is up to date ({len(report.lock.kernels)} kernels)")
        else:
            why = "is out of date" if report.existed else "is missing"
            # What the prior lock breaks: a requirement, a dependency's pin, a target added since.
            for problem in (*report.problems, *report.uncovered):
                click.echo(problem.message, err=True)
            click.echo(f"{name} {why}; run 'kernels lock' to update it{':' if changes else ''}", err=True)
            for line in changes:
                click.echo(f"  {line}", err=True)
        for line in notes:
            click.echo(f"note: {line}", err=True)
    elif not quiet:
        if report.converted_from is not None:
            verb = "Converted" if report.written else "Would convert"
            click.echo(
                f"{verb} {name} from the {report.converted_from} format to kernel-deps' "
                "(its pins are kept; 'kernels export' writes the old format again)"
            )
        for line in changes:
            click.echo(line)
        if not changes and not report.up_to_date:  # offline: why it would change, not how
            for problem in report.problems:
                click.echo(problem.message)
        for line in notes:
            click.echo(f"note: {line}")
        if report.written:
            state = f"wrote {name}"
        elif report.up_to_date:
            state = f"{name} is up to date"
        else:
            state = f"would update {name} (dry run: nothing written)"
        click.echo(f"Locked {len(report.lock.kernels)} kernels; {state}")
    if check and not report.up_to_date:
        sys.exit(1)


@_defined.command()
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
    from kernel_deps.commands.lock import lock_project

    if check and dry_run:
        raise UsageError("--check and --dry-run exclude each other; pass one of them")
    write = not (check or dry_run)
    report = lock_project(
        project_dir,
        upgrade=upgrade,
        upgrade_packages=upgrade_packages,
        write=write,
        notice=_notice(),
        explain_offline=not write,
    )
    _render_lock(report, as_json=as_json, check=check, quiet=_quiet())


@_defined.command()
@click.argument("project_dir", default=".", type=_PROJECT_DIR)
@click.option("--format", "format_name", required=True, metavar="FORMAT",
              help="kernels-0.17: the lock Hugging Face kernels 0.17 reads; kernels-0.16: the one 0.16 and older read.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
              help="Write to FILE instead of stdout ('-': stdout); not the project's kernels.lock or pyproject.toml.")
def export(project_dir: Path, format_name: str, output: Path | None) -> None:
    """Write kernels.lock in the format of another tool (commit pins, transitive kernels included)."""
    from kernel_deps.commands.export import export_project

    if output is not None and str(output) == "-":
        output = None
    report = export_project(project_dir, format_name, output=output)
    if report.output is None:
        click.echo(report.text)
        return
    click.echo(f"Wrote {report.output} ({report.format} format, {report.kernels} kernels)", err=True)


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


@_defined.command()
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


@_defined.command()
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


def _download_progress(quiet: bool, lines: bool = True):
    """Progress for a download: a bar only on a terminal; a line per variant on stdout
    unless ``lines`` is off (--json, whose stdout is the report); messages on stderr."""
    from kernel_deps.commands.download import Progress

    class Lines(Progress):
        def variant_done(self, task, *, cached, files, size):
            if lines:
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


@_defined.command()
@click.argument("project_dir", default=".", type=_PROJECT_DIR)
@click.option("--all-variants", is_flag=True, help="Download every locked variant, not just this machine's.")
@click.option("--variant", "variants", multiple=True, metavar="NAME",
              help="Download this variant (repeatable), e.g. to build an image for another machine.")
@_target_options(
    "Download the build serving this deployment target (repeatable), e.g. torch213-cpu-aarch64-darwin.",
    "Download the builds serving every target [tool.kernels] declares.",
)
@click.option("--into", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Also place exactly these variants in DIR, in the Hugging Face cache layout, verified.")
@_JSON_OPTION
@_QUIET_OPTION
def download(
    project_dir: Path,
    all_variants: bool,
    variants: tuple[str, ...],
    targets: tuple[str, ...],
    all_targets: bool,
    into: Path | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Fetch exactly what kernels.lock pins into the Hugging Face cache, verified."""
    from kernel_deps.commands.download import download_project

    progress = _download_progress(_quiet(), lines=not as_json)
    report = download_project(
        project_dir, all_variants=all_variants, variants=variants, targets=targets, all_targets=all_targets,
        progress=progress, into=into,
    )  # fmt: skip
    if as_json:
        _echo_json(report.to_json())
    else:
        for line in report.into.problems if report.into is not None else ():
            click.echo(line)
        if not _quiet():
            placed = f"; placed in {report.into.folder}, verified" if report.into is not None and report.into.ok else ""
            click.echo(
                f"{len(report.fetched) + len(report.already_cached)} variants present and verified "
                f"({len(report.fetched)} downloaded, {report.files_fetched} files, {report.bytes_fetched:,} bytes)"
                f"{placed}"
            )
    if report.into is not None and not report.into.ok:
        sys.exit(1)


@_defined.command("to-wheel")
@click.argument("source", default=".", metavar="[PROJECT_DIR | ORG/NAME@REVISION]")
@click.option("--output", "-o", required=True, type=click.Path(path_type=Path), metavar="DIR",
              help="The folder the wheels and requirements.txt go into (created).")
@click.option("--all-variants", is_flag=True, help="A wheel of every locked variant, not just this machine's.")
@_target_options(
    "A wheel of the build serving this deployment target (repeatable); one requirements file per target.",
    "As --target, for every target [tool.kernels] declares.",
)
@click.option("--trust", "trusted", multiple=True, metavar="ORG[/NAME]",
              help="With ORG/NAME@REVISION: allow this publisher (or repo) besides those the Hub trusts.")
@_JSON_OPTION
@_QUIET_OPTION
def to_wheel(
    source: str,
    output: Path,
    all_variants: bool,
    targets: tuple[str, ...],
    all_targets: bool,
    trusted: tuple[str, ...],
    as_json: bool,
    quiet: bool,
) -> None:
    """Write the locked kernels as wheels (verified bytes only) and a hash-pinned requirements.txt."""
    from kernel_deps.commands.to_wheel import wheels_from_kernel, wheels_from_project

    progress = _download_progress(_quiet(), lines=False)
    if "@" in source and not Path(source).is_dir():
        if all_targets:
            raise UsageError("--all-targets reads a project's targets; with ORG/NAME@REVISION pass --target NAME")
        report = wheels_from_kernel(source, output, trusted=trusted, all_variants=all_variants, targets=targets,
                                    progress=progress)  # fmt: skip
    else:
        if trusted:
            raise UsageError("--trust is for ORG/NAME@REVISION; a project's publishers are in [tool.kernels.trust]")
        report = wheels_from_project(Path(source), output, all_variants=all_variants, targets=targets,
                                     all_targets=all_targets, progress=progress)  # fmt: skip
    if as_json:
        _echo_json(report.to_json())
    elif not _quiet():
        for wheel in report.wheels:
            click.echo(f"{wheel.spec.repo_id} {wheel.spec.variant}: {wheel.path.name}")
        pinned = ", ".join(str(r.path) for r in report.requirements)
        pinned_in = f"; pinned in {pinned}" if pinned else ""
        click.echo(f"Wrote {len(report.wheels)} wheels to {report.output}{pinned_in}")


# -- kernels verify ---------------------------------------------------------------------


@_defined.command()
@click.argument("project_dir", default=".", type=_PROJECT_DIR)
@click.option("--online", is_flag=True,
              help="Also ask the Hub: do the locked commits still exist, do the locked tags and branches still point at them?")
@click.option("--require-cached", is_flag=True, help="Also fail when this machine's variant of a kernel is not in the cache.")
@_target_options(
    "Also fail when the build serving this deployment target is not in the cache (repeatable).",
    "As --target, for every target [tool.kernels] targets declares.",
)
@_JSON_OPTION
@_QUIET_OPTION
def verify(
    project_dir: Path,
    online: bool,
    require_cached: bool,
    targets: tuple[str, ...],
    all_targets: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Check that pyproject.toml, kernels.lock and the cache agree (no network unless --online)."""
    from kernel_deps.commands.verify import FILE_KINDS, WHEEL_KINDS, verify_project

    report = verify_project(
        project_dir, online=online, require_cached=require_cached, targets=targets, all_targets=all_targets
    )
    if as_json:
        _echo_json(report.to_json())
    else:
        for notice in () if _quiet() else report.notices:
            click.echo(f"{_colour('note:', fg='yellow')} {notice.message}")
        for problem in report.problems:
            click.echo(problem.message)
            if problem.expected is not None or problem.got is not None:
                click.echo(f"    Expected: {problem.expected or '(none)'}")
                click.echo(f"    Got:      {problem.got or '(none)'}")
        count = len(report.problems)
        if _quiet():
            pass
        elif count:
            click.echo(f"{count} problem{'s' if count != 1 else ''} found")
            if any(p.kind in FILE_KINDS for p in report.problems):
                click.echo(f"{_colour('hint:', fg='cyan')} the cache differs from kernels.lock; run 'kernels download' to replace what differs")
            if any(p.kind in WHEEL_KINDS for p in report.problems):
                hint = _colour("hint:", fg="cyan")
                click.echo(f"{hint} an installed kernel wheel differs from kernels.lock; reinstall "
                           "the wheels 'kernels to-wheel' writes from this lock")  # fmt: skip
        else:
            hub = "; every locked commit, tag and branch checked on the Hub" if report.online else ""
            wheels = f", {len(report.wheels)} installed kernel wheels verified" if report.wheels else ""
            click.echo(
                f"kernels.lock, pyproject.toml and the cache agree "
                f"({report.kernels} kernels, {len(report.verified)} cached variants verified{wheels}){hub}"
            )
    if not report.ok:
        sys.exit(1)


# -- kernels sync -----------------------------------------------------------------------


@_defined.command()
@click.argument("project_dir", default=".", type=_PROJECT_DIR)
@click.option("--locked", is_flag=True,
              help="Exit 1 if kernels.lock is missing or out of date; write and fetch nothing.")
@click.option("--frozen", is_flag=True, help="Use kernels.lock as it is; never check pyproject.toml for changes.")
@_target_options(
    "Download and verify the build serving this deployment target (repeatable), instead of this machine's.",
    "As --target, for every target [tool.kernels] declares.",
)
@click.option("--into", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Also place exactly the locked variants in DIR, in the Hugging Face cache layout, verified.")
@_JSON_OPTION
@_QUIET_OPTION
def sync(
    project_dir: Path,
    locked: bool,
    frozen: bool,
    targets: tuple[str, ...],
    all_targets: bool,
    into: Path | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Lock if pyproject.toml changed, download the locked kernels, verify them (one step)."""
    from kernel_deps.commands.sync import sync_project

    report = sync_project(
        project_dir, locked=locked, frozen=frozen, targets=targets, all_targets=all_targets, into=into,
        progress=_download_progress(_quiet(), lines=not as_json), notice=_notice(),
    )  # fmt: skip
    if as_json:
        _echo_json(report.to_json())
    elif report.lock_state == "out-of-date":
        _render_lock(report.lock, as_json=False, check=True, quiet=_quiet())
    else:
        if report.lock_state in ("updated", "created") and not _quiet():
            for line in (change_line(change) for change in report.lock.changes):
                click.echo(line)
        for line in report.messages:
            click.echo(line)
        if not _quiet():
            name = report.lockfile.name
            lock_text = {"up-to-date": f"{name} up to date", "updated": f"wrote {name}",
                         "created": f"wrote {name}", "frozen": f"{name} used as it is"}[report.lock_state]  # fmt: skip
            download = report.download
            present = len(download.fetched) + len(download.already_cached)
            where = f"; placed in {report.into.folder}, verified" if report.into is not None and report.ok else ""
            verdict = "verified" if report.ok else f"{len(report.messages)} problems found"
            click.echo(
                f"Synced {report.verify.kernels} kernels: {lock_text}; {present} variants present, {verdict} "
                f"({len(download.fetched)} downloaded, {download.files_fetched} files, {download.bytes_fetched:,} bytes)"
                f"{where}"
            )
    if not report.ok:
        sys.exit(1)


# -- kernels cache prune ----------------------------------------------------------------


@_defined.group()
def cache() -> None:
    """Manage the kernel cache."""


@cache.command()
@click.argument("project_dirs", nargs=-1, type=_PROJECT_DIR)
@click.option("--dry-run", is_flag=True, help="List what would be removed, with sizes; remove nothing.")
@_JSON_OPTION
@_QUIET_OPTION
def prune(project_dirs: tuple[Path, ...], dry_run: bool, as_json: bool, quiet: bool) -> None:
    """Remove every kernel commit no PROJECT_DIR's kernels.lock pins (default: .), and stale downloads."""
    from kernel_deps.commands.prune import prune_cache

    report = prune_cache(project_dirs or (Path("."),), dry_run=dry_run)
    if as_json:
        _echo_json(report.to_json())
        return
    if _quiet():
        return
    for entry in report.removed:
        click.echo(f"{'would remove' if dry_run else 'removed'} {entry.kind} {entry.path} ({entry.size:,} bytes)")
    verb = "Would free" if dry_run else "Freed"
    click.echo(f"{verb} {report.bytes:,} bytes ({len(report.removed)} entries); kept {len(report.kept)} locked commits")


@_defined.command()
@click.argument("project_dir", default=".", type=_PROJECT_DIR)
@_JSON_OPTION
@_QUIET_OPTION
@click.option("--exit-code", is_flag=True, help="Exit 1 when any pin has drifted (for CI).")
def outdated(project_dir: Path, as_json: bool, quiet: bool, exit_code: bool) -> None:
    """Show, per locked kernel, what --upgrade would take, newer releases and moved refs."""
    from kernel_deps.commands.outdated import outdated_project
    from kernel_deps.hub.view import describe_redirects

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


@_defined.command()
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
    from kernel_deps.core.signers import describe_signer

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


# Every command by its name, as kernel_deps.cli.main finds them.
COMMANDS: dict[str, click.Command] = _defined.commands

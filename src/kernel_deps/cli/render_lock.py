"""A lock report as ``kernels lock``, ``add``, ``remove`` and ``sync`` print it, and the text of its records.

The commands return records (:mod:`kernel_deps.commands.lock`): a lock change is printed
as its ``+ - ~`` line (:func:`change_line`), a note as its sentence (:func:`note_line`), a
pinned version and commit in short (:func:`short`); :func:`echo_lock_report` prints a
whole report, as text or (``--json``) as the record itself. The line functions are pure
(no I/O, no click) and serve library callers who want the lines the CLI prints; click is
imported only to print a report.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from kernel_deps.core.settings import BUILD_DIR, LOCK_NAME

if TYPE_CHECKING:  # `kernels --help` renders nothing and imports no command
    from kernel_deps.resolve.locking import LockReport
    from kernel_deps.lock.diff import LockChange, LockedPin
    from kernel_deps.resolve.notes import LockNote

# How many passed-over versions a held-back note names.
HELD_BACK_SHOWN = 3


def short(version: str | None, commit: str | None) -> str:
    """``v1.2.0 (0123456789ab)``, or the short commit alone when there is no version."""
    return f"{version} ({commit[:12]})" if version and commit else (commit or "")[:12]


def _pin(pin: LockedPin | None) -> str:
    if pin is None:
        return ""
    return f"{pin.version} ({pin.commit[:12]})" if pin.version else f"({pin.commit[:12]})"


def _spec(requirement: str | None) -> str:
    return repr(requirement) if requirement is not None else "(none, transitive)"


def change_line(change: LockChange) -> str:
    """The line ``kernels lock`` prints for one change: ``+`` added, ``-`` removed, ``~`` changed."""
    repo_id, action = change.repo_id, change.action
    if action == "added":
        return f"+ {repo_id} {_pin(change.after)}"
    if action == "removed":
        return f"- {repo_id} {_pin(change.before)}"
    if action == "updated":
        return f"~ {repo_id} {_pin(change.before)} -> {_pin(change.after)}"
    if action in ("variant-added", "variant-removed"):
        return f"~ {repo_id}: variant {change.variant} {action.removeprefix('variant-')}"
    if action == "variant-hash-changed":
        return f"~ {repo_id}: variant {change.variant} hash changed"
    if action == "requirement-changed":
        before, after = change.requirement or (None, None)
        return f"~ {repo_id}: requirement {_spec(before)} -> {_spec(after)}"
    if action == "dependency-added":
        return f"~ {repo_id}: now depends on {change.dependency}"
    if action == "dependency-removed":
        return f"~ {repo_id}: no longer depends on {change.dependency}"
    if action in ("requires-recorded", "requires-changed"):
        before, after = change.requires or (None, ())
        shown = " and ".join(map(repr, after))
        if before is None:
            return f"~ {repo_id}: records that it requires {change.dependency} {shown} (its kernel-depends)"
        return f"~ {repo_id}: requires {change.dependency} {' and '.join(map(repr, before))} -> {shown}"
    if action == "layout-changed":
        return f"~ {LOCK_NAME}: layout differs from what kernels lock writes"
    raise ValueError(f"unknown lock change {action!r}")


def note_line(note: LockNote) -> str:
    """The text after ``note:`` for one note of a lock run."""
    if note.kind == "redirect-followed":
        from kernel_deps.hub.redirects import describe_redirects

        return f"{describe_redirects(note.redirects)}; locked {note.redirects[-1]}"
    locked = note.locked
    assert locked is not None
    if note.kind == "held-back":
        reasons = [
            f"{p.version} has no build for {', '.join(p.missing)}" for p in note.passed_over[:HELD_BACK_SHOWN]
        ]
        if len(note.passed_over) > HELD_BACK_SHOWN:
            reasons.append(f"{len(note.passed_over) - HELD_BACK_SHOWN} more newer versions neither")
        return f"{note.repo_id} {locked.version or locked.commit[:12]} ({'; '.join(reasons)})"
    if note.kind == "held-back-unsigned":
        reasons = [f"{p.version}: {p.signature}" for p in note.passed_over[:HELD_BACK_SHOWN]]
        if len(note.passed_over) > HELD_BACK_SHOWN:
            reasons.append(f"{len(note.passed_over) - HELD_BACK_SHOWN} more newer versions neither")
        pin = locked.version or locked.commit[:12]
        return f"{note.repo_id} {pin}, the newest version signed as required ({'; '.join(reasons)})"
    if note.kind == "skipped-build-folders":
        names = ", ".join(f"{BUILD_DIR}/{name}" for name in note.folders)
        why = "not a build variant name kernel-deps knows; not locked"
        return f"{note.repo_id} {_pin(locked)}: skipped {names} ({why})"
    raise ValueError(f"unknown lock note {note.kind!r}")


def echo_lock_report(report: LockReport, *, as_json: bool, check: bool, quiet: bool = False) -> None:
    """A lock report (also add's and remove's relock): --json, lock --check's verdict, or the changes."""
    import click

    from kernel_deps.cli.group import echo_json

    name = report.path.name
    changes = [change_line(change) for change in report.changes]
    notes = [note_line(note) for note in report.notes]
    if as_json:
        echo_json(report.to_json())
    elif check:
        if report.up_to_date:
            if not quiet:
                click.echo(f"{name} is up to date ({_kernels(len(report.lock.kernels))})")
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
        click.echo(f"Locked {_kernels(len(report.lock.kernels))}; {state}")
    if check and not report.up_to_date:
        sys.exit(1)


def _kernels(count: int) -> str:
    """``1 kernel``, ``2 kernels`` (:func:`kernel_deps.cli.group.counted`, without importing the group)."""
    return f"{count:,} kernel{'' if count == 1 else 's'}"

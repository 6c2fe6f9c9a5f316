"""The ``kernels`` command group (also installed as ``kernel-deps``): parse, call, render, exit.

The commands are defined in the modules of :mod:`kernel_deps.cli` named like the verbs of
:mod:`kernel_deps.commands` (``kernels lock`` in :mod:`kernel_deps.cli.lock`, ``kernels
add`` and ``remove`` in :mod:`kernel_deps.cli.edit`, ...), whose click decorators build
every option of a command, and a command's module is imported only when that command runs
or its own help is asked for. ``kernels --help`` lists them from :data:`COMMAND_TABLE`
(click's documented pattern of lazily loaded subcommands), which names each command's
module.

Every command line passes through this group, so it also holds what the group and every
command share and ``--help`` needs: the context keys ``--json`` and ``-q`` are remembered
under (:data:`JSON_META`, :data:`QUIET_META`, :func:`remember`), JSON output
(:func:`echo_json`) and colour (:func:`colour`). At module level this imports only click,
``kernel_deps`` (``__version__``) and :mod:`kernel_deps.cli.interrupt`: the error classes
and the Hugging Face CLI's reader are imported where they are used.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, NoReturn

import click

from kernel_deps import __version__
from kernel_deps.cli.interrupt import interrupted

if TYPE_CHECKING:  # `kernels --help` raises no error and defines no command
    from kernel_deps.core.errors import KernelDepsError

# Set in click's context meta (shared by the group and its command) by --json and -q, on
# the group (`kernels -q COMMAND`) or on the command (`kernels COMMAND -q`).
JSON_META = "kernel_deps.json"
QUIET_META = "kernel_deps.quiet"


def remember(key: str):
    """An option's callback setting ``key`` in the context meta when the flag is given; the
    flag's value is True when it was given to the group or to the command (the group's
    options are processed first, and the meta is shared)."""

    def callback(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
        if value:
            ctx.meta[key] = True
        return bool(ctx.meta.get(key))

    return callback


def colour(text: str, **style) -> str:
    """``text`` styled for a terminal, plain when NO_COLOR is set (click drops styles off a terminal)."""
    return text if os.environ.get("NO_COLOR") else click.style(text, **style)


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 kernel``, ``2 kernels``: a count and its noun, as every command's summary says it."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def echo_json(payload: dict) -> None:
    """``payload`` on stdout as the JSON document a --json command prints."""
    import json  # only a command that prints JSON pays for it (not `--help`)

    click.echo(json.dumps(payload, indent=2))


# docs/schemas/error.schema.json's version; see docs/ci.md
ERROR_SCHEMA_VERSION = 3


def _error_payload(exc: KernelDepsError) -> dict:
    """What a --json command prints instead of its report (docs/schemas/error.schema.json): the
    error's fields, and its line rendered from them."""
    from kernel_deps.core.errors import ResolutionError, render

    payload = {"schema_version": ERROR_SCHEMA_VERSION, "ok": False, "error": render(exc.subject, exc.reason, exc.hint),
               "exit_code": exc.exit_code, "kind": exc.kind, "subject": exc.subject, "reason": exc.reason,
               "hint": exc.hint}  # fmt: skip
    conflict = exc.to_json() if isinstance(exc, ResolutionError) else None
    if conflict is not None:
        payload["conflict"] = conflict
    return payload


def _exit_on_error(exc: KernelDepsError, *, as_json: bool) -> NoReturn:
    """End the command on ``exc``: its JSON document on stdout with --json, one line on stderr
    rendered from its fields."""
    from kernel_deps.core.errors import render

    if as_json:  # scripts still get JSON, on stdout
        echo_json(_error_payload(exc))
    click.echo(f"{colour('error:', fg='red', bold=True)} {render(exc.subject, exc.reason, exc.hint)}", err=True)
    sys.exit(exc.exit_code)


def _asks_for_json(args: list[str]) -> bool:
    """Whether a command line has --json: read from its words, since a usage error stops click
    before it has parsed the option, or when it is given where click does not take it."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--json" or arg.startswith("--json="):
            return True
    return False


def _usage_error(exc: click.ClickException, group: click.Context | None = None) -> KernelDepsError:
    """click's own error (unknown option, missing argument, bad value) as kernel-deps renders
    an error, naming the command and where its usage is."""
    from kernel_deps.core.errors import KernelDepsError, UsageError

    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        command = ctx.command_path
    elif group is not None:  # raised before the subcommand had its context
        command = " ".join(filter(None, (group.command_path, group.invoked_subcommand)))
    else:
        command = "kernels"
    error = UsageError if isinstance(exc, click.UsageError) else KernelDepsError
    message = exc.format_message().removesuffix(".")
    return error(f"{command}: {message} (see '{command} --help')")


# ``kernel-deps`` runs only kernel-deps' own subcommands; ``kernels`` also hands the
# others to the Hugging Face kernels CLI when it is installed (kernel_deps.cli.hf).
OWN_COMMANDS_ONLY = "own-commands-only"


def _delegates(ctx: click.Context) -> bool:
    return ctx.find_root().obj != OWN_COMMANDS_ONLY


# Every subcommand of the group: the module of kernel_deps.cli that defines it
# (as the function named like the command, "-" read as "_"), the first paragraph of its help
# (what `kernels --help` shortens to one line) and whether --help hides it. `kernels --help`
# lists the commands from here, without importing their definitions, and a command run
# imports only its own module; tests/functional/cli/test_cli_table.py checks every entry against the
# command objects, and that the listing is byte for byte click's own listing of them.
COMMAND_TABLE: dict[str, tuple[str, str, bool]] = {
    "add": ("edit", "Add a kernel to [tool.kernels.dependencies] of PROJECT_DIR (default: the project around .) and relock.", False),
    "cache": ("prune", "Manage the kernel cache.", False),
    "download": ("download", "Fetch exactly what kernels.lock pins into the Hugging Face cache, verified.", False),
    "export": ("export", "Write kernels.lock in the format of another tool (commit pins, transitive kernels included).", False),
    "lock": ("lock", "Resolve [tool.kernels.dependencies] into kernels.lock (commits and variant hashes).", False),
    "outdated": ("outdated", "Show, per locked kernel, what --upgrade would take, newer releases and moved refs.", False),
    "remove": ("edit", "Remove a kernel from [tool.kernels.dependencies] of PROJECT_DIR (default: the project around .) and relock.", False),
    "sync": ("sync", "Lock if pyproject.toml changed, download the locked kernels, verify them (one step).", False),
    "to-wheel": ("to_wheel", "Write the locked kernels as wheels (verified bytes only), a hash-pinned requirements.txt and pylock.toml.", False),
    "tree": ("tree", "Show the locked kernels as a dependency tree, and the build serving each target and this machine.", False),
    "verify": ("verify", "Check that pyproject.toml, kernels.lock and the cache agree (no network unless --online).", False),
    "versions": ("versions", "List the versions (tags vX.Y.Z and branches vN) a kernel repo offers, newest first.", False),
}
_DEFINITIONS = "kernel_deps.cli"


def command_from_table(name: str) -> click.Command:
    """The command ``name`` of :data:`COMMAND_TABLE`, its module imported (and no other's)."""
    module = f"{_DEFINITIONS}.{COMMAND_TABLE[name][0]}"
    if module not in sys.modules:
        __import__(module)
    return getattr(sys.modules[module], name.replace("-", "_"))


def _all_defined() -> bool:
    """Whether every command's module is imported already."""
    return all(f"{_DEFINITIONS}.{module}" in sys.modules for module, _, _ in COMMAND_TABLE.values())


def _help_width(max_width: int | None) -> int | None:
    """The width click's help formatter would take, without the ``shutil`` import it makes
    for it: the terminal's columns as ``shutil.get_terminal_size`` gives them (``COLUMNS``
    when a positive integer, else the terminal of ``sys.__stdout__``, else 80), at most
    ``max_width`` (default 80), less 2, at least 50. None under click's test runner, which
    forces a width of its own (click's formatter then takes that)."""
    from click import formatting

    if formatting.FORCED_WIDTH is not None:
        return None
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):  # no stdout, closed, detached or not a terminal
            columns = 0
        columns = columns or 80
    return max(min(columns, 80 if max_width is None else max_width) - 2, 50)


def _nearest_command(name: str) -> str | None:
    """The command of :data:`COMMAND_TABLE` ``name`` is likely a typo of (``lok``: ``lock``), or None."""
    import difflib

    close = difflib.get_close_matches(name, COMMAND_TABLE, n=1, cutoff=0.7)
    return close[0] if close else None


class _Group(click.Group):
    """Renders every KernelDepsError as one line on stderr, with its exit code, and a
    Ctrl-C as one line, ``interrupted``, with exit code 130 (click would print "Aborted!"
    and exit 1). As ``kernels``, a subcommand it does not have goes to the Hugging Face
    kernels CLI, arguments and exit code untouched.

    Its subcommands are those of :data:`COMMAND_TABLE`: ``kernels --help`` lists them from
    there, and a command's object is imported (its module of :mod:`kernel_deps.cli`)
    only when it is looked up to run or to show its own help."""

    @property
    def commands(self) -> dict[str, click.Command]:  # type: ignore[override]
        """click's map of the subcommands: the command objects, every one defined."""
        return {name: command_from_table(name) for name in COMMAND_TABLE}

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        # click.Group's constructor sets an empty map; the commands are COMMAND_TABLE's.
        if value:
            raise TypeError("the kernels commands are defined in the modules COMMAND_TABLE names")

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_TABLE)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMAND_TABLE:  # a name it lacks imports no definition
            return None
        return command_from_table(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if _all_defined():  # click's listing of the objects themselves
            super().format_commands(ctx, formatter)
            return
        # click's listing of stand-ins made from the table: the same names, text and limits.
        listed = [click.Command(name, help=text, hidden=hidden) for name, (_, text, hidden) in COMMAND_TABLE.items()]
        click.Group.format_commands(click.Group(commands=listed), ctx, formatter)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = click.utils.make_str(args[0])
        if (
            self.get_command(ctx, name) is None
            and not name.startswith("-")
            and not ctx.resilient_parsing
            and _delegates(ctx)
        ):
            from kernel_deps.core.errors import UsageError
            from kernel_deps.cli.hf import INSTALL_HINT, PeerCliBroken, find_peer_cli, run_peer_cli

            peer = find_peer_cli()
            nearest = _nearest_command(name)
            if nearest is not None and (peer is None or name not in peer.subcommand_names()):
                raise UsageError(f"'kernels {name}' is not a command; did you mean '{nearest}'? (see 'kernels --help')")
            if peer is None:
                raise UsageError(
                    f"'kernels {name}' is not a kernel-deps command, and the Hugging Face kernels library, "
                    f"which would run it, is not installed; install it with '{INSTALL_HINT}', "
                    "or see 'kernels --help' for kernel-deps' commands"
                )
            try:
                run_peer_cli(peer, list(args))
            except PeerCliBroken as exc:
                raise UsageError(f"'kernels {name}' is not a kernel-deps command, and {exc}") from None
        return super().resolve_command(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help(ctx, formatter)
        if not _delegates(ctx):
            return
        from kernel_deps.cli.hf import INSTALL_HINT, find_peer_cli

        peer = find_peer_cli()
        if peer is None:
            formatter.write_paragraph()
            formatter.write_text(
                "Other subcommands (info, benchmark, verify-signature, ...) belong to the Hugging Face "
                f"kernels library, which is not installed ({INSTALL_HINT})."
            )
            return
        rows = [(name, text) for name, text in peer.subcommands if name not in COMMAND_TABLE]
        with formatter.section(f"Commands of Hugging Face kernels {peer.version} (run by it)"):
            if rows:
                formatter.write_dl(rows)
            else:
                formatter.write_text("any subcommand not listed above")

    def main(self, args=None, *rest, **kwargs):  # type: ignore[override]
        """click's ``main``. Run as this process's own command line (no ``args`` given, as the
        console scripts run it: click exits the interpreter once the command is done), the
        cyclic garbage collector runs less often meanwhile, and the objects made by then are
        frozen out of it on the way out."""
        command_line = args is None and kwargs.get("standalone_mode", True)
        if command_line:
            import gc

            # What a command's imports make (modules, classes, functions) stays to the end; a
            # collection every 700 new objects walked the young ones again and again (about
            # 1.3 ms of a verify). Cycles are still collected, every 10,000.
            gc.set_threshold(10_000, *gc.get_threshold()[1:])
        try:
            return super().main(args, *rest, **kwargs)
        finally:
            if command_line:
                # The interpreter's last collection would walk every object the command's imports
                # made (about 8 ms for a verify); freed or not, the process ends with them.
                gc.freeze()

    def make_context(self, info_name: str | None, args: list[str], *rest, **kwargs) -> click.Context:
        # With --json anywhere on the line, click's own usage errors are a JSON document too.
        as_json = _asks_for_json(args)  # before click consumes the list
        if "terminal_width" not in kwargs and "terminal_width" not in self.context_settings:
            # Inherited by every subcommand's context: no help formatter imports shutil for it.
            max_width = kwargs.get("max_content_width", self.context_settings.get("max_content_width"))
            kwargs["terminal_width"] = _help_width(max_width)
        try:
            ctx = super().make_context(info_name, args, *rest, **kwargs)
        except KeyboardInterrupt:
            interrupted()
        except click.exceptions.NoArgsIsHelpError:
            raise  # `kernels` alone: click shows the help
        except click.ClickException as exc:  # one line, as every error: `error: ...`, with or without --json
            _exit_on_error(_usage_error(exc), as_json=as_json)
        if as_json:
            ctx.meta[JSON_META] = True
        return ctx

    def invoke(self, ctx: click.Context):
        from kernel_deps.core.errors import KernelDepsError

        try:
            try:
                return super().invoke(ctx)
            except click.exceptions.NoArgsIsHelpError:
                raise  # `kernels cache` alone: click shows its help
            except click.ClickException as exc:  # a subcommand's usage error: one line, as every error
                raise _usage_error(exc, ctx) from None
        except KernelDepsError as exc:
            _exit_on_error(exc, as_json=bool(ctx.meta.get(JSON_META)))
        except KeyboardInterrupt:
            interrupted()


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"kernel-deps {__version__}")
    if _delegates(ctx):
        from kernel_deps.cli.hf import INSTALL_HINT, find_peer_cli

        peer = find_peer_cli()
        if peer is None:
            click.echo(f"Hugging Face kernels: not installed ({INSTALL_HINT} for its subcommands)")
        else:
            theirs = [n for n in peer.subcommand_names() if n not in COMMAND_TABLE]
            click.echo(f"Hugging Face kernels {peer.version} ({peer.location}): runs {', '.join(theirs) or 'the subcommands kernel-deps lacks'}")
    ctx.exit()


@click.group(cls=_Group)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show kernel-deps' version, and the Hugging Face kernels library's when installed.")
@click.option("--quiet", "-q", is_flag=True, callback=remember(QUIET_META),
              help="Every command prints nothing but errors and problems found.")
@click.option("--json", "as_json", is_flag=True, callback=remember(JSON_META),
              help="Every command prints its report as JSON (schemas: docs/schemas/).")
def main(quiet: bool, as_json: bool) -> None:
    """Lock, download, verify and load compute kernels from the Hugging Face Hub."""


def main_own_commands() -> None:
    """The ``kernel-deps`` command: the same CLI, never handing a subcommand to another tool."""
    main(prog_name="kernel-deps", obj=OWN_COMMANDS_ONLY)


def __getattr__(name: str):
    if name == "COMMANDS":  # every command by its name, each module of the table imported
        return main.commands
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""``kernels --help`` lists the commands from :data:`kernel_deps.cli.group.COMMAND_TABLE`
without defining them: the table says what the command objects say and where each is
defined (one module of :mod:`kernel_deps.cli` per verb of :mod:`kernel_deps.commands`), and
the listing is byte for byte click's own listing of the objects, at any terminal width.

The help runs as real processes: a fresh ``kernels --help`` has defined no command, and one
that defined every command first (``kernel_deps.cli.group.COMMANDS``) is the eager
group, click listing the command objects themselves.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import termios
from pathlib import Path

import click
import pytest

from kernel_deps.cli.group import COMMAND_TABLE, COMMANDS, main
from tests.fixtures.processes import KERNELS

BIN = Path(KERNELS).parent


def test_the_table_says_what_the_commands_say() -> None:
    assert list(COMMAND_TABLE) == sorted(COMMANDS) == main.list_commands(click.Context(main))
    for name, (_, text, hidden) in COMMAND_TABLE.items():
        command = COMMANDS[name]
        assert (command.name, command.hidden) == (name, hidden)
        assert main.get_command(click.Context(main), name) is command
        stand_in = click.Command(name, help=text, hidden=hidden)
        for limit in range(120):  # every width's shortening, deprecation labels included
            assert stand_in.get_short_help_str(limit) == command.get_short_help_str(limit), (name, limit)


def defined_in(module: str) -> list[str]:
    """The commands ``kernel_deps.cli.<module>`` defines (a group's subcommands are its own)."""
    namespace = vars(__import__(f"kernel_deps.cli.{module}", fromlist=["_"]))
    defined = [value for value in namespace.values() if isinstance(value, click.Command)]
    below = {id(sub) for group in defined if isinstance(group, click.Group) for sub in group.commands.values()}
    return sorted(command.name for command in defined if id(command) not in below)


def test_each_module_defines_the_commands_the_table_places_in_it() -> None:
    # The table's modules of kernel_deps.cli are the verbs of kernel_deps.commands, one to
    # one; each defines exactly the table's commands for it, and no other module of the
    # package defines a command but the group (no command lives in two modules).
    cli = Path(__import__("kernel_deps.cli").cli.__file__).parent
    verbs = Path(__import__("kernel_deps.commands").commands.__file__).parent
    placed = sorted({module for module, _, _ in COMMAND_TABLE.values()})
    assert placed == sorted(path.stem for path in verbs.glob("*.py") if path.stem != "__init__")
    for module in sorted(path.stem for path in cli.glob("*.py") if path.stem != "__init__"):
        expected = [main.name] if module == "group" else [n for n, (where, _, _) in COMMAND_TABLE.items() if where == module]
        assert defined_in(module) == sorted(expected), module


def help_output(script: str, columns: str | None, *, eager: bool) -> tuple[bytes, str]:
    """``script --help`` in a fresh process: its stdout, and whether it defined the commands."""
    entry = "main" if script == "kernels" else "main_kernel_deps"
    code = (
        "import sys\n"
        + ("from kernel_deps.cli.group import COMMANDS\n" if eager else "")
        + f"sys.argv[0] = {str(BIN / script)!r}\n"
        f"from kernel_deps.cli.entry import {entry}\n"
        "from kernel_deps.cli.group import COMMAND_TABLE\n"
        "modules = {f'kernel_deps.cli.{m}' for m, _, _ in COMMAND_TABLE.values()}\n"
        f"try:\n    {entry}()\n"
        "finally:\n    sys.stderr.write('defined' if modules <= set(sys.modules) else\n"
        "                     'listed' if not (modules | {'kernel_deps.cli.options'}) & set(sys.modules) else 'some')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    result = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, result.stderr.decode().rpartition("\n")[2]


@pytest.mark.parametrize("script", ["kernels", "kernel-deps"])
@pytest.mark.parametrize("columns", [None, "50", "64", "100", "200", "0", "wide"])
def test_help_lists_the_commands_as_the_eager_group_would(script: str, columns: str | None) -> None:
    listed, how = help_output(script, columns, eager=False)
    defined, how_eager = help_output(script, columns, eager=True)
    assert (how, how_eager) == ("listed", "defined")
    assert listed == defined
    assert b"\nCommands:\n" in listed and b"  versions  List the versions" in listed


# (COLUMNS, the terminal's columns or None for no terminal): shutil.get_terminal_size reads
# COLUMNS when it is a positive integer, else the terminal of stdout, else 80.
WIDTHS = [
    (None, None), (None, 70), (None, 130), (None, 0), ("60", 120), ("60", None), ("0", 70), ("-4", None), ("x", 66),
    ("300", None), ("30", 70),
]


@pytest.mark.parametrize(("columns", "terminal"), WIDTHS)
def test_help_is_as_wide_as_shutil_would_make_it(columns: str | None, terminal: int | None) -> None:
    # kernel-deps' width, then click's own formatter's (which asks shutil), in one process
    # whose stdout is a terminal of that size (or a pipe).
    code = (
        "import sys, click\nfrom kernel_deps.cli.group import _help_width\n"
        "sys.stderr.write(f'{_help_width(None)} {click.HelpFormatter().width} {_help_width(64)} '"
        "f'{click.HelpFormatter(max_width=64).width}')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    if terminal is None:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=60, text=True)
    else:
        leader, follower = os.openpty()
        try:
            fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, terminal, 0, 0))
            result = subprocess.run(
                [sys.executable, "-c", code], stdout=follower, stderr=subprocess.PIPE, env=env, timeout=60, text=True
            )
        finally:
            os.close(follower)
            os.close(leader)
    assert result.returncode == 0, result.stderr
    ours, clicks, ours_narrow, clicks_narrow = result.stderr.split()
    assert (ours, ours_narrow) == (clicks, clicks_narrow)

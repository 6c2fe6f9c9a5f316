"""What every ``kernels`` command shares, checked on the command objects themselves, so a
new command cannot leave it out: each project command takes its folder from the one
discovery rule (``cli.options.project_argument``), and each command takes ``-q`` and ``--json``."""

from __future__ import annotations

import ast
from pathlib import Path

import click

from kernel_deps.cli import main as cli_main
from kernel_deps.cli.options import discover_project

CLI = Path(__file__).resolve().parents[3] / "src" / "kernel_deps" / "cli"
# The commands that work on no project: the Hub's listing of one kernel repo.
NO_PROJECT = {"versions"}


def leaf_commands() -> dict[str, click.Command]:
    """Every command a user runs, by its words (``cache prune``), groups left out."""
    found: dict[str, click.Command] = {}
    todo = [(name, command) for name, command in cli_main.commands.items()]
    while todo:
        name, command = todo.pop()
        if isinstance(command, click.Group):
            todo += [(f"{name} {sub}", c) for sub, c in command.commands.items()]
        else:
            found[name] = command
    return found


def test_every_project_command_finds_its_project_by_the_one_rule() -> None:
    for name, command in leaf_commands().items():
        if name in NO_PROJECT:
            continue
        folders = [p for p in command.params if isinstance(p, click.Argument) and p.callback is discover_project]
        assert len(folders) == 1, f"kernels {name}: take the project folder with cli.options.project_argument()"
        assert not folders[0].required, f"kernels {name}: the project folder is optional (found when left out)"


def test_no_verb_module_declares_a_project_argument_of_its_own() -> None:
    for path in CLI.glob("*.py"):
        if path.name == "options.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "argument"
                    and node.args and isinstance(node.args[0], ast.Constant)
                    and str(node.args[0].value).startswith("project_dir")):  # fmt: skip
                raise AssertionError(f"{path.name}:{node.lineno}: use cli.options.project_argument()")


def test_every_command_takes_quiet_and_json() -> None:
    for name, command in leaf_commands().items():
        flags = {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}
        assert {"-q", "--quiet", "--json"} <= flags, f"kernels {name}: add QUIET_OPTION and JSON_OPTION"
    group_flags = {opt for p in cli_main.params for opt in p.opts}
    assert {"-q", "--json"} <= group_flags  # also before the command: `kernels -q verify`

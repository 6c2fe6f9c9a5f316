"""Every ``kernels`` command the docs show exists as shown: for each ```console block of
README.md and docs/*.md, each ``kernels ...`` (or ``kernel-deps ...``) command names a
subcommand of the real command group and only options that command (or the group) takes,
checked on the click command objects, so a renamed or removed option cannot stay in the docs.
What those examples print is run against the local Hub in
tests/functional/project/test_docs_console.py.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click

from kernel_deps.cli.group import main as kernels_group
from tests.fixtures.console_blocks import ROOT, console_blocks

ENV_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*")
# Subcommands the Hugging Face `kernels` CLI owns, handed over by ours (docs/hf-kernels.md).
HANDED_OVER = {"info", "benchmark", "verify-signature", "check", "upload"}


def console_commands() -> Iterator[tuple[Path, int, str]]:
    """(file, line number, command) of every command line in the console blocks: the lines
    after ``$ `` where a block has prompts, every line of a block that has none."""
    for path, first, lines in console_blocks():
        prompted = any(line.startswith("$ ") for line in lines)
        for offset, line in enumerate(lines):
            if prompted and not line.startswith("$ "):
                continue  # the output shown
            yield path, first + offset, line.removeprefix("$ ")


def kernels_invocations(command: str) -> Iterator[list[str]]:
    """The argument lists of each ``kernels``/``kernel-deps`` run in a shell line (pipes,
    ``&&`` and ``;`` split it; leading VAR=value assignments and redirections are skipped)."""
    for segment in re.split(r"\|\||&&|[|;]", command):
        words = shlex.split(segment, comments=True)
        redirect = next((i for i, w in enumerate(words) if re.match(r"\d?[<>]", w)), len(words))
        words = words[:redirect]  # `> FILE`, `2>&1`: the shell's, not the command's
        while words and ENV_ASSIGNMENT.fullmatch(words[0]):
            words.pop(0)
        if words and words[0] in ("kernels", "kernel-deps"):
            yield words[1:]


def option_names(command: click.Command) -> set[str]:
    return {opt for p in command.params if isinstance(p, click.Option) for opt in (*p.opts, *p.secondary_opts)}


def check(words: list[str]) -> str | None:
    """What is wrong with ``kernels WORDS`` against the command group, or None."""
    command: click.Command = kernels_group
    allowed = option_names(kernels_group) | {"--help"}
    path = ["kernels"]
    args = list(words)
    while isinstance(command, click.Group):
        while args and args[0].startswith("-"):
            if args[0].split("=")[0] not in allowed:
                return f"{' '.join(path)} has no option {args[0]}"
            args.pop(0)
        if not args:
            return None  # `kernels --help`, `kernels --version`
        name = args.pop(0)
        if len(path) == 1 and name in HANDED_OVER:
            return None
        sub = command.commands.get(name)
        if sub is None:
            return f"{' '.join(path)} has no subcommand {name!r}"
        command, path = sub, [*path, name]
        allowed |= option_names(command)
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("--") or re.fullmatch(r"-[A-Za-z]", arg):
            if arg.split("=")[0] not in allowed:
                return f"{' '.join(path)} has no option {arg}"
    return None


def test_every_command_the_docs_show_exists_with_the_options_shown() -> None:
    wrong, seen = [], 0
    for path, line, command in console_commands():
        for words in kernels_invocations(command):
            seen += 1
            problem = check(words)
            if problem:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {command.strip()}: {problem}")
    assert not wrong, "\n".join(wrong)
    assert seen > 40  # the docs' examples were found (the README, reference.md, sync.md, ...)


def test_the_check_finds_an_unknown_subcommand_and_option() -> None:
    assert check(["lock", "--check", "."]) is None
    assert check(["-q", "cache", "prune", "--dry-run", "a/", "b/"]) is None
    assert check(["lock", "--chek", "."]) == "kernels lock has no option --chek"
    assert check(["lok", "."]) == "kernels has no subcommand 'lok'"
    assert check(["cache", "purge"]) == "kernels cache has no subcommand 'purge'"
    assert check(["download", "--variant=torch-cpu", "-x"]) == "kernels download has no option -x"

"""Shell completion for bash, as docs/ci.md tells users to set it up, in a real bash."""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest

from tests.fixtures.processes import SCRIPTS


def completions(line: str, *, program: str = "kernels") -> list[str]:
    """What bash offers for ``line`` (the cursor at its end), through the sourced script."""
    variable = "_" + program.upper().replace("-", "_") + "_COMPLETE"
    words = line.split(" ")
    script = f"""
        set -e
        eval "$({variable}=bash_source {program})"
        complete -p {program} >/dev/null   # the script registered a completion for the command
        COMP_WORDS=({" ".join(shlex.quote(w) for w in words)})
        COMP_CWORD={len(words) - 1}
        COMPREPLY=()
        _{program.replace("-", "_")}_completion {program}
        printf '%s\\n' "${{COMPREPLY[@]}}"
    """
    env = {**os.environ, "PATH": f"{SCRIPTS}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("kernels ve", ["verify", "versions"]),
        ("kernels lo", ["lock"]),
        ("kernels download --all", ["--all-variants", "--all-targets"]),
        ("kernels verify --target", ["--target"]),
        ("kernels verify --req", ["--require-cached"]),
        ("kernels lock --upgrade-p", ["--upgrade-package"]),
        ("kernels outdated --js", ["--json"]),
        ("kernels --q", ["--quiet"]),
    ],
)
def test_bash_completes_commands_and_options(line: str, expected: list[str]) -> None:
    assert completions(line) == expected


def test_every_command_is_offered() -> None:
    offered = completions("kernels ")
    assert {"add", "download", "lock", "outdated", "remove", "verify", "versions"} <= set(offered)


def test_the_kernel_deps_spelling_completes_too() -> None:
    assert completions("kernel-deps dow", program="kernel-deps") == ["download"]

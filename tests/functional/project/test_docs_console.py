"""The ```console examples of README.md and docs/*.md that show what a command prints, run
as written against the local Hub and compared line by line.

Every block that shows the output of a ``kernels`` command is either run here (RUN: the
project it runs in) or listed in NOT_RUN with why, so a new example is one or the other.
A block's commands run in order in a fresh project and cache, up to the last one whose
output is shown; each one whose output is shown must print exactly those lines (stderr's
first, as a terminal shows a warning before the report), after three normalisations:
kernels-community/ is the sample catalogue's kernels-test/ (flash-attn its flash), short
commits and file and byte counts are placeholders, and, where the example shows this
machine's build, any torch213 cxx11 variant is this machine's. A line ``...`` stands for
any number of lines. That a command and its options exist at all is checked for every
block in tests/suite/rules/test_docs_commands.py.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.builder import CUDA_VARIANT
from tests.fixtures.cli import run_kernels
from tests.fixtures.console_blocks import ROOT, console_blocks
from tests.fixtures.projects import write_project

ACTIVATION = '"kernels-test/activation" = ">=1.2,<2"'
TARGETS_PROJECT = '"kernels-test/layer-norm" = ">=0.1"\n"kernels-test/norm-universal" = ">=1"\n"kernels-test/attention" = ">=1.3,<1.4"'


@dataclass(frozen=True)
class Example:
    """The project an example runs in: its requirements, extra TOML, and what is done first."""

    deps: str
    extra: str = ""
    locked: bool = False  # `kernels lock` before the block
    downloaded: bool = False  # and `kernels download`
    edit: tuple[tuple[str, str], ...] = ()  # then pyproject.toml's text replaced, (old, new)
    this_machine: bool = False  # the example shows this machine's build


# Keyed by the file and the block's first two lines.
RUN = {
    ("README.md", "$ kernels lock ."): Example(f'{ACTIVATION}\n"kernels-test/flash" = 1'),
    ("README.md", "$ kernels download ."): Example(ACTIVATION, locked=True, this_machine=True),
    ("README.md", "$ kernels verify ."): Example(ACTIVATION, locked=True, downloaded=True),
    ("docs/reference.md", "$ kernels lock ."): Example(f'{ACTIVATION}\n"kernels-test/flash" = 1'),
    ("docs/sync.md", "$ kernels sync ."): Example(ACTIVATION, this_machine=True),
    ("docs/targets.md", "$ kernels tree .\n. (kernels.lock)"): Example(
        TARGETS_PROJECT, extra=f"[tool.kernels]\ntargets = {json.dumps([CUDA_VARIANT])}\n\n", locked=True
    ),
    ("docs/targets.md", "$ kernels tree .\nwarning:"): Example(
        TARGETS_PROJECT, extra=f"[tool.kernels]\ntargets = {json.dumps([CUDA_VARIANT])}\n\n", locked=True,
        edit=(('"kernels-test/layer-norm" = ">=0.1"', '"kernels-test/layer-norm" = ">=5"\n"kernels-test/flash" = 1'),),
    ),
}
NOT_RUN = {
    ("docs/locking.md", "$ kernels lock .\nerror: kernels.lock not written: acme/"):
        "the Hub's organizations API, which the local Hub lacks (tests/unit/trust/test_trust.py)",
    ("docs/locking.md", "$ kernels lock .\nerror: kernels.lock not written: 1 build is not signed"):
        "a build signed by another workflow (tests/unit/trust/test_signatures.py)",
    ("docs/locking.md", "$ kernels lock .\nerror: kernels.lock: written by a newer"):
        "a lock a newer kernel-deps wrote: tests/functional/lock/test_newer_lock.py compares its line",
    ("docs/targets.md", "$ kernels lock .\n+ kernels-test/x"):
        "a repo whose newest release lacks a target's build (tests/functional/lock/test_targets.py)",
    ("docs/locking.md", "$ kernels outdated .\nKERNEL                   LOCKED"): "a branch moved upstream",
    ("docs/locking.md", "$ kernels outdated .\nKERNEL                 LOCKED"): "a repo redirected upstream",
    ("docs/reference.md", "$ kernels versions kernels-community/activation"):
        "the real Hub's variant counts; the sample repos have four",
    ("docs/download-and-verify.md", "$ kernels cache prune --dry-run app/ tools/"): "two projects and a cache of old commits",
    ("docs/wheels.md", "$ kernels to-wheel . -o wheels/"): "the img2gray op compiled for this machine (tests/functional/to_wheel/)",
    ("docs/wheels.md", "$ uv export --format pylock.toml"): "uv, and the wheels of the img2gray op (tests/functional/to_wheel/)",
    ("docs/fleets.md", "$ export KERNELS_CACHE_SHARED=/mnt/kernels"):
        "a shared cache mounted read-only (tests/functional/download/test_shared_cache.py checks verify's tier lines)",
}


def output_blocks() -> dict[tuple[str, str], list[str]]:
    """Every console block that shows a ``kernels`` command's output, by its key."""
    found = []
    for path, _, lines in console_blocks():
        if any(prev.startswith("$ kernels ") and not line.startswith("$ ") for prev, line in zip(lines, lines[1:])):
            found.append((str(path.relative_to(ROOT)), lines))
    keyed = {}
    for name, lines in found:
        keys = [key for key in (*RUN, *NOT_RUN) if key[0] == name and "\n".join(lines).startswith(key[1])]
        assert keys, f"{name}: a console block showing output, {lines[0]!r}: add it to RUN or NOT_RUN of {__file__}"
        key = max(keys, key=lambda k: len(k[1]))
        assert key not in keyed, f"{name}: two blocks start {key[1]!r}: make the key longer"
        keyed[key] = lines
    return keyed


BLOCKS = output_blocks()


def normalise(text: str, this_machine: bool) -> str:
    text = text.replace("kernels-community/", "kernels-test/").replace("kernels-test/flash-attn", "kernels-test/flash")
    text = re.sub(r"\b[0-9a-f]{12}\b", "<commit>", text)
    text = re.sub(r"\b\d[\d,]* (files?|bytes?)\b", r"N \1", text)
    if this_machine:
        text = re.sub(r"\btorch213-cxx11-(?:cu\d+|cpu)-x86_64-linux\b", "<variant>", text)
    return text


def matches(shown: list[str], printed: list[str]) -> bool:
    """Whether ``printed`` is ``shown``, each ``...`` line of it standing for any lines."""
    pattern = "".join("(?:.*\n)*?" if line.strip() == "..." else re.escape(line) + "\n" for line in shown)
    return re.fullmatch(pattern, "".join(line + "\n" for line in printed)) is not None


def test_every_block_of_the_lists_is_still_in_the_docs() -> None:
    assert set(BLOCKS) == set(RUN) | set(NOT_RUN)


@pytest.mark.parametrize("key", list(RUN), ids=[f"{name}:{first.splitlines()[0]}" for name, first in RUN])
def test_the_example_prints_what_the_docs_show(key: tuple[str, str], hub_env, tmp_path: Path) -> None:
    example = RUN[key]
    project = write_project(tmp_path / "app", example.deps, extra=example.extra)
    if example.locked:
        assert run_kernels("lock", str(project)).returncode == 0
    if example.downloaded:
        assert run_kernels("download", str(project)).returncode == 0
    pyproject = project / "pyproject.toml"
    for old, new in example.edit:
        assert old in pyproject.read_text()
        pyproject.write_text(pyproject.read_text().replace(old, new))

    steps: list[tuple[str, list[str]]] = []  # each command and the output shown for it
    for line in BLOCKS[key]:
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    while not steps[-1][1]:
        steps.pop()  # commands shown without their output are checked for existence only
    for command, shown in steps:
        words = shlex.split(normalise(command, False), comments=True)
        assert words[0] == "kernels", command
        result = run_kernels(*words[1:], cwd=project)
        printed = normalise(result.stderr + result.stdout, example.this_machine).splitlines()
        expected = [normalise(line, example.this_machine) for line in shown]
        if shown:
            assert matches(expected, printed), f"{key[0]}: {command}\nshown:\n" + "\n".join(expected) + "\nprinted:\n" + "\n".join(printed)
        assert result.returncode == 0, f"{key[0]}: {command}: exit {result.returncode}\n{result.stderr}"

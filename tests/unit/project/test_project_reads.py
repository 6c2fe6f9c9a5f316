"""Each command reads pyproject.toml once: one open of the file for its project, one parse of each text.

Every command below runs for real (the ``kernels`` group in this process, against the
local Hub); an audit hook counts the opens of the project's ``pyproject.toml`` and the
standard library's TOML parses while it runs. Nothing of kernel-deps is patched.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.fixtures.builder import KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project

tomllib = pytest.importorskip("tomllib")  # Python 3.11+: what reading parses with

_watched: list[Path] = []  # the pyproject.toml whose reads are counted now (none: counting is off)
_opens: list[str] = []


_on_open: list[tuple[Path, object]] = []  # (a path, what to do once when it is first opened)


def _hook(event: str, args: tuple) -> None:
    """Each open of the watched file for reading (``open`` and ``os.open`` raise this event)."""
    if event != "open" or not _watched or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    if _on_open and os.fsdecode(args[0]) == str(_on_open[0][0]):
        _, action = _on_open.pop()
        action()
    path, mode, flags = (list(args) + [None, None])[:3]
    reading = (flags & os.O_ACCMODE) == os.O_RDONLY if mode is None and isinstance(flags, int) else "r" in (mode or "r")
    if reading and os.fsdecode(path) == str(_watched[0]):
        _opens.append(os.fsdecode(path))


sys.addaudithook(_hook)  # an audit hook stays for the process: it counts only while a test watches


def reads(project: Path, *args: str) -> tuple[int, int, object]:
    """(opens of pyproject.toml for reading, tomllib parses of a project's text, the result) of ``kernels ARGS``.

    Only parses of a text with a ``[tool.kernels`` table count (the file as it is, or as an
    edit makes it): to-wheel parses the ``pylock.toml`` it writes, to check it, and that
    is not a read of the project."""
    parses = []
    loads = tomllib.loads
    tomllib.loads = lambda s, **kw: ("[tool.kernels" in s and parses.append(1)) or loads(s, **kw)  # the stdlib's
    _opens.clear()
    _watched[:] = [project / "pyproject.toml"]
    try:
        result = run_kernels(*args)
    finally:
        _watched.clear()
        tomllib.loads = loads
    return len(_opens), len(parses), result


@pytest.fixture
def app(hub_env, tmp_path) -> tuple[Path, str]:
    repo_id = f"kernels-test/reads-{tmp_path.name[-12:].replace('_', '-').strip('-')}"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("1.1.0"))))
    return write_project(tmp_path / "app", f'"{repo_id}" = ">=1,<2"'), repo_id


# (command, the opens and parses it takes): `export` reads it to judge the lock against it.
COMMANDS = [
    (("lock",), 1), (("lock", "--check"), 1), (("lock", "--dry-run"), 1), (("sync",), 1), (("sync", "--locked"), 1),
    (("download",), 1), (("verify",), 1), (("tree",), 1), (("outdated",), 1), (("to-wheel", "-o", "{tmp}/wheels"), 1),
    (("export", "--format", "kernels-0.16", "-o", "{tmp}/out.lock"), 1),
]


@pytest.mark.parametrize(("command", "expected"), COMMANDS, ids=[" ".join(c[:2]) for c, _ in COMMANDS])
def test_each_command_reads_pyproject_once(app, tmp_path, command, expected) -> None:
    project, _ = app
    assert run_kernels("lock", str(project)).returncode == 0
    args = [part.format(tmp=tmp_path) for part in command]
    opens, parses, result = reads(project, args[0], str(project), *args[1:])
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert (opens, parses) == (expected, expected)


def test_a_sync_that_relocks_reads_pyproject_again_for_the_relock(app) -> None:
    project, _ = app  # no lock yet: the judgement reads it, the relock reads it again (used under its edit lock)
    opens, parses, result = reads(project, "sync", str(project))
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert (opens, parses) == (2, 2)


def test_a_lock_reads_pyproject_again_under_the_edit_lock_when_it_changed_after_the_first_read(app) -> None:
    # The relock reads pyproject.toml before taking the edit lock (to start its verifier
    # early); another writer replaces the file between that read and the lock (here, the
    # moment the edit lock's file is opened): the lock is made from the file as it is under
    # the lock, read again there.
    import json

    from kernel_deps.core.settings import EDIT_LOCK_NAME

    project, repo_id = app
    assert run_kernels("lock", str(project)).returncode == 0
    pyproject = project / "pyproject.toml"
    edited = pyproject.read_text().replace('">=1,<2"', '">=1,<1.1"')
    _on_open[:] = [(project / EDIT_LOCK_NAME, lambda: _replace(pyproject, edited))]
    try:
        opens, parses, result = reads(project, "lock", str(project))
    finally:
        _on_open.clear()
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert (opens, parses) == (2, 2)
    assert json.loads((project / "kernels.lock").read_text())[0]["version"] == "v1.0.0"  # the range as edited


def _replace(path: Path, text: str) -> None:
    temp = path.with_name(path.name + ".new")
    temp.write_text(text)
    os.replace(temp, path)


def test_add_and_remove_read_pyproject_once_and_parse_each_text_once(app, hub_env) -> None:
    project, _ = app
    assert run_kernels("lock", str(project)).returncode == 0
    other = f"{project.parent.name[-12:]}-other".strip("-_").replace("_", "-")
    other = f"kernels-test/reads-{other}"
    hub_env.add_repo(KernelRepo(other, (Release("1.0.0"),)))
    # One read of the project, and one by the transaction that replaces it (its journal records
    # the digest of what it replaces: core.atomicfile.write_together). With a range, the edited
    # text alone is parsed; without one, the original too (its targets).
    for args, parsed in (((f"{other}>=1",), 1), ((other,), 2)):
        opens, parses, result = reads(project, "add", *args, str(project))
        assert result.returncode == 0, (result.stdout, result.stderr)
        assert (opens, parses) == (2, parsed), args
        opens, parses, result = reads(project, "remove", other, str(project))
        assert result.returncode == 0, (result.stdout, result.stderr)
        assert (opens, parses) == (2, 1)

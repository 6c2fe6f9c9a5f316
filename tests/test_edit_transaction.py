"""`kernels add` / `kernels remove` change pyproject.toml and kernels.lock as one.

A kill at any moment, during resolution over a slow Hub or while the files are replaced,
leaves both files old or both new once the next command has read the project; links to
pyproject.toml are written through to the file they point at. Only the killed commands run
in a process of their own; the others run in-process (tests/fixtures/cli.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernel_deps.locking import edit_and_relock
from kernel_deps.settings import EDIT_JOURNAL_NAME
from kernel_deps.pyproject import add_requirement, read_requirements
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project
from tests.test_interrupt import sigint_as_in_a_terminal

KERNELS = str(Path(sys.executable).with_name("kernels"))
ROTARY, ADDED = "kernels-test/rotary", "kernels-test/activation"


def make_project(root: Path) -> Path:
    return write_project(root / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)


def state(project: Path) -> tuple[bytes, bytes]:
    return (project / "pyproject.toml").read_bytes(), (project / "kernels.lock").read_bytes()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_killed_add_leaves_both_files_old_or_both_new(hub_env, proxy, tmp_path, sig) -> None:
    project = make_project(tmp_path / "template")
    old = state(project)
    done = shutil.copytree(project, tmp_path / "reference")
    assert run_kernels("add", f"{ADDED}>=1,<2", str(done)).returncode == 0
    new = state(done)
    assert new != old

    proxy.latency = 0.1  # resolution takes several round trips: kills land in it, and after
    env = {**os.environ, "HF_ENDPOINT": proxy.url}
    outcomes = set()
    for i, delay in enumerate([0.2, 0.5, 0.9, 1.3, 1.8, 2.5, 3.5, 6.0]):
        trial = shutil.copytree(project, tmp_path / f"trial-{i}")
        process = subprocess.Popen([KERNELS, "add", f"{ADDED}>=1,<2", str(trial)], env=env, preexec_fn=sigint_as_in_a_terminal,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(delay)
        os.killpg(process.pid, sig)
        process.wait(timeout=60)
        read_requirements(trial)  # the next command reading the project finishes a committed change
        after = state(trial)
        assert after in (old, new), f"a kill after {delay} s left a mix"
        assert not (trial / EDIT_JOURNAL_NAME).exists()
        outcomes.add(after == new)
    assert outcomes == {False, True}, "the kills should land both before and after the change"


def test_a_change_committed_but_not_applied_is_finished_by_the_next_reader(hub_env, tmp_path) -> None:
    """What a kill between the commit point and the file replacements leaves behind."""
    project = make_project(tmp_path)
    reference = shutil.copytree(project, tmp_path / "reference")
    edit_and_relock(reference, lambda text: add_requirement(text, ADDED, ">=1,<2", source="pyproject.toml"))
    new = state(reference)
    # The journal names both files with their new texts; only the lock was replaced yet.
    journal = {"files": [{"name": name, "text": text.decode()}
                         for name, text in zip(("pyproject.toml", "kernels.lock"), new)]}
    (project / "kernels.lock").write_bytes(new[1])
    (project / EDIT_JOURNAL_NAME).write_text(json.dumps(journal))

    check = run_kernels("lock", "--check", str(project))
    assert check.returncode == 0, check.stderr
    assert state(project) == new and not (project / EDIT_JOURNAL_NAME).exists()


def test_an_unreadable_journal_is_one_line_and_changes_nothing(hub_env, tmp_path) -> None:
    project = make_project(tmp_path)
    old = state(project)
    (project / EDIT_JOURNAL_NAME).write_text("{not json")
    result = run_kernels("verify", str(project))
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "an unfinished edit of pyproject.toml and kernels.lock cannot be read" in result.stderr
    assert state(project) == old


@pytest.mark.parametrize("name", ["../outside.txt", "/tmp/kernel-deps-journal-target", "sub/file", ".."])
def test_a_journal_naming_a_file_elsewhere_writes_nothing(hub_env, tmp_path, name) -> None:
    """A journal is read from the project folder: it may only name files beside it."""
    project = make_project(tmp_path)
    old = state(project)
    (project / EDIT_JOURNAL_NAME).write_text(json.dumps({"files": [{"name": name, "text": "planted"}]}))
    result = run_kernels("verify", str(project))
    assert result.returncode == 1 and "is not a file name beside the journal" in result.stderr
    assert state(project) == old
    assert not (tmp_path / "outside.txt").exists() and not Path("/tmp/kernel-deps-journal-target").exists()


def test_add_and_remove_write_through_a_symlinked_pyproject(hub_env, tmp_path) -> None:
    project = make_project(tmp_path)
    real = tmp_path / "shared-pyproject.toml"
    (project / "pyproject.toml").rename(real)
    (project / "pyproject.toml").symlink_to(real)
    assert run_kernels("add", f"{ADDED}>=1,<2", str(project)).returncode == 0
    assert (project / "pyproject.toml").is_symlink()
    assert ADDED in real.read_text()
    assert {r.repo_id for r in read_requirements(project)} == {ROTARY, ADDED}
    # A failed add (no such kernel) leaves the link and its target as they were.
    before = real.read_bytes()
    failed = run_kernels("add", "kernels-test/no-such-kernel>=1", str(project))
    assert failed.returncode == 1
    assert (project / "pyproject.toml").is_symlink() and real.read_bytes() == before
    assert run_kernels("remove", ADDED, str(project)).returncode == 0
    assert (project / "pyproject.toml").is_symlink() and ADDED not in real.read_text()


def test_add_writes_through_a_hard_linked_pyproject(hub_env, tmp_path) -> None:
    project = make_project(tmp_path)
    other = tmp_path / "other-name.toml"
    os.link(project / "pyproject.toml", other)
    assert run_kernels("add", f"{ADDED}>=1,<2", str(project)).returncode == 0
    assert os.stat(other).st_ino == os.stat(project / "pyproject.toml").st_ino
    assert ADDED in other.read_text()

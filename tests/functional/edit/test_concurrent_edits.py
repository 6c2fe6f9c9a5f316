"""Commands that write a project's files run one at a time, each on top of the last one's result.

Every `kernels lock`, `add` and `remove` holds the project's edit lock
(``.kernels-edit.lock``, there only while held) from before it reads pyproject.toml and
kernels.lock until it has written them, says on stderr when it waits for another command,
and gives up, with one line, when the time budget is spent. The commands run as real ``kernels`` processes; the
test holds the same lock to make them overlap for certain.
"""

from __future__ import annotations

import os
import subprocess

from filelock import FileLock

from kernel_deps.core.settings import EDIT_LOCK_NAME
from kernel_deps.lock.read import read_lock
from kernel_deps.project.pyproject import read_requirements
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.processes import KERNELS

ROTARY, ACTIVATION, NORM = "kernels-test/rotary", "kernels-test/activation", "kernels-test/norm-universal"
WAITING = "waiting for another kernels command editing"


def start(*args: str, budget: str = "120") -> subprocess.Popen:
    env = {**os.environ, "KERNELS_HUB_BUDGET": budget}
    return subprocess.Popen([KERNELS, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_adds_at_the_same_moment_both_land_in_pyproject_and_the_lock(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)
    before = (project / "pyproject.toml").read_bytes()
    with FileLock(str(project / EDIT_LOCK_NAME)):  # both start, and both wait, before either reads the project
        adds = [start("add", f"{repo_id}>=1,<2", str(project)) for repo_id in (ACTIVATION, NORM)]
        for process in adds:
            line = process.stderr.readline()
            assert line.startswith(f"{WAITING} {project} (lock {project / EDIT_LOCK_NAME})"), line
        assert (project / "pyproject.toml").read_bytes() == before
    for process in adds:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        assert "Added" in out
    assert {r.repo_id for r in read_requirements(project)} == {ROTARY, ACTIVATION, NORM}
    assert {k.repo_id for k in read_lock(project / "kernels.lock", purpose="use").lock.kernels} == {ROTARY, ACTIVATION, NORM}
    # The first to finish removed the lock file the second waited on; the second locked a new one, and removed it.
    assert not (project / EDIT_LOCK_NAME).exists()
    check = run_kernels("lock", "--check", str(project))
    assert check.returncode == 0, check.stderr


def test_a_command_gives_up_waiting_when_the_budget_is_spent_and_writes_nothing(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)
    before = (project / "pyproject.toml").read_bytes(), (project / "kernels.lock").read_bytes()
    with FileLock(str(project / EDIT_LOCK_NAME)):
        process = start("remove", ROTARY, str(project), budget="3")
        out, err = process.communicate(timeout=120)
    assert process.returncode == 1
    assert err.splitlines()[0].startswith(WAITING)
    assert err.splitlines()[1] == (
        f"error: {project}: another kernels command held {project / EDIT_LOCK_NAME} until the 3 s budget was spent; "
        "run again once it is done (raise KERNELS_HUB_BUDGET to wait longer), or delete that file if none is running"
    )
    assert ((project / "pyproject.toml").read_bytes(), (project / "kernels.lock").read_bytes()) == before


def test_quiet_commands_wait_without_a_word_and_readers_take_no_lock(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)
    with FileLock(str(project / EDIT_LOCK_NAME)):
        check = run_kernels("lock", "--check", str(project))  # reads only: never waits for the lock
        assert check.returncode == 0, check.stderr
        process = start("-q", "lock", str(project), budget="3")
        out, err = process.communicate(timeout=120)
    assert process.returncode == 1 and WAITING not in err and "budget was spent" in err

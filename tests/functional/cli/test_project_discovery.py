"""Every project command, run from a folder inside the project, finds the project as the
loader finds its lock: the nearest folder holding a pyproject.toml (or a kernels.lock),
walking up, never above a repository root; it says ``using FOLDER`` once on stderr."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kernel_deps.commands.lock import lock_project
from kernel_deps.loader.finding import find_lock
from tests.fixtures.cli import run_kernels
from tests.fixtures.processes import KERNELS
from tests.fixtures.projects import write_project

LAYER_NORM = "kernels-test/layer-norm"

# Each project command, as run from inside the project with no folder given.
FROM_INSIDE = [
    ("lock", "--check"),
    ("verify",),
    ("tree",),
    ("outdated",),
    ("export", "--format", "kernels-0.17"),
    ("download",),
    ("sync",),
    ("cache", "prune", "--dry-run"),
]


@pytest.fixture
def nested(hub_env, tmp_path: Path) -> tuple[Path, Path]:
    """A locked project and a folder two levels inside it (proj/src/myapp)."""
    project = write_project(tmp_path / "proj", f'"{LAYER_NORM}" = ">=0.2"')
    lock_project(project)
    inside = project / "src" / "myapp"
    inside.mkdir(parents=True)
    return project, inside


@pytest.mark.parametrize("args", FROM_INSIDE, ids=lambda a: " ".join(a))
def test_a_project_command_from_a_subfolder_uses_the_project_around_it(nested, args) -> None:
    project, inside = nested
    result = run_kernels(*args, cwd=inside)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert lines.count(f"using {project}") == 1, result.stderr
    assert lines[0] == f"using {project}"
    assert "no pyproject.toml" not in result.stdout + result.stderr


def test_add_remove_and_to_wheel_from_a_subfolder_edit_and_package_the_project(nested, tmp_path) -> None:
    project, inside = nested
    removed = run_kernels("remove", LAYER_NORM, cwd=inside)
    assert removed.returncode == 0, removed.stderr
    assert removed.stderr.splitlines()[0] == f"using {project}"
    assert LAYER_NORM not in (project / "pyproject.toml").read_text()
    added = run_kernels("add", f"{LAYER_NORM}>=0.2", cwd=inside)
    assert added.returncode == 0, added.stderr
    assert f'"{LAYER_NORM}" = ">=0.2"' in (project / "pyproject.toml").read_text()
    wheels = run_kernels("to-wheel", "-o", str(tmp_path / "wheels"), cwd=inside)
    assert wheels.returncode == 0, wheels.stderr
    assert wheels.stderr.splitlines()[0] == f"using {project}"
    assert list((tmp_path / "wheels").glob("*.whl"))
    assert not (inside / "pyproject.toml").exists() and not (inside / "kernels.lock").exists()


def test_quiet_silences_the_using_line_and_a_folder_given_is_taken_as_it_is(nested) -> None:
    project, inside = nested
    for args in (("-q", "verify"), ("verify", "-q")):
        result = run_kernels(*args, cwd=inside)
        assert result.returncode == 0, result.stderr
        assert "using" not in result.stderr
    given = run_kernels("verify", str(project), cwd=inside)
    assert given.returncode == 0 and "using" not in given.stderr
    # A folder given is the project: no walk up from it.
    wrong = run_kernels("verify", str(inside), cwd=project)
    assert wrong.returncode == 2
    assert f"no pyproject.toml in {inside}" in wrong.stderr
    # In the project folder itself, nothing is said.
    assert "using" not in run_kernels("verify", cwd=project).stderr


def test_the_walk_stops_at_a_repository_root(nested) -> None:
    project, inside = nested
    (project / "src" / ".git").mkdir()  # src/ is a checkout of its own
    result = run_kernels("verify", cwd=inside)
    assert result.returncode == 2
    assert "using" not in result.stderr
    assert result.stderr == no_project_line(inside, project / "src")
    # The loader draws the same boundary.
    previous = os.getcwd()
    os.chdir(inside)
    try:
        with pytest.raises(Exception, match="no kernels.lock found"):
            find_lock(caller="__main__")
    finally:
        os.chdir(previous)


def no_project_line(start: Path, last: Path) -> str:
    return (
        f"error: no pyproject.toml or kernels.lock in {start} or above it up to {last} (the search stops there: "
        "it holds .git, a repository root); run the command in the project folder, or pass the folder as PROJECT_DIR\n"
    )


EVERY_PROJECT_COMMAND = [*FROM_INSIDE, ("add", f"{LAYER_NORM}>=0.2"), ("remove", LAYER_NORM),
                         ("to-wheel", "-o", "wheels"), ("--json", "tree")]  # fmt: skip


@pytest.mark.parametrize("args", EVERY_PROJECT_COMMAND, ids=lambda a: " ".join(a))
def test_no_project_up_to_a_repository_root_is_one_line_naming_where_it_looked(tmp_path, args) -> None:
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    inside = checkout / "src" / "myapp"
    inside.mkdir(parents=True)
    write_project(tmp_path, f'"{LAYER_NORM}" = ">=0.2"')  # above the repository root: never taken

    result = run_kernels(*args, cwd=inside)

    assert result.returncode == 2
    line = no_project_line(inside, checkout)
    if args[0] == "--json":
        assert json.loads(result.stdout)["error"] == line.removeprefix("error: ").rstrip("\n")
    else:
        assert (result.stdout, result.stderr) == ("", line)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "checkout", "checkout/.git", "checkout/src", "checkout/src/myapp", "pyproject.toml",
    ]  # nothing written  # fmt: skip


def test_in_the_repository_root_itself_it_names_that_one_folder(tmp_path) -> None:
    (tmp_path / ".git").mkdir()
    result = run_kernels("lock", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        f"error: no pyproject.toml or kernels.lock in {tmp_path} (the search stops there: it holds .git, a repository "
        "root); run the command in the project folder, or pass the folder as PROJECT_DIR\n"
    )


def test_the_loader_finds_the_same_project(nested) -> None:
    project, inside = nested
    previous = os.getcwd()
    os.chdir(inside)
    try:
        assert find_lock(caller="__main__").path == str(project / "kernels.lock")
    finally:
        os.chdir(previous)


def test_the_installed_command_from_a_subfolder(nested) -> None:
    project, inside = nested
    result = subprocess.run([KERNELS, "verify"], cwd=inside, capture_output=True, text=True, env=os.environ, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [f"using {project}"]
    assert "kernels.lock and pyproject.toml agree (2 kernels)" in result.stdout


def test_a_working_directory_removed_meanwhile_is_no_traceback(tmp_path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    previous = os.getcwd()
    os.chdir(gone)
    gone.rmdir()
    try:
        result = run_kernels("verify")
    finally:
        os.chdir(previous)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr

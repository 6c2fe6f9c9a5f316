"""Where the ``kernels`` command's output goes: ``kernels export -o`` never over the project's
own files.

The export tests run the command in-process (tests/fixtures/cli.py) on a project locked
without the Hub (the ``cached`` fixture).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernel_deps.lockfile import read_lockfile
from tests.fixtures.cli import run_kernels

# -- kernels export -o -------------------------------------------------------------------


def project_files(project: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(project.iterdir()) if path.is_file()}


@pytest.mark.parametrize(
    ("output", "name"),
    [
        ("kernels.lock", "kernels.lock"),
        ("./kernels.lock", "kernels.lock"),
        ("pyproject.toml", "pyproject.toml"),
        ("{project}/pyproject.toml", "pyproject.toml"),
        ("sub/../kernels.lock", "kernels.lock"),
        ("{tmp}/alias/kernels.lock", "kernels.lock"),  # the project folder through a symlink
        ("{tmp}/link.lock", "kernels.lock"),  # a symlink to the lock
        ("{tmp}/hard.lock", "kernels.lock"),  # a hard link to the lock
        ("{project}/.kernels-edit.json", ".kernels-edit.json"),  # the edit journal kept beside them
    ],
    ids=["name", "dot-slash", "pyproject", "absolute", "dot-dot", "folder-symlink", "file-symlink", "hard-link", "journal"],
)
def test_export_refuses_to_overwrite_the_projects_own_files(cached, tmp_path: Path, output: str, name: str) -> None:
    project, _ = cached
    (project / "sub").mkdir()
    (tmp_path / "alias").symlink_to(project, target_is_directory=True)
    (tmp_path / "link.lock").symlink_to(project / "kernels.lock")
    os.link(project / "kernels.lock", tmp_path / "hard.lock")
    before = project_files(project)
    named = output.format(project=project, tmp=tmp_path)

    result = run_kernels("export", "--format", "kernels-0.17", "-o", named, ".", cwd=project)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr == (
        f"error: --output {Path(named)} is the project's own {name}, which export would overwrite with another "
        "tool's format; name another file, or '-' for stdout\n"
    )
    assert project_files(project) == before  # nothing written
    assert (tmp_path / "hard.lock").read_bytes() == before["kernels.lock"] and (tmp_path / "link.lock").is_symlink()
    read_lockfile(project / "kernels.lock")  # still kernel-deps' lock


def test_export_to_dash_is_stdout_and_to_another_file_is_that_file(cached, tmp_path: Path) -> None:
    project, _ = cached
    before = project_files(project)
    plain = run_kernels("export", "--format", "kernels-0.17", str(project))
    assert plain.returncode == 0, plain.stderr
    dashed = run_kernels("export", "--format", "kernels-0.17", "-o", "-", str(project), cwd=tmp_path)
    assert (dashed.returncode, dashed.stdout, dashed.stderr) == (0, plain.stdout, "")
    assert not (tmp_path / "-").exists()

    beside = run_kernels("export", "--format", "kernels-0.17", "-o", "hf.lock", ".", cwd=project)
    assert beside.returncode == 0, beside.stderr
    assert (project / "hf.lock").read_text() + "\n" == plain.stdout
    assert beside.stderr == "Wrote hf.lock (kernels-0.17 format, 1 kernels)\n"
    assert {k: v for k, v in project_files(project).items() if k != "hf.lock"} == before

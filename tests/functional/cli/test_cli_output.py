"""Where the ``kernels`` command's output goes: ``kernels export -o`` never over the project's
own files, and output into a pipe whose reader has gone.

The export tests run the command in-process (tests/fixtures/cli.py) on a project locked
without the Hub (the ``cached`` fixture). A closed pipe is what only a real process shows
(its stdout is a file descriptor, and the interpreter flushes it as it exits), so those
tests run the installed ``kernels`` with its stdout on a pipe whose reading end is closed
before the command starts: every write it makes meets EPIPE.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kernel_deps.lock.read import read_lock
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.processes import KERNELS


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
    ids=["name", "dot-slash", "pyproject", "absolute", "dot-dot", "folder-symlink", "file-symlink", "hard-link",
         "journal"],  # fmt: skip
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
    read_lock(project / "kernels.lock", purpose="use").lock  # still kernel-deps' lock


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
    assert beside.stderr == "Wrote hf.lock (kernels-0.17 format, 1 kernel)\n"
    assert {k: v for k, v in project_files(project).items() if k != "hf.lock"} == before


# -- a closed pipe -----------------------------------------------------------------------


def into_a_closed_pipe(
    *args: str, close_stderr: bool = False, cwd: Path | None = None, **env: str | None
) -> subprocess.CompletedProcess:
    """Run ``kernels ARGS`` with stdout (and stderr, with ``close_stderr``) on a pipe nobody reads."""
    reading, writing = os.pipe()
    os.close(reading)
    full = {k: v for k, v in os.environ.items() if k not in env}
    full.update({k: v for k, v in env.items() if v is not None})
    try:
        return subprocess.run(
            [KERNELS, *args], stdin=subprocess.DEVNULL, stdout=writing,
            stderr=writing if close_stderr else subprocess.PIPE, env=full, cwd=cwd, text=True, timeout=300,
        )  # fmt: skip
    finally:
        os.close(writing)


# Python buffers stdout unless PYTHONUNBUFFERED is set: then the last write meets the
# closed pipe only in the flush as the interpreter exits.
BUFFERING = pytest.mark.parametrize("unbuffered", ["1", None], ids=["unbuffered", "buffered"])


@BUFFERING
def test_lock_and_download_into_a_closed_pipe_do_their_work_and_exit_0(hub_env, tmp_path: Path, unbuffered) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/layer-norm" = ">=0.1"\n"kernels-test/flash" = 1')
    result = into_a_closed_pipe("lock", str(project), PYTHONUNBUFFERED=unbuffered)
    assert (result.returncode, result.stderr) == (0, "")
    assert {k.repo_id for k in read_lock(project / "kernels.lock", purpose="use").lock.kernels} == {
        "kernels-test/activation", "kernels-test/flash", "kernels-test/layer-norm",
    }  # fmt: skip
    checked = run_kernels("lock", "--check", str(project), env={"HF_HUB_OFFLINE": "1"})
    assert checked.returncode == 0, checked.stderr
    # download prints a line per variant as it goes: the first meets the closed pipe, and
    # the rest are still downloaded.
    fetched = into_a_closed_pipe("download", str(project), PYTHONUNBUFFERED=unbuffered)
    assert (fetched.returncode, fetched.stderr) == (0, "")
    verified = run_kernels("verify", "--require-cached", str(project), env={"HF_HUB_OFFLINE": "1"})
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "3 cached variants verified" in verified.stdout


@BUFFERING
@pytest.mark.parametrize(
    "args", [("--help",), ("versions", "--help"), ("verify", "{project}"), ("export", "--format", "kernels-0.16", ".")]
)
def test_a_command_that_succeeds_into_a_closed_pipe_exits_0_without_a_traceback(cached, args, unbuffered) -> None:
    project, _ = cached
    result = into_a_closed_pipe(*(a.format(project=project) for a in args), cwd=project, PYTHONUNBUFFERED=unbuffered)
    assert (result.returncode, result.stderr) == (0, "")


def test_a_command_that_fails_into_a_closed_pipe_exits_with_its_own_code(cached) -> None:
    project, folder = cached
    # Both streams into the closed pipe (2>&1 | head): each command still exits as it did.
    assert into_a_closed_pipe("verify", str(project), close_stderr=True).returncode == 0
    assert into_a_closed_pipe("verify", str(project / "nowhere"), close_stderr=True).returncode == 2
    (folder / "extra.txt").write_text("not locked\n")  # a problem verify reports on stdout, exit 1
    found = into_a_closed_pipe("verify", str(project))
    assert (found.returncode, found.stderr) == (1, "")
    assert into_a_closed_pipe("verify", str(project), close_stderr=True).returncode == 1

"""File-system failures while downloading: one line naming the path, nothing half-placed."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_deps import get_locked_kernel
from kernel_deps.cache import store as cache
from kernel_deps.core.errors import FileWriteError
from tests.fixtures.builder import KernelRepo, Release
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.projects import write_project

@pytest.fixture
def project(hub_env, tmp_path) -> Path:
    repo_id = "kernels-test/download-fs"
    if repo_id not in hub_env.repos:
        hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    return write_project(tmp_path / "app", f'"{repo_id}" = ">=1"', locked=True)


def download(project: Path, cache_dir: Path) -> CliResult:
    """`kernels download`, run in-process (tests/fixtures/cli.py) so mutation testing sees it."""
    return run_kernels("download", str(project), env={"HF_HUB_CACHE": str(cache_dir)})


def one_line(result: CliResult) -> str:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    return line


def test_a_cache_that_is_a_regular_file_is_one_line(project, tmp_path) -> None:
    not_a_folder = tmp_path / "cache-file"
    not_a_folder.write_text("not a folder")
    line = one_line(download(project, not_a_folder))
    assert line == (f"error: {not_a_folder}: the kernel cache is not a folder; point KERNELS_CACHE or "
                    "HF_HUB_CACHE at a folder (or unset them)")  # fmt: skip
    assert not_a_folder.read_text() == "not a folder"


def test_a_cache_path_over_the_system_limit_is_one_line(project, tmp_path) -> None:
    too_long = tmp_path.joinpath(*["d" * 200] * 25)  # about 5000 characters: over PATH_MAX
    line = one_line(download(project, too_long))
    assert line == (f"error: {too_long}: cannot be used as the kernel cache (File name too long); point "
                    "KERNELS_CACHE or HF_HUB_CACHE at a folder (or unset them)")  # fmt: skip


def test_a_blocked_snapshot_folder_is_one_line_and_leaves_no_staging(project, tmp_path) -> None:
    root = tmp_path / "hf-cache-blocked"
    lock = (project / "kernels.lock").read_text()
    sha = next(line.split('"')[3] for line in lock.splitlines() if '"sha"' in line)
    repo = cache.repo_dir("kernels-test/download-fs", root=root)
    blocker = repo / "snapshots" / sha / "build"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("a file where the build folder belongs")

    line = one_line(download(project, root))
    assert "kernels-test/download-fs" in line and str(blocker) in line and "cannot write" in line
    staging = repo / ".kernel-deps" / "staging"
    assert not staging.exists() or list(staging.iterdir()) == []
    assert blocker.read_text() == "a file where the build folder belongs"


def test_the_loader_reports_an_unusable_cache_in_one_line(project, tmp_path, monkeypatch) -> None:
    not_a_folder = tmp_path / "cache-file"
    not_a_folder.write_text("")
    monkeypatch.setenv("HF_HUB_CACHE", str(not_a_folder))
    with pytest.raises(FileWriteError, match="the kernel cache is not a folder") as caught:
        get_locked_kernel("kernels-test/download-fs", lockfile=project / "kernels.lock")
    assert "\n" not in caught.value.message


def test_a_link_planted_at_a_partial_download_is_never_written_through(project, tmp_path) -> None:
    first = tmp_path / "first-cache"
    assert download(project, first).returncode == 0
    (repo,) = first.glob("kernels--*")
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"x")
    cache_dir = tmp_path / "cache"
    partials = cache_dir / repo.name / ".kernel-deps" / "tmp"
    partials.mkdir(parents=True)
    for blob in (repo / "blobs").iterdir():  # a partial of each file, leading to a file of the user's
        (partials / f"{blob.name}.part").symlink_to(outside)
    result = download(project, cache_dir)
    assert outside.read_bytes() == b"x"
    line = one_line(result)  # refused, naming the partial: it is removed, or the next run says so again
    assert ".part" in line and str(partials) in line

"""``--into`` leaves no empty folder of its own behind: not after it succeeds, not after
it refuses, not after a run that was interrupted, in the folder nor beside it.

Each case lists the folder (and its parent) after a real command and looks for an empty
folder, the store's staging folder above all (``<repo>/.kernel-deps/staging``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from tests.fixtures.builder import CPU_VARIANT
from tests.fixtures.cli import run_kernels
from tests.fixtures.processes import KERNELS
from tests.fixtures.projects import write_project

DEPS = '"kernels-test/layer-norm" = ">=0.2"\n"kernels-test/flash" = 1'


def empty_folders(*tops: Path) -> list[Path]:
    """Every empty folder below ``tops`` (the test's own folders not counted)."""
    found = []
    for top in tops:
        if not top.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            if not dirnames and not filenames and Path(dirpath) != top:
                found.append(Path(dirpath))
    return sorted(found)


def staging_folders(top: Path) -> list[Path]:
    return sorted(p for p in top.rglob("staging") if p.parent.name == ".kernel-deps") if top.is_dir() else []


@pytest.fixture
def project(hub_env, tmp_path: Path) -> Path:
    return write_project(tmp_path / "app", DEPS, locked=True)


@pytest.fixture
def beside(tmp_path: Path) -> Path:
    """The folder that holds the --into folder, alone in it (the project lives elsewhere)."""
    place = tmp_path / "out"
    place.mkdir()
    return place


@pytest.mark.parametrize("verb", ["download", "sync"])
def test_after_success_no_empty_folder_is_left_in_the_folder_or_beside_it(project, beside, verb) -> None:
    into = beside / "shipped"
    for _ in range(2):  # a first run, then one over its own folder
        result = run_kernels(verb, "--into", str(into), str(project))
        assert result.returncode == 0, (result.stdout, result.stderr)
        assert empty_folders(beside) == [] and staging_folders(into) == []
    assert sorted(p.name for p in beside.iterdir()) == ["shipped"]
    placed = {p.name for p in into.iterdir()}
    assert {".kernel-deps-into.json", "kernels--kernels-test--flash", "kernels--kernels-test--layer-norm"} <= placed


@pytest.mark.parametrize("verb", ["download", "sync"])
def test_a_refused_folder_is_left_as_it_was_with_nothing_made_beside_it(project, beside, verb) -> None:
    # A new folder under a new parent, refused because a file is in the way of a placed path.
    foreign = beside / "theirs"
    repo = foreign / "kernels--kernels-test--flash"
    repo.mkdir(parents=True)
    (foreign / ".kernel-deps-into.json").write_text('{"kernel-deps-into": 1, "placed": []}')
    (repo / "blobs").write_text("a file where --into would make a folder")
    before = sorted(str(p.relative_to(beside)) for p in beside.rglob("*"))
    result = run_kernels(verb, "--into", str(foreign), str(project))
    assert result.returncode == 2, result.stderr
    assert sorted(str(p.relative_to(beside)) for p in beside.rglob("*")) == before
    assert empty_folders(beside) == [] and staging_folders(foreign) == []
    # A folder named under one that does not exist, refused: neither is made.
    (project / "kernels.lock").unlink()
    missing = beside / "new" / "shipped"
    result = run_kernels(verb, "--frozen" if verb == "sync" else "--all-variants", "--into", str(missing),
                         str(project))  # fmt: skip
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert not (beside / "new").exists() and empty_folders(beside) == []


def test_after_an_interrupted_run_no_empty_staging_folder_is_left(hub_env, proxy, tmp_path) -> None:
    """Real processes, interrupted (Ctrl-C) or killed at moments while downloading and while
    placing: each interrupted run leaves no staging folder and no empty folder; nor does the
    run after a kill."""
    from tests.fixtures.downloads import add_repos

    project = write_project(tmp_path / "app", add_repos(hub_env, "into-interrupted", lfs_size=1 << 20, kernels=2))
    assert run_kernels("lock", str(project)).returncode == 0
    proxy.latency = 0.05
    beside = tmp_path / "out"
    beside.mkdir()
    env = {**os.environ, "HF_ENDPOINT": proxy.url}
    args = [KERNELS, "download", "-q", "--all-variants", str(project)]
    # While downloading (a slow Hub), then, once all is cached, over the run's whole length:
    # a fresh folder each time, so that every run places every variant.
    moments = [(signal.SIGINT, 0.6), (signal.SIGINT, 1.4), (signal.SIGKILL, 1.0)]
    moments += [(signal.SIGINT, 0.25 + 0.05 * step) for step in range(16)]
    for number, (how, delay) in enumerate(moments):
        into = beside / f"shipped-{number}"
        process = subprocess.Popen([*args, "--into", str(into)], env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        time.sleep(delay)
        os.killpg(process.pid, how)
        process.wait(timeout=60)
        if how == signal.SIGKILL:  # nothing runs after a kill: the next run over the folder tidies it
            rerun = run_kernels("download", "--all-variants", "--into", str(into), str(project),
                                env={"HF_ENDPOINT": proxy.url})  # fmt: skip
            assert rerun.returncode == 0, (rerun.stdout, rerun.stderr)
        assert staging_folders(into) == [] and empty_folders(beside) == [], (delay, empty_folders(beside))

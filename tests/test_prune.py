"""`kernels cache prune`: what no given project's lock pins leaves the cache; nothing locked does."""

from __future__ import annotations

import os
import time

from kernel_deps.cache import store as cache
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.schemas import validated


def test_prune_keeps_every_locked_variant_and_removes_the_rest(hub_env, tmp_path) -> None:
    first, second = "kernels-test/prune-first", "kernels-test/prune-second"
    for repo_id in (first, second):
        hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("1.1.0"))))
    app = write_project(tmp_path / "app", {first: ">=1.0,<1.1"})
    other = write_project(tmp_path / "other", {second: ">=1"})
    for project in (app, other):
        assert run_kernels("sync", str(project)).returncode == 0
    # An older checkout of app had first at 1.1.0, all variants: in the cache, pinned by nobody now.
    old = write_project(tmp_path / "old", {first: ">=1.1"})
    assert run_kernels("sync", str(old)).returncode == 0
    assert run_kernels("download", "--all-variants", str(old)).returncode == 0
    root = cache.cache_root()
    repo = cache.find_repo_dir(first)
    unpinned = hub_env.repos[first].commits["1.1.0"]
    # What is not a kernel repo of a shared Hugging Face cache, and a download left a week ago.
    model = root / "models--someone--bert" / "snapshots" / "abc"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    partial = repo / ".kernel-deps" / "tmp" / ("1" * 40 + ".part")
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_bytes(b"half")
    week_ago = time.time() - 7 * 24 * 3600
    os.utime(partial, (week_ago, week_ago))
    fresh = repo / ".kernel-deps" / "tmp" / ("2" * 40 + ".part")
    fresh.write_bytes(b"in flight")
    blobs_before = set((repo / "blobs").iterdir())

    dry = run_kernels("cache", "prune", "--dry-run", str(app), str(other))
    assert dry.returncode == 0, dry.stderr
    assert f"would remove commit {repo / 'snapshots' / unpinned} (" in dry.stdout
    assert f"would remove partial {partial} (4 bytes)" in dry.stdout
    assert "Would free " in dry.stdout
    assert (repo / "snapshots" / unpinned).is_dir() and partial.exists()  # nothing removed

    payload = validated(run_kernels("cache", "prune", "--json", str(app), str(other)), "prune")
    assert payload["bytes"] > 0 and not payload["dry_run"]
    assert {(k["repo_id"], k["commit"]) for k in payload["kept"]} == {
        (first, hub_env.repos[first].commits["1.0.0"]), (second, hub_env.repos[second].commits["1.1.0"]),
    }  # fmt: skip
    assert not (repo / "snapshots" / unpinned).exists() and not partial.exists()
    assert fresh.exists()  # a download running now keeps its partial file
    assert (model / "config.json").read_text() == "{}"
    assert set((repo / "blobs").iterdir()) < blobs_before
    for project in (app, other):
        check = run_kernels("verify", "--require-cached", str(project), env={"HF_HUB_OFFLINE": "1"})
        assert check.returncode == 0, check.stdout

    # With app alone, second is pinned by nobody: its repo goes whole.
    assert run_kernels("cache", "prune", "-q", str(app)).returncode == 0
    assert cache.find_repo_dir(second) is None
    assert run_kernels("verify", "--require-cached", str(app), env={"HF_HUB_OFFLINE": "1"}).returncode == 0
    build = repo / "snapshots" / hub_env.repos[first].commits["1.0.0"] / "build"
    assert {p.name for p in build.iterdir()} == {CPU_VARIANT}


def test_a_project_without_a_lock_stops_prune_before_anything_goes(hub_env, tmp_path) -> None:
    hub_env.add_repo(KernelRepo("kernels-test/prune-kept", (Release("1.0.0"),)))
    app = write_project(tmp_path / "app", {"kernels-test/prune-kept": ">=1"})
    assert run_kernels("sync", str(app)).returncode == 0
    unlocked = write_project(tmp_path / "unlocked", {"kernels-test/prune-kept": ">=1"})
    result = run_kernels("cache", "prune", str(unlocked))
    assert result.returncode == 2 and "kernels.lock" in result.stderr
    assert cache.find_repo_dir("kernels-test/prune-kept") is not None

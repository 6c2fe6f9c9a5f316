"""`kernels cache prune`: what no given project's lock pins leaves the cache; nothing locked does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

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


def _pruned_cache(hub_env, tmp_path, name: str) -> tuple[Path, Path, str, str]:
    """A project pinning ``name`` 1.0.0 and a cache that also holds 1.1.0 (all variants),
    pinned by nobody: (project, repo folder, pinned commit, unpinned commit)."""
    repo_id = f"kernels-test/prune-{name}"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("1.1.0"))))
    app = write_project(tmp_path / "app", {repo_id: ">=1.0,<1.1"})
    old = write_project(tmp_path / "old", {repo_id: ">=1.1"})
    assert run_kernels("sync", str(app)).returncode == 0
    assert run_kernels("sync", str(old)).returncode == 0
    assert run_kernels("download", "--all-variants", str(old)).returncode == 0
    commits = hub_env.repos[repo_id].commits
    return app, cache.find_repo_dir(repo_id), commits["1.0.0"], commits["1.1.0"]


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_prune_removes_nothing_through_a_link_and_removes_a_link_as_a_link(hub_env, tmp_path) -> None:
    app, repo, pinned, unpinned = _pruned_cache(hub_env, tmp_path, "links")
    # blobs/ moved elsewhere and linked back: the pinned variant still resolves through it,
    # and the outside folder holds blobs no kept snapshot links, and a file of the user's.
    outside = tmp_path / "outside-blobs"
    (repo / "blobs").rename(outside)
    (repo / "blobs").symlink_to(outside)
    (outside / "precious.txt").write_text("the user's")
    # The unpinned commit's snapshot is a link to a folder of the user's.
    elsewhere = tmp_path / "outside-snapshot"
    shutil.copytree(repo / "snapshots" / unpinned, elsewhere, symlinks=True)
    (elsewhere / "notes.txt").write_text("mine")
    shutil.rmtree(repo / "snapshots" / unpinned)
    (repo / "snapshots" / unpinned).symlink_to(elsewhere)
    # kernel-deps' own folder is a link to a folder holding a week-old "partial".
    records = tmp_path / "outside-records"
    (records / "tmp").mkdir(parents=True)
    stale = records / "tmp" / ("3" * 40 + ".part")
    stale.write_bytes(b"not a partial")
    week_ago = time.time() - 7 * 24 * 3600
    os.utime(stale, (week_ago, week_ago))
    shutil.rmtree(repo / ".kernel-deps")
    (repo / ".kernel-deps").symlink_to(records)
    before = {folder: _tree(folder) for folder in (outside, elsewhere, records)}

    payload = validated(run_kernels("cache", "prune", "--json", str(app)), "prune")
    assert {tuple(k.values()) for k in payload["kept"]} == {("kernels-test/prune-links", pinned)}
    assert {folder: _tree(folder) for folder in (outside, elsewhere, records)} == before  # nothing outside touched
    assert not os.path.lexists(repo / "snapshots" / unpinned)  # the link went, as a link
    assert (repo / "blobs").is_symlink() and (repo / ".kernel-deps").is_symlink()
    skipped = {s["path"]: s["reason"] for s in payload["skipped"]}
    assert "symbolic link" in skipped[str(repo / "blobs")]
    assert "symbolic link" in skipped[str(repo / ".kernel-deps")]
    text = run_kernels("cache", "prune", str(app))
    assert text.returncode == 0 and f"skipped {repo / 'blobs'}: a symbolic link" in text.stdout
    assert (repo / "snapshots" / pinned / "build").is_dir()


def test_prune_removes_a_link_inside_a_variant_and_a_linked_repo_as_links(hub_env, tmp_path) -> None:
    app, repo, _, unpinned = _pruned_cache(hub_env, tmp_path, "inner-links")
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.txt").write_text("keep me")
    # A file of the unpinned variant and a folder inside it lead outside.
    variant = next((repo / "snapshots" / unpinned / "build").iterdir())
    (variant / "__init__.py").unlink()
    (variant / "__init__.py").symlink_to(precious / "data.txt")
    (variant / "linked-folder").symlink_to(precious)
    # A kernel repo no lock pins that is itself a link to a folder of the user's.
    (cache.cache_root() / "kernels--someone--linked").symlink_to(precious)
    result = run_kernels("cache", "prune", str(app))
    assert result.returncode == 0, result.stderr
    assert not (repo / "snapshots" / unpinned).exists()
    assert not os.path.lexists(cache.cache_root() / "kernels--someone--linked")
    assert _tree(precious) == {"data.txt": b"keep me"}


def test_prune_skips_the_variant_a_running_download_holds_and_keeps_its_blobs(hub_env, tmp_path) -> None:
    app, repo, _, unpinned = _pruned_cache(hub_env, tmp_path, "busy")
    variant = sorted(p.name for p in (repo / "snapshots" / unpinned / "build").iterdir())[0]
    just_placed = repo / "blobs" / ("4" * 40)  # what a running download placed, linked by no snapshot yet
    just_placed.write_bytes(b"fresh")
    lock = cache.variant_lock_path(repo, unpinned, variant)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from filelock import FileLock; l = FileLock(sys.argv[1]); l.acquire(); "
         "print('held', flush=True); sys.stdin.read()", str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        blobs_before = set((repo / "blobs").iterdir())
        payload = validated(run_kernels("cache", "prune", "--json", str(app)), "prune")
        skipped = {s["path"]: s["reason"] for s in payload["skipped"]}
        running = f"a download of {unpinned[:12]} {variant} is running (it holds {lock})"
        assert skipped[str(repo / "snapshots" / unpinned)] == running
        assert payload["ok"] is False  # something it would remove was left
        assert skipped[str(repo / "blobs")] == "the blobs no snapshot links: " + running
        assert (repo / "snapshots" / unpinned / "build" / variant).is_dir()
        assert set((repo / "blobs").iterdir()) == blobs_before and just_placed.read_bytes() == b"fresh"
        assert lock.exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    # The download has ended: the next prune takes its lock and removes what no lock pins.
    payload = validated(run_kernels("cache", "prune", "--json", str(app)), "prune")
    assert payload["skipped"] == [] and payload["ok"] is True
    assert not (repo / "snapshots" / unpinned).exists() and not just_placed.exists()
    assert run_kernels("verify", "--require-cached", str(app), env={"HF_HUB_OFFLINE": "1"}).returncode == 0

"""What `kernels download` does with what earlier runs left in the cache: old partial
downloads and their lock files are removed while fresh ones stay, a complete partial
file is placed without fetching it again, damaged or unreadable blobs are fetched anew,
and a variant replaced in place leaves no old copy behind, even one that cannot be fully
removed. Real repos on the local Hub, the command run in-process (tests/fixtures/cli.py)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.commands.lock import lock_project
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.rewrites import ops_blob_id_lie
from tests.fixtures.unprivileged import where_modes_apply

REPO_ID = "kernels-test/cache-downloads"
TWO_DAYS = 2 * 24 * 3600


@pytest.fixture
def project(hub_env, tmp_path) -> Path:
    """A project locking REPO_ID v1.0.0, nothing downloaded."""
    if REPO_ID not in hub_env.repos:
        hub_env.add_repo(KernelRepo(REPO_ID, (Release("1.0.0"),)))
    folder = write_project(tmp_path / "app", f'"{REPO_ID}" = ">=1"')
    lock_project(folder)
    return folder


def _download(project: Path, *, unprivileged: bool = False) -> object:
    args = ("download", str(project), "--variant", CPU_VARIANT, "--json")
    return where_modes_apply(run_kernels, *args) if unprivileged else run_kernels(*args)


def _verified(project: Path) -> bool:
    return run_kernels("verify", str(project), "--require-cached").returncode == 0


def _variant(project: Path) -> Path:
    sha = read_lock(project / "kernels.lock", purpose="use").lock.get(REPO_ID).sha
    return cache.variant_dir(cache.repo_dir(REPO_ID), sha, CPU_VARIANT)


def _lfs_file(hub_env) -> tuple[str, object]:
    built = hub_env.repos[REPO_ID]
    return next((p, c) for p, c in built.files["1.0.0"].items() if c.lfs and CPU_VARIANT in p)


def _age(path: Path) -> None:
    then = time.time() - TWO_DAYS
    os.utime(path, (then, then), follow_symlinks=False)


def _tamper(folder: Path) -> Path:
    """Replace a linked file in a subfolder of a placed variant with other bytes; the file."""
    victim = next(p for p in sorted(folder.rglob("*/*.py")) if p.is_symlink())
    victim.unlink()
    victim.write_bytes(b"print('planted')\n")
    return victim


def test_old_partial_downloads_and_their_locks_are_removed_fresh_ones_kept(project) -> None:
    repo = cache.repo_dir(REPO_ID)
    tmp = repo / ".kernel-deps" / "tmp"
    locks = repo.parent / ".locks" / repo.name
    tmp.mkdir(parents=True)
    locks.mkdir(parents=True)
    stale = [tmp / "aaaa.part", locks / "aaaa.part.kernel-deps.lock"]
    fresh = [tmp / "bbbb.part", locks / "bbbb.part.kernel-deps.lock"]
    blocker = locks / "0000.part.kernel-deps.lock"  # a folder: cannot be removed as a file, and comes first
    blocker.mkdir()
    _age(blocker)
    for path in stale + fresh:
        path.write_bytes(b"partial")
    for path in stale:
        _age(path)

    result = _download(project)
    assert result.returncode == 0, result.stderr
    assert [p.exists() for p in stale] == [False, False]
    assert [p.exists() for p in fresh] == [True, True]
    assert blocker.is_dir()
    assert _verified(project)


def test_a_complete_partial_file_left_by_an_interrupted_run_is_placed_without_fetching(hub_env, project) -> None:
    assert _download(project).returncode == 0
    rel, content = _lfs_file(hub_env)
    repo = cache.repo_dir(REPO_ID)
    shutil.rmtree(_variant(project))
    blob = cache.blob_path(repo, content.lfs_sha256)
    partial = repo / ".kernel-deps" / "tmp" / f"{content.lfs_sha256}.part"
    os.replace(blob, partial)

    result = _download(project)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [(v["state"], v["files"], v["bytes"]) for v in report["variants"]] == [("downloaded", 1, 0)]
    assert blob.read_bytes() == content.data
    assert not partial.exists()
    assert _verified(project)


def test_blobs_already_in_the_cache_are_not_fetched_again_for_a_removed_variant_folder(project) -> None:
    assert _download(project).returncode == 0
    shutil.rmtree(_variant(project))
    result = _download(project)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["files"], report["variants"][0]["bytes"]) == (0, 0)
    assert _verified(project)


@pytest.mark.parametrize("damage", ["other bytes", "unreadable"])
def test_a_damaged_or_unreadable_blob_is_fetched_again(hub_env, project, damage: str) -> None:
    assert _download(project).returncode == 0
    rel, content = _lfs_file(hub_env)
    blob = cache.blob_path(cache.repo_dir(REPO_ID), content.lfs_sha256)
    shutil.rmtree(_variant(project))  # so the blob is looked at again
    if damage == "other bytes":
        blob.write_bytes(b"\0" * len(content.data))
    else:
        blob.chmod(0)
    try:
        result = _download(project, unprivileged=True)
    finally:
        blob.chmod(0o644)  # the fetched copy, or the one left unreadable
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["files"] == 1
    assert where_modes_apply(blob.read_bytes) == content.data
    assert _verified(project)


def test_a_variant_replaced_in_place_leaves_no_old_copy(project) -> None:
    assert _download(project).returncode == 0
    _tamper(_variant(project))
    assert not _verified(project)
    result = _download(project)
    assert result.returncode == 0, result.stderr
    assert list((cache.repo_dir(REPO_ID) / ".kernel-deps" / "staging").iterdir()) == []
    assert _verified(project)


def test_a_variant_whose_old_copy_cannot_be_fully_removed_is_still_replaced(project) -> None:
    assert _download(project).returncode == 0
    victim = _tamper(_variant(project))
    victim.parent.chmod(0o555)  # a subfolder: the links in it cannot be removed
    try:
        result = _download(project, unprivileged=True)
    finally:
        for folder in cache.repo_dir(REPO_ID).rglob("*"):
            if folder.is_dir() and not folder.is_symlink():
                folder.chmod(0o755)
    assert result.returncode == 0, result.stderr
    assert _verified(project)


def test_a_staging_folder_that_cannot_be_written_is_named_with_its_real_error(project) -> None:
    assert _download(project).returncode == 0
    folder = _variant(project)
    _tamper(folder)
    staging = cache.repo_dir(REPO_ID) / ".kernel-deps" / "staging"
    staging.chmod(0o555)
    try:
        result = _download(project, unprivileged=True)
    finally:
        staging.chmod(0o755)
    assert result.returncode != 0
    assert f"cannot write {staging}/{CPU_VARIANT}." in result.stderr
    assert "(Permission denied)" in result.stderr
    assert folder.is_dir()  # the old copy stays until a new one is complete


def test_a_download_lands_where_huggingface_hub_looks_for_the_repo(project, tmp_path) -> None:
    assert _download(project).returncode == 0
    sha = read_lock(project / "kernels.lock", purpose="use").lock.get(REPO_ID).sha
    folder = tmp_path / "hf-cache" / "kernels--kernels-test--cache-downloads" / "snapshots" / sha / "build" / CPU_VARIANT
    assert (folder / "__init__.py").is_file()


def test_a_file_served_with_other_bytes_than_its_listing_names_is_refused_naming_both_hashes(hub_env, proxy, tmp_path, monkeypatch) -> None:
    """A Hub whose listing gives a plain (non-LFS) file a git blob id its bytes do not have,
    consistently, so the lock records it: the download names the file, the algorithm
    (git's SHA-1) and both hashes."""
    repo_id = "kernels-test/cache-downloads-lying-listing"
    if repo_id not in hub_env.repos:
        hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    fake = "1" * 40

    proxy.rewrite_json = ops_blob_id_lie(fake)
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    project = write_project(tmp_path / "lying", f'"{repo_id}" = ">=1"')
    lock_project(project)
    result = run_kernels("download", str(project), "--variant", CPU_VARIANT)
    assert result.returncode != 0
    assert f"_ops.py does not match the Hub's listing (Expected sha1 {fake}, " in result.stderr

"""What `kernels lock` keeps of the ``metadata.json`` files it reads: each is kept in the
cache as a blob (also when the repo's blobs folder is already there), a second lock reads
it from there instead of asking the Hub, and a kept copy that is damaged is fetched
again. Real repos on the local Hub behind a request-counting proxy, the command run
in-process (tests/fixtures/cli.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.core.hashing import git_blob_id
from kernel_deps.hub.client import MAX_SMALL_FILE_BYTES
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import UNIVERSAL_VARIANT, KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project

REPO_ID = "kernels-test/cache-metadata"
BIG_LFS_ID = "kernels-test/cache-metadata-big-lfs"


@pytest.fixture
def via_proxy(hub_env, proxy, monkeypatch):
    """The local Hub, reached through ``proxy`` so its requests can be counted."""
    if REPO_ID not in hub_env.repos:
        hub_env.add_repo(KernelRepo(REPO_ID, (Release("1.0.0"),)))
    if BIG_LFS_ID not in hub_env.repos:
        # metadata.json stored in LFS (named by SHA-256) and exactly as large as a small file may be.
        metadata = json.dumps({"name": "cache-metadata-big-lfs", "python-depends": [], "backend": {"type": "universal"}})
        data = metadata.encode().ljust(MAX_SMALL_FILE_BYTES - 1) + b"\n"
        files = (("metadata.json", data, True), ("__init__.py", b"VALUE = 1\n", False))
        release = Release("1.0.0", variants=(), custom_variants=((UNIVERSAL_VARIANT, files),))
        hub_env.add_repo(KernelRepo(BIG_LFS_ID, (release,)))
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    return proxy


def _lock(project: Path) -> None:
    (project / "kernels.lock").unlink(missing_ok=True)
    result = run_kernels("lock", str(project))
    assert result.returncode == 0, result.stderr


def _kept_metadata(repo_id: str) -> dict[str, bytes]:
    """Blob name -> bytes of every blob kept for ``repo_id``."""
    blobs = cache.repo_dir(repo_id) / "blobs"
    return {p.name: p.read_bytes() for p in blobs.iterdir()} if blobs.is_dir() else {}


@pytest.mark.parametrize("repo_id", [REPO_ID, BIG_LFS_ID])
@pytest.mark.parametrize("blobs_folder", ["absent", "already there"])
def test_a_second_lock_reads_metadata_from_the_cache_not_the_hub(via_proxy, tmp_path, repo_id, blobs_folder) -> None:
    if blobs_folder == "already there":
        (cache.repo_dir(repo_id) / "blobs").mkdir(parents=True)
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"')
    via_proxy.reset_counts()
    _lock(project)
    assert via_proxy.requests_matching("metadata.json") > 0
    first = read_lock(project / "kernels.lock", purpose="use").lock
    kept = _kept_metadata(repo_id)
    assert kept
    for name, data in kept.items():
        assert json.loads(data)["name"] == repo_id.split("/")[1]
        assert name == (git_blob_id(data) if len(name) == 40 else hashlib.sha256(data).hexdigest())

    via_proxy.reset_counts()
    _lock(project)
    assert via_proxy.requests_matching("metadata.json") == 0
    assert read_lock(project / "kernels.lock", purpose="use").lock == first


def test_a_damaged_kept_metadata_file_is_fetched_again(via_proxy, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{REPO_ID}" = ">=1"')
    _lock(project)
    first = read_lock(project / "kernels.lock", purpose="use").lock
    kept = _kept_metadata(REPO_ID)
    blobs = cache.repo_dir(REPO_ID) / "blobs"
    for name in kept:
        (blobs / name).write_bytes(b'{"kernel-depends": "not a list"}\n')

    via_proxy.reset_counts()
    _lock(project)
    assert via_proxy.requests_matching("metadata.json") == len(kept)
    assert read_lock(project / "kernels.lock", purpose="use").lock == first
    assert _kept_metadata(REPO_ID) == kept

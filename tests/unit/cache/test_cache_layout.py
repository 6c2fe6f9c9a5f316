"""Where the cache is, and what `kernels verify` and `kernels download` make of a cached
variant that was tampered with: real files placed by kernel-deps' own cache code (or
downloaded from the local Hub), the command run in-process (tests/fixtures/cli.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.commands.lock import lock_project
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import UNIVERSAL_VARIANT, KernelRepo, Release
from tests.fixtures.cached_project import COMMIT, REPO_ID, VARIANT
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project

_CACHE_VARIABLES = ("KERNELS_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"HF_HOME": "{tmp}/hf-home"}, "{tmp}/hf-home/hub"),
        ({"XDG_CACHE_HOME": "{tmp}/xdg"}, "{tmp}/xdg/huggingface/hub"),
        ({"HOME": "{tmp}/home"}, "{tmp}/home/.cache/huggingface/hub"),
    ],
)
def test_without_a_cache_variable_the_cache_is_where_huggingface_hub_keeps_it(
    monkeypatch, tmp_path, env: dict[str, str], expected: str
) -> None:
    for name in _CACHE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(tmp=tmp_path))
    assert cache.cache_root() == Path(expected.format(tmp=tmp_path))


def test_a_linked_folder_in_a_cached_variant_is_one_problem_and_never_followed(cached, tmp_path) -> None:
    project, folder = cached
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "planted.py").write_text("print('not from the Hub')\n")
    os.symlink(elsewhere, folder / "startup" / "linked")

    check = cache.check_variant(REPO_ID, COMMIT, VARIANT, _locked_hash(project))
    assert check.problems == (cache.FileProblem("not-a-file", "startup/linked"),)
    result = run_kernels("verify", str(project))
    assert result.returncode == 1
    assert "startup/linked is not a regular file" in result.stdout
    assert "planted.py" not in result.stdout


def test_a_file_linked_outside_the_cache_is_reported_even_with_the_right_bytes(cached, tmp_path) -> None:
    project, folder = cached
    outside = tmp_path / "outside.py"
    outside.write_bytes((folder / "startup" / "_ops.py").read_bytes())  # the locked content
    (folder / "startup" / "_ops.py").unlink()
    os.symlink(outside, folder / "startup" / "_ops.py")

    result = run_kernels("verify", str(project))
    assert result.returncode == 1
    assert f"startup/_ops.py links outside the cache (to {outside.resolve()})" in result.stdout
    assert "Traceback" not in result.stderr


def _locked_hash(project: Path) -> str:
    return read_lock(project / "kernels.lock", purpose="use").lock.get(REPO_ID).variants[VARIANT].hash


def test_download_replaces_a_damaged_cached_variant(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/norm-universal"
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"')
    lock_project(project)
    assert run_kernels("download", str(project)).returncode == 0
    sha = read_lock(project / "kernels.lock", purpose="use").lock.get(repo_id).sha
    folder = cache.variant_dir(cache.find_repo_dir(repo_id), sha, UNIVERSAL_VARIANT)
    (folder / "__init__.py").unlink()
    (folder / "stray.py").write_text("x = 1\n")
    assert run_kernels("verify", str(project)).returncode == 1

    again = run_kernels("download", str(project))
    assert again.returncode == 0, again.stderr
    assert not (folder / "stray.py").exists() and (folder / "__init__.py").is_file()
    verified = run_kernels("verify", str(project), "--require-cached")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_kernel_whose_metadata_is_stored_in_lfs_locks_its_dependencies(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/cache-lfs-metadata"
    metadata = {
        "name": "cache-lfs-metadata",
        "kernel-depends": [{"repo-id": "kernels-test/rotary", "version": ">=1,<2"}],
        "python-depends": [],
        "backend": {"type": "universal"},
    }
    files = (
        ("metadata.json", json.dumps(metadata).encode() + b"\n", True),
        ("__init__.py", b"VALUE = 1\n", False),
    )
    release = Release("1.0.0", variants=(), custom_variants=((UNIVERSAL_VARIANT, files),))
    hub_env.add_repo(KernelRepo(repo_id, (release,)))
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"')
    first = run_kernels("lock", str(project))
    assert first.returncode == 0, first.stderr
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    assert lock.get("kernels-test/rotary").version == "v1.1.0"
    # The second lock reads the metadata kept in the cache: the same answer.
    again = run_kernels("lock", "--upgrade", str(project))
    assert again.returncode == 0, again.stderr
    assert "kernels.lock is up to date" in again.stdout

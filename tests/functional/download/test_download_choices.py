"""What `kernels download` fetches when asked for a variant or a target, what its JSON
report says of a second run, and how it recovers a damaged partial file: real repos on
the local Hub, the command run in-process (tests/fixtures/cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.commands.download import download_project
from kernel_deps.commands.lock import lock_project
from kernel_deps.core.errors import KernelCacheReadError
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, METAL_VARIANT, KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.unprivileged import where_modes_apply

REPO_ID = "kernels-test/download-choices"


@pytest.fixture
def project(hub_env, tmp_path) -> Path:
    """A project locking REPO_ID v1.0.0 (CUDA 12.8, CPU and Metal builds), nothing downloaded."""
    if REPO_ID not in hub_env.repos:
        hub_env.add_repo(KernelRepo(REPO_ID, (Release("1.0.0"),)))
    extra = f'[tool.kernels]\ntargets = ["{CUDA_VARIANT}", "{CPU_VARIANT}"]\n\n'
    folder = write_project(tmp_path / "app", f'"{REPO_ID}" = ">=1"', extra=extra)
    lock_project(folder)
    return folder


def cached_variants(project: Path) -> set[str]:
    sha = read_lock(project / "kernels.lock", purpose="use").lock.get(REPO_ID).sha
    repo = cache.find_repo_dir(REPO_ID)
    build = cache.variant_dir(repo, sha, CPU_VARIANT).parent if repo else None
    return {p.name for p in build.iterdir()} if build and build.is_dir() else set()


@pytest.mark.parametrize("other", [["--variant", CPU_VARIANT], ["--target", CPU_VARIANT], ["--all-targets"]])
def test_all_variants_with_another_choice_is_one_line_exit_2_and_nothing_fetched(project: Path, other) -> None:
    result = run_kernels("download", str(project), "--all-variants", *other)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "error: --all-variants downloads every variant; drop --variant, --target and --all-targets\n"
    )
    assert cached_variants(project) == set()


def test_a_variant_the_kernel_lacks_fetches_its_best_build_for_that_system(project) -> None:
    # No CUDA 12.9 build: the CUDA 12.8 one is what a CUDA 12.9 machine would load.
    result = run_kernels("download", str(project), "--variant", "torch213-cxx11-cu129-x86_64-linux")
    assert result.returncode == 0, result.stderr
    assert cached_variants(project) == {CUDA_VARIANT}


def test_a_variant_name_that_is_no_torch_build_is_refused_naming_the_kernels_variants(project) -> None:
    result = run_kernels("download", str(project), "--variant", "tvm-cpu-x86_64-linux")
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"error: --variant tvm-cpu-x86_64-linux: {REPO_ID} has no such variant; "
        f"it has {CPU_VARIANT}, {CUDA_VARIANT}, {METAL_VARIANT}"
    )
    assert cached_variants(project) == set()


def test_a_target_fetches_exactly_the_build_that_serves_it(project) -> None:
    result = run_kernels("download", str(project), "--target", CUDA_VARIANT)
    assert result.returncode == 0, result.stderr
    assert CUDA_VARIANT in cached_variants(project)
    assert METAL_VARIANT not in cached_variants(project)


def test_the_json_report_of_a_second_run_says_cached_with_no_files_and_names_the_cache(project) -> None:
    first = json.loads(run_kernels("download", str(project), "--json").stdout)
    assert [v["state"] for v in first["variants"]] == ["downloaded"]
    assert first["variants"][0]["files"] > 0
    second = run_kernels("download", str(project), "--json")
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert report["cache"] == str(cache.cache_root())
    assert (report["downloaded"], report["already_cached"], report["files"]) == (0, 1, 0)
    assert [(v["state"], v["files"], v["bytes"]) for v in report["variants"]] == [("cached", 0, 0)]


def test_a_full_size_partial_file_with_other_bytes_is_fetched_again(hub_env, project) -> None:
    """A partial download the size of the file but not its content (a crash mid-write of a
    resumed file, a disk error): the resume fails its hash, so the file is fetched afresh."""
    built = hub_env.repos[REPO_ID]
    (rel, content) = next((p, c) for p, c in built.files["1.0.0"].items() if c.lfs and CPU_VARIANT in p)
    repo = cache.repo_dir(REPO_ID)
    partial = cache.partial_path(repo, content.lfs_sha256)
    partial.write_bytes(b"\0" * len(content.data))

    result = run_kernels("download", str(project), "--variant", CPU_VARIANT)
    assert result.returncode == 0, result.stderr
    assert cache.blob_path(repo, content.lfs_sha256).read_bytes() == content.data
    assert not partial.exists()
    assert run_kernels("verify", str(project), "--require-cached").returncode == 0


def test_an_unreadable_cached_file_is_a_cache_read_error_naming_it(project) -> None:
    """What is already cached is read before anything is fetched: a file there that cannot be
    read is KernelCacheReadError (not a write failure) for a library caller, one line for
    the command, and nothing is fetched over it."""
    assert run_kernels("download", str(project)).returncode == 0
    sha = read_lock(project / "kernels.lock", purpose="use").lock.get(REPO_ID).sha
    cached = cache.variant_dir(cache.find_repo_dir(REPO_ID), sha, CPU_VARIANT) / "__init__.py"
    blob = cached.resolve()
    before = blob.read_bytes()
    blob.chmod(0)
    try:
        with pytest.raises(KernelCacheReadError) as info:
            where_modes_apply(download_project, project)
        result = where_modes_apply(run_kernels, "download", str(project))
    finally:
        blob.chmod(0o644)
    assert info.value.message.startswith(f"{REPO_ID} {CPU_VARIANT}: cannot read {cached} (Permission denied); ")
    assert result.returncode == info.value.exit_code and result.stdout == ""
    assert result.stderr == f"error: {info.value.message}\n"
    assert blob.read_bytes() == before

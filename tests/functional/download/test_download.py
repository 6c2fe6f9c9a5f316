"""`kernels download` against the local Hub: exactly the locked bytes, verified, cached."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.commands.lock import lock_project
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import (
    CPU_VARIANT,
    CUDA_VARIANT,
    METAL_VARIANT,
    KernelRepo,
    Release,
)
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.processes import KERNELS


def kernels(*args: str, **env: str) -> CliResult:
    """The command run in-process (tests/fixtures/cli.py), so mutation testing sees it."""
    return run_kernels(*args, env=env)


def kernels_process(*args: str, **env: str) -> subprocess.CompletedProcess:
    """The installed command in a process of its own: for what only a real start-up shows."""
    return subprocess.run([KERNELS, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=300)


def snapshot_files(root: Path) -> list[str]:
    """Every path under any snapshots/ folder of the cache."""
    return sorted(str(p.relative_to(root)) for p in root.glob("*/snapshots/**/*"))


def cached_variants(root: Path, repo_id: str, commit: str) -> set[str]:
    repo = cache.find_repo_dir(repo_id, root)
    build = repo / "snapshots" / commit / "build" if repo else None
    return {p.name for p in build.iterdir()} if build and build.is_dir() else set()


@pytest.fixture
def locked_app(hub_env, tmp_path):
    project = write_project(tmp_path / "app", '"kernels-test/layer-norm" = ">=0.2"\n"kernels-test/flash" = 1')
    lock_project(project)
    return project


def test_download_then_cached_then_zero_requests(hub_env, proxy, locked_app, monkeypatch) -> None:
    root = cache.cache_root()
    result = kernels("download", str(locked_app), HF_ENDPOINT=proxy.url)
    assert result.returncode == 0, result.stderr
    lock = read_lock(locked_app / "kernels.lock", purpose="use").lock
    for kernel in lock.kernels:
        # This machine (torch 2.13 CPU, x86_64 Linux) loads the CPU variant, and only it.
        assert cached_variants(root, kernel.repo_id, kernel.sha) == {CPU_VARIANT}
        check = cache.check_variant(kernel.repo_id, kernel.sha, CPU_VARIANT, kernel.variants[CPU_VARIANT].hash)
        assert check.ok, check.problems
        assert f"{kernel.repo_id} {CPU_VARIANT}: downloaded" in result.stdout
    assert proxy.requests_matching("/resolve/") > 0

    proxy.reset_counts()
    again = kernels("download", str(locked_app), HF_ENDPOINT=proxy.url)
    assert again.returncode == 0, again.stderr
    assert proxy.total_requests() == 0
    assert "already in the cache, verified" in again.stdout

    offline = kernels("download", str(locked_app), HF_ENDPOINT=proxy.url, HF_HUB_OFFLINE="1")
    assert offline.returncode == 0, offline.stderr
    assert proxy.total_requests() == 0


def imported_top_level(stderr: str) -> set[str]:
    """The top-level packages a process imported, from its ``-X importtime`` report."""
    lines = (line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:"))
    return {name.split(".")[0] for name in lines}


def test_a_warm_download_asks_nothing_and_imports_no_hub_client_yet_rehashes(hub_env, proxy, locked_app) -> None:
    assert kernels("download", str(locked_app), HF_ENDPOINT=proxy.url).returncode == 0
    proxy.reset_counts()
    warm = kernels_process("download", str(locked_app), HF_ENDPOINT=proxy.url, PYTHONPROFILEIMPORTTIME="1")
    assert warm.returncode == 0, warm.stderr[-2000:]
    assert "3 variants present and verified (0 downloaded" in warm.stdout  # layer-norm, activation, flash
    assert proxy.total_requests() == 0
    modules = imported_top_level(warm.stderr)
    assert "kernel_deps" in modules and not modules & {"huggingface_hub", "torch"}
    # Its small variants are hashed in this thread (no pool), and --into's placing (shutil) is not imported.
    assert not modules & {"concurrent", "shutil"}

    # What it calls verified it hashed: a blob changed behind a symlink is found and fetched again.
    kernel = read_lock(locked_app / "kernels.lock", purpose="use").lock.get("kernels-test/flash")
    blob = (cache.variant_dir(cache.find_repo_dir(kernel.repo_id), kernel.sha, CPU_VARIANT) / "_ops.py").resolve()
    blob.write_bytes(blob.read_bytes() + b"# changed\n")
    repaired = kernels("download", str(locked_app), HF_ENDPOINT=proxy.url)
    assert repaired.returncode == 0, repaired.stderr
    assert f"kernels-test/flash {CPU_VARIANT}: downloaded" in repaired.stdout
    assert proxy.requests_matching("/resolve/") > 0
    assert cache.check_variant(kernel.repo_id, kernel.sha, CPU_VARIANT, kernel.variants[CPU_VARIANT].hash).ok


def test_downloaded_bytes_equal_the_builder_files(hub_env, locked_app) -> None:
    assert kernels("download", str(locked_app)).returncode == 0
    lock = read_lock(locked_app / "kernels.lock", purpose="use").lock
    layer_norm = lock.get("kernels-test/layer-norm")
    built = hub_env.repos["kernels-test/layer-norm"]
    folder = cache.variant_dir(cache.find_repo_dir("kernels-test/layer-norm"), layer_norm.sha, CPU_VARIANT)
    expected = {
        path.split("/", 2)[2]: content.data
        for path, content in built.files["0.2.0"].items()
        if path.startswith(f"build/{CPU_VARIANT}/") and "__pycache__" not in path
    }
    got = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert got == expected
    # Symlinks into blobs/, as huggingface_hub lays the cache out.
    assert all((folder / rel).is_symlink() for rel in got)


def test_offline_with_something_missing_fails_clearly(hub_env, locked_app) -> None:
    result = kernels("download", str(locked_app), HF_HUB_OFFLINE="1")
    assert result.returncode == 1
    assert "not in the cache and HF_HUB_OFFLINE is set" in result.stderr
    assert f"kernels-test/layer-norm {CPU_VARIANT}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("damage", ["modify", "delete", "add"])
def test_download_repairs_a_damaged_cache(hub_env, locked_app, damage) -> None:
    assert kernels("download", str(locked_app)).returncode == 0
    kernel = read_lock(locked_app / "kernels.lock", purpose="use").lock.get("kernels-test/flash")
    folder = cache.variant_dir(cache.find_repo_dir("kernels-test/flash"), kernel.sha, CPU_VARIANT)
    target = folder / "layers" / "__init__.py"
    if damage == "modify":
        data = bytearray(target.read_bytes())
        data[0] ^= 1
        target.resolve().write_bytes(bytes(data))  # the blob behind the symlink
    elif damage == "delete":
        target.unlink()
    else:
        (folder / "layers" / "evil.py").write_text("import os\n")
    assert not cache.check_variant(kernel.repo_id, kernel.sha, CPU_VARIANT, kernel.variants[CPU_VARIANT].hash).ok

    result = kernels("download", str(locked_app))
    assert result.returncode == 0, result.stderr
    check = cache.check_variant(kernel.repo_id, kernel.sha, CPU_VARIANT, kernel.variants[CPU_VARIANT].hash)
    assert check.ok, check.problems
    assert not (folder / "layers" / "evil.py").exists()


def test_hub_serving_other_bytes_is_refused_and_nothing_unverified_is_left(hub_env, tmp_path) -> None:
    spec = KernelRepo("kernels-test/download-tampered", (Release("1.0.0"),))
    built = hub_env.add_repo(spec)
    project = write_project(tmp_path / "app", '"kernels-test/download-tampered" = ">=1"')
    lock_project(project)
    # The LFS object behind the pointer changes: the listing still names the old SHA-256.
    content = next(c for p, c in built.files["1.0.0"].items() if c.lfs and CPU_VARIANT in p)
    oid = content.lfs_sha256
    (built.path / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid).write_bytes(b"\x7fELF evil" + content.data[9:])

    # In a process of its own: a failure returns at once, without waiting for the files
    # still in flight (download_lock), and their partial files are gone only once they
    # finish, which the end of the process waits for.
    result = kernels_process("download", str(project))
    assert result.returncode == 1
    assert "kernels-test/download-tampered torch213-cxx11-cpu-x86_64-linux" in result.stderr
    assert f"Expected sha256 {oid}" in result.stderr and ".abi3.so does not match" in result.stderr
    assert "Traceback" not in result.stderr
    root = cache.cache_root()
    assert snapshot_files(root) == []
    repo = cache.find_repo_dir("kernels-test/download-tampered", root)
    assert not (repo / "blobs" / oid).exists()
    assert list((repo / ".kernel-deps" / "tmp").iterdir()) == []


def test_rewritten_repo_is_refused(hub_env, tmp_path) -> None:
    hub_env.add_repo(KernelRepo("kernels-test/download-rewritten", (Release("1.0.0"),)))
    project = write_project(tmp_path / "app", '"kernels-test/download-rewritten" = ">=1"')
    lock_project(project)
    # Force-pushed history: the locked commit is gone, v1.0.0 names other content.
    hub_env.add_repo(KernelRepo("kernels-test/download-rewritten", (Release("0.9.0"), Release("1.0.0", lfs_size=999))))
    result = kernels("download", str(project))
    assert result.returncode == 1
    assert "kernels-test/download-rewritten" in result.stderr and "not found" in result.stderr
    assert snapshot_files(cache.cache_root()) == []


def test_a_locked_variant_absent_at_the_locked_commit_is_named_as_such(hub_env, tmp_path) -> None:
    hub_env.add_repo(KernelRepo("kernels-test/download-no-variant", (Release("1.0.0", variants=(CPU_VARIANT,)),)))
    project = write_project(tmp_path / "app", '"kernels-test/download-no-variant" = ">=1"', locked=True)
    # An edited lock: it names a variant the repo never had at that commit.
    entries = json.loads((project / "kernels.lock").read_text())
    entries[0]["variants"][CUDA_VARIANT] = {"hash": "sha256-" + "1" * 64, "hash_type": "git_lfs_concat"}
    (project / "kernels.lock").write_text(json.dumps(entries, indent=2) + "\n")
    sha = entries[0]["sha"]
    root = cache.cache_root()
    kept = set(root.glob("*/blobs/*"))  # the metadata.json files the lock read and kept

    result = kernels("download", str(project), "--variant", CUDA_VARIANT)
    assert result.returncode == 1
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert (
        f"kernels-test/download-no-variant {CUDA_VARIANT}: the Hub has no build/{CUDA_VARIANT} at {sha[:12]}; "
        "the lock names a variant the repo does not have (edited lock or rewritten repo)"
    ) in line
    assert "serves different content" not in line
    assert snapshot_files(root) == []
    assert set(root.glob("*/blobs/*")) == kept  # the download placed nothing

    online = kernels("verify", "--online", str(project))
    assert online.returncode == 1
    assert f"kernels-test/download-no-variant {CUDA_VARIANT}: not on the Hub at {sha[:12]}" in online.stdout + online.stderr


def test_moved_tag_still_downloads_the_locked_commit(hub_env, tmp_path) -> None:
    built = hub_env.add_repo(KernelRepo("kernels-test/download-moving", (Release("1.0.0"), Release("1.1.0"))))
    project = write_project(tmp_path / "app", '"kernels-test/download-moving" = "==1.0.0"')
    lock_project(project)
    built.git("tag", "--force", "v1.0.0", built.commits["1.1.0"])
    assert kernels("download", str(project)).returncode == 0
    root = cache.cache_root()
    assert cached_variants(root, "kernels-test/download-moving", built.commits["1.0.0"]) == {CPU_VARIANT}
    assert cached_variants(root, "kernels-test/download-moving", built.commits["1.1.0"]) == set()


def test_variant_option_and_all_variants(hub_env, locked_app) -> None:
    root = cache.cache_root()
    lock = read_lock(locked_app / "kernels.lock", purpose="use").lock
    flash = lock.get("kernels-test/flash")

    result = kernels("download", str(locked_app), "--variant", METAL_VARIANT, "--quiet")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert cached_variants(root, flash.repo_id, flash.sha) == {METAL_VARIANT}

    assert kernels("download", str(locked_app), "--all-variants").returncode == 0
    for kernel in lock.kernels:
        assert cached_variants(root, kernel.repo_id, kernel.sha) == set(kernel.variants)
        for variant, locked in kernel.variants.items():
            assert cache.check_variant(kernel.repo_id, kernel.sha, variant, locked.hash).ok

    unknown = kernels("download", str(locked_app), "--variant", "torch-rocm")
    assert unknown.returncode == 2
    assert "--variant torch-rocm: kernels-test/activation has no such variant" in unknown.stderr


def test_no_variant_for_this_machine_lists_the_reasons(hub_env, tmp_path) -> None:
    hub_env.add_repo(KernelRepo("kernels-test/download-cuda-only", (Release("1.0.0", variants=(CUDA_VARIANT, METAL_VARIANT)),)))
    project = write_project(tmp_path / "app", '"kernels-test/download-cuda-only" = ">=1"')
    lock_project(project)
    result = kernels("download", str(project))
    assert result.returncode == 1
    line = result.stderr.strip()
    assert line.startswith("error: kernels-test/download-cuda-only: no variant for this system")
    assert f"{CUDA_VARIANT} (" in line and f"{METAL_VARIANT} (" in line

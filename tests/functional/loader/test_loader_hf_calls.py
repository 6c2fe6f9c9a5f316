"""The Hugging Face-style calls as a user sees them: get_kernel downloads what it resolved
and says so in ``__kernel_origin__``; a ``LOCAL_KERNELS`` override answers get_kernel and
has_kernel without the Hub; get_local_kernel honours ``backend=`` and ``package_name``; and
a damaged cached variant is refused naming the file and what is wrong with it.

Every Hub call goes to the local olah Hub; local builds and caches are real folders. No
test depends on which frame called kernel_deps.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernel_deps import get_kernel, get_local_kernel, has_kernel, load_kernel
from kernel_deps.cache import store as cache
from kernel_deps.core.errors import KernelIntegrityError, UsageError
from kernel_deps.core.hashing import git_blob_id, variant_hash
from kernel_deps.loader.local import LocalKernelWarning
from kernel_deps.lock.model import LockedKernel, Lockfile, VariantLock, write_lockfile
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, UNIVERSAL_VARIANT, KernelRepo, Release


def _local_repo(root: Path, tag: str, variants=(CUDA_VARIANT, CPU_VARIANT)) -> Path:
    """A kernel repo being developed: one build per variant, each reporting ``tag`` and its variant."""
    for variant in variants:
        folder = root / "build" / variant
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text(f"__version__ = {tag!r}\nVARIANT = {variant!r}\n")
    return root


def test_get_kernel_downloads_the_resolved_kernel_and_says_where_its_lock_came_from(hub_env) -> None:
    repo_id = "kernels-test/hfcalls-fresh"
    if repo_id not in hub_env.repos:
        hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    module = get_kernel(repo_id, version=1, trust_remote_code=True)  # nothing cached: it must download
    origin = module.__kernel_origin__
    assert (origin.repo_id, origin.variant) == (repo_id, CPU_VARIANT)
    assert origin.lock_origin == "get_kernel"
    assert origin.lock_path == f"resolved {repo_id} 1 (branch v1)"
    assert origin.path.is_dir()


def test_local_kernels_answers_get_kernel_and_has_kernel_without_the_hub(hub_env, tmp_path, monkeypatch) -> None:
    repo_id = "kernels-test/hfcalls-only-local"  # not on the Hub at all
    cuda_only = "kernels-test/hfcalls-local-cuda-only"
    local = _local_repo(tmp_path / "dev", "local-build")
    elsewhere = _local_repo(tmp_path / "cuda-dev", "cuda-build", variants=(CUDA_VARIANT,))
    monkeypatch.setenv("LOCAL_KERNELS", f"{repo_id}={local}:{cuda_only}={elsewhere}")
    with pytest.warns(LocalKernelWarning):
        module = get_kernel(repo_id, version=1, trust_remote_code=True)
    assert (module.__version__, module.VARIANT) == ("local-build", CPU_VARIANT)  # this CPU machine's build
    assert has_kernel(repo_id, version=1, trust_remote_code=True) is True
    assert has_kernel(cuda_only, version=1, trust_remote_code=True) is False  # its local folder has no build for this machine


def test_get_local_kernel_refuses_a_backend_this_machine_cannot_run(tmp_path) -> None:
    repo = _local_repo(tmp_path / "dev-backend", "dev")
    with pytest.raises(UsageError, match=r"^backend='metal': this machine's torch runs cpu"):
        get_local_kernel(repo, backend="metal")


def test_get_local_kernel_imports_the_named_package_of_an_older_build(tmp_path) -> None:
    build = tmp_path / "older" / "build" / UNIVERSAL_VARIANT
    for package in ("aaa_helpers", "my_kernel"):  # the other package sorts first
        (build / package).mkdir(parents=True)
        (build / package / "__init__.py").write_text(f"NAME = {package!r}\n")
    with pytest.warns(LocalKernelWarning):
        assert get_local_kernel(tmp_path / "older", "my_kernel").NAME == "my_kernel"


def test_a_cached_variant_missing_a_file_is_refused_naming_the_file(tmp_path, monkeypatch) -> None:
    root = tmp_path / "cache"
    monkeypatch.setenv("KERNELS_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    repo_id, commit, variant = "kernels-test/hfcalls-damaged", "fedcba9876543210fedcba9876543210fedcba98", UNIVERSAL_VARIANT
    files = {"damaged/__init__.py": b"VALUE = 1\n", "damaged/_ops.py": b"OPS = ()\n"}
    repo = cache.repo_dir(repo_id, root=root)
    names = {}
    for rel, data in files.items():
        blob = cache.blob_path(repo, git_blob_id(data))
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        names[rel] = git_blob_id(data)
    folder = cache.place_variant(repo, commit, variant, names)
    kernel = LockedKernel(repo_id=repo_id, sha=commit, variants={variant: VariantLock(hash=variant_hash(names.items()))},
                          version="v1.0.0", requirement=">=1")
    write_lockfile(tmp_path / "kernels.lock", Lockfile(kernels=(kernel,)))
    os.unlink(folder / "damaged" / "_ops.py")
    with pytest.raises(KernelIntegrityError) as info:
        load_kernel(repo_id, lockfile=tmp_path / "kernels.lock")
    assert str(info.value) == (
        f"refusing to load {repo_id} {variant}: the cached files differ from kernels.lock: damaged/_ops.py missing; "
        "run 'kernels download' to repair the cache"
    )

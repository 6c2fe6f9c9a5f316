"""The import runs only verified bytes: no bytecode, no file outside the lock, no file
changed after the check, no link out of the cache, and one module name per repo id."""

from __future__ import annotations

import py_compile
import shutil
import sys
from pathlib import Path

import pytest

from kernel_deps import cache, load_kernel
from kernel_deps.download import download_project
from kernel_deps.errors import KernelCacheReadError, KernelIntegrityError
from kernel_deps.locking import lock_project
from kernel_deps.verify import verify_project
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release
from tests.fixtures.unprivileged import where_modes_apply

INIT = b'''"""A kernel with an optional submodule and lazily imported ones."""
import importlib

from ._ops import OPS_NAMESPACE
from .layers import describe

try:
    from . import _optional
except ImportError:
    _optional = None

__version__ = "1.0.0"


def late(name):
    return importlib.import_module(f"{__name__}.{name}")
'''

LAZY_FILES = (
    ("__init__.py", INIT),
    ("layers/lazy.py", b"VALUE = 1\n"),
    ("layers/lazy_ok.py", b"VALUE = 2  # its own blob\n"),
)


def downloaded(hub_env, tmp_path: Path, name: str):
    """A fresh kernel with lazy submodules, locked and downloaded; returns (variant folder, project)."""
    repo_id = f"kernels-test/verified-{name}"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CPU_VARIANT,), extra_files=LAZY_FILES),)))
    project = tmp_path / "app"
    project.mkdir()
    (project / "pyproject.toml").write_text(f'[tool.kernels.dependencies]\n"{repo_id}" = ">=1"\n')
    lock_project(project)
    download_project(project)
    folder = cache.variant_dir(cache.find_repo_dir(repo_id), built.commits["1.0.0"], CPU_VARIANT)
    return folder, project


def plant_pyc(target: Path, source: str, tmp_path: Path) -> None:
    """Compiled bytecode of ``source`` at ``target``, with no source file beside it."""
    source_file = tmp_path / "planted_source.py"
    source_file.write_text(source)
    py_compile.compile(str(source_file), cfile=str(target), doraise=True)


def marker_code(marker: Path) -> str:
    return f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\nPLANTED = True\n"


# -- 1. only files the lock covers ---------------------------------------------------------


def test_a_planted_pyc_for_an_optional_module_never_runs(hub_env, tmp_path) -> None:
    folder, project = downloaded(hub_env, tmp_path, "optional-pyc")
    marker = tmp_path / "ran"
    plant_pyc(folder / "_optional.pyc", marker_code(marker), tmp_path)
    assert verify_project(project).ok  # bytecode is outside the lock hash, as in the HF algorithm
    module = load_kernel("kernels-test/verified-optional-pyc", lockfile=project / "kernels.lock")
    assert module._optional is None
    assert not marker.exists()


@pytest.mark.parametrize(
    "planted",
    ["layers/helpers.pyc", "layers/helpers.py", "layers/helpers.abi3.so", "layers/helpers/__init__.py",
     "layers/__pycache__/helpers.cpython-311.pyc"],
)  # fmt: skip
def test_a_file_outside_the_verified_set_is_never_imported(hub_env, tmp_path, planted) -> None:
    folder, project = downloaded(hub_env, tmp_path, "planted")
    module = load_kernel("kernels-test/verified-planted", lockfile=project / "kernels.lock")
    marker = tmp_path / "ran"
    target = folder / planted
    target.parent.mkdir(parents=True, exist_ok=True)
    if planted.endswith(".pyc"):
        plant_pyc(target, marker_code(marker), tmp_path)
    elif planted.endswith(".so"):
        target.write_bytes(b"\x7fELF not really")
    else:
        target.write_text(marker_code(marker))
    with pytest.raises(ModuleNotFoundError) as info:
        module.late("layers.helpers")
    assert str(info.value) == (
        f"No module named '{module.__name__}.layers.helpers': kernels-test/verified-planted {CPU_VARIANT} "
        "has no such file covered by kernels.lock"
    )
    assert not marker.exists()
    assert module.late("layers.lazy_ok").VALUE == 2


# -- 2. the bytes that were hashed are the bytes that run ------------------------------------


def test_a_source_changed_after_the_check_is_refused_at_its_lazy_import(hub_env, tmp_path) -> None:
    folder, project = downloaded(hub_env, tmp_path, "toctou")
    module = load_kernel("kernels-test/verified-toctou", lockfile=project / "kernels.lock")
    marker = tmp_path / "ran"
    (folder / "layers" / "lazy.py").resolve().write_text(marker_code(marker))  # the blob itself
    with pytest.raises(KernelIntegrityError, match=(
        rf"^refusing to import layers/lazy\.py of kernels-test/verified-toctou {CPU_VARIANT}: it changed after it "
        r"was verified \(expected [0-9a-f]{40}, got [0-9a-f]{40}\); run 'kernels download' to repair the cache$"
    )):  # fmt: skip
        module.late("layers.lazy")
    assert not marker.exists()
    assert f"{module.__name__}.layers.lazy" not in sys.modules
    assert module.late("layers.lazy_ok").VALUE == 2


def test_a_shared_object_changed_after_the_check_is_refused_before_dlopen(hub_env, tmp_path) -> None:
    folder, project = downloaded(hub_env, tmp_path, "toctou-so")
    module = load_kernel("kernels-test/verified-toctou-so", lockfile=project / "kernels.lock")
    library = folder / f"{module.OPS_NAMESPACE}.abi3.so"
    blob = library.resolve()
    blob.write_bytes(blob.read_bytes()[:-1] + b"!")
    with pytest.raises(KernelIntegrityError, match=rf"refusing to import {module.OPS_NAMESPACE}\.abi3\.so of .*: it changed after it was verified \(expected [0-9a-f]{{64}}"):
        module.late(module.OPS_NAMESPACE)


def test_a_folder_where_a_verified_file_was_is_one_clear_line(hub_env, tmp_path) -> None:
    folder, project = downloaded(hub_env, tmp_path, "gone")
    module = load_kernel("kernels-test/verified-gone", lockfile=project / "kernels.lock")
    lazy = folder / "layers" / "lazy.py"
    lazy.unlink()
    lazy.mkdir()
    with pytest.raises(KernelCacheReadError) as info:
        module.late("layers.lazy")
    assert str(info.value) == (
        f"kernels-test/verified-gone {CPU_VARIANT}: cannot read {lazy} (Is a directory); "
        "check the cache's permissions, or run 'kernels download' to repair it"
    )


def test_an_unreadable_blob_is_one_clear_line(hub_env, tmp_path) -> None:
    folder, project = downloaded(hub_env, tmp_path, "unreadable")
    blob = (folder / "_ops.py").resolve()
    blob.chmod(0)
    try:
        # The file is named as it appears in the variant folder (a link to the blob).
        with pytest.raises(KernelCacheReadError, match=rf"kernels-test/verified-unreadable {CPU_VARIANT}: cannot read {folder / '_ops.py'} \(Permission denied\); check"):
            where_modes_apply(load_kernel, "kernels-test/verified-unreadable", lockfile=project / "kernels.lock")
    finally:
        blob.chmod(0o644)


# -- 3. one module name per repo id ---------------------------------------------------------


def test_two_repo_ids_at_one_commit_get_their_own_modules(hub_env, tmp_path) -> None:
    # A fork keeps the commits: kernels-test/verified-fork and kernels-test/verified_fork
    # are one commit under two names whose readable slugs are the same.
    built = hub_env.add_repo(KernelRepo("kernels-test/verified-fork", (Release("1.0.0", variants=(CPU_VARIANT,)),)))
    shutil.copytree(built.path, built.path.with_name("verified_fork"), symlinks=True)
    project = tmp_path / "app"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[tool.kernels.dependencies]\n"kernels-test/verified-fork" = ">=1"\n"kernels-test/verified_fork" = ">=1"\n'
    )
    lock = lock_project(project).lock
    assert lock.get("kernels-test/verified-fork").sha == lock.get("kernels-test/verified_fork").sha
    download_project(project)
    first = load_kernel("kernels-test/verified-fork", lockfile=project / "kernels.lock")
    first_layers = first.layers
    second = load_kernel("kernels-test/verified_fork", lockfile=project / "kernels.lock")
    assert first.__name__ != second.__name__
    assert sys.modules[first.__name__] is first and sys.modules[second.__name__] is second
    assert sys.modules[f"{first.__name__}.layers"] is first_layers is first.layers
    assert first.__kernel_origin__.path != second.__kernel_origin__.path


# -- 4. links out of the cache --------------------------------------------------------------


def test_a_link_out_of_the_cache_is_reported_and_refused_even_with_the_right_bytes(hub_env, tmp_path) -> None:
    folder, project = downloaded(hub_env, tmp_path, "outside")
    outside = tmp_path / "elsewhere" / "_ops.py"
    outside.parent.mkdir()
    outside.write_bytes((folder / "_ops.py").read_bytes())  # identical bytes
    (folder / "_ops.py").unlink()
    (folder / "_ops.py").symlink_to(outside)

    report = verify_project(project)
    assert [(p.kind, p.path) for p in report.problems] == [("outside-cache", "_ops.py")]
    assert report.problems[0].message == (
        f"kernels-test/verified-outside {CPU_VARIANT}: _ops.py links outside the cache (to {outside}); "
        "the loader refuses it, run 'kernels download' to replace it"
    )
    with pytest.raises(KernelIntegrityError, match=rf"_ops\.py links outside the cache \(to {outside}\); run 'kernels download'"):
        load_kernel("kernels-test/verified-outside", lockfile=project / "kernels.lock")
    download_project(project)  # the advice works: the variant is placed again
    assert verify_project(project).ok

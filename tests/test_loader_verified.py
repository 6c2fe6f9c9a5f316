"""The import runs only verified bytes: no bytecode, no file outside the lock, no file
changed after the check, no link out of the cache, and one module name per repo id."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_deps import cache, load_kernel
from kernel_deps.download import download_project
from kernel_deps.errors import KernelIntegrityError
from kernel_deps.locking import lock_project
from kernel_deps.verify import verify_project
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release

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

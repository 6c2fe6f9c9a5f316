"""`kernels tree --exports` and `kernels verify --exports`: what each locked build exports to
kernelize, read from the verified cached files and never imported."""

from __future__ import annotations

import sys
from pathlib import Path

from kernel_deps.cache import store as cache
from kernel_deps.commands.download import download_project
from kernel_deps.commands.lock import lock_project
from kernel_deps.layers.exports import project_exports
from kernel_deps.lock.read import read_lock
from tests.fixtures.cli import run_kernels
from tests.fixtures.img2gray_kernel import REPO_ID, cpu_variant_name
from tests.fixtures.projects import TEST_PUBLISHERS, trust_table

LINE = f"{REPO_ID}  layers: Img2Gray; functions: img2gray"


def locked(tmp_path: Path) -> Path:
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "pyproject.toml").write_text(
        f'{trust_table(TEST_PUBLISHERS)}[tool.kernels.dependencies]\n"{REPO_ID}" = ">=1.1,<2"\n'
    )
    lock_project(folder)
    return folder


def test_the_exports_are_read_from_the_verified_build_without_importing_it(img2gray_hub, hub_env, tmp_path) -> None:
    project = locked(tmp_path)
    absent = run_kernels("tree", "--exports", str(project))
    assert absent.returncode == 0, absent.stderr
    assert f"{REPO_ID}  not in the cache: run 'kernels download'" in absent.stdout

    download_project(project)
    before = {name for name in sys.modules if "img2gray" in name}
    for verb in ("tree", "verify"):
        result = run_kernels(verb, "--exports", str(project))
        assert result.returncode == 0, result.stderr
        assert "exports of this machine's builds" in result.stdout and LINE in result.stdout
    assert {name for name in sys.modules if "img2gray" in name} == before  # read, never imported
    (exports,) = project_exports(project)
    assert (exports.variant, exports.layers, exports.functions) == (cpu_variant_name(), ("Img2Gray",), ("img2gray",))


def test_a_changed_build_is_not_read_and_says_why(img2gray_hub, hub_env, tmp_path) -> None:
    project = locked(tmp_path)
    download_project(project)
    kernel = read_lock(project / "kernels.lock", purpose="use").lock.get(REPO_ID)
    assert kernel is not None
    target = (cache.variant_dir(cache.find_repo_dir(REPO_ID), kernel.sha, cpu_variant_name()) / "layers.py").resolve()
    target.write_text(target.read_text() + "\n\nclass Planted(nn.Module):\n    pass\n")
    tree = run_kernels("tree", "--exports", str(project))
    assert tree.returncode == 0
    assert f"{REPO_ID}  the cached build differs from the lock: run 'kernels verify'" in tree.stdout
    assert "Planted" not in tree.stdout
    verify = run_kernels("verify", "--exports", str(project))
    assert verify.returncode == 1 and "the cached build differs from the lock" in verify.stdout


def test_exports_are_text_only(img2gray_hub, hub_env, tmp_path) -> None:
    project = locked(tmp_path)
    for verb in ("tree", "verify"):
        result = run_kernels(verb, "--exports", "--json", str(project))
        assert result.returncode == 2 and "--exports lists as text only; leave out --json" in result.stderr

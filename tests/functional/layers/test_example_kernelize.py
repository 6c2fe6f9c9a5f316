"""examples/kernelize end to end: lock, download, then the model kernelized offline with the locked layer."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.lock.read import read_lock
from tests.fixtures.img2gray_kernel import REPO_ID, cpu_variant_name
from tests.fixtures.peers import env_with_peer
from tests.fixtures.processes import KERNELS

ROOT = Path(__file__).resolve().parents[3]
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}


@pytest.fixture
def example(img2gray_hub, hub_env, tmp_path) -> Path:
    folder = tmp_path / "kernelize"
    shutil.copytree(ROOT / "examples" / "kernelize", folder)
    for args in (["lock"], ["download"]):
        result = subprocess.run([KERNELS, *args, str(folder)], capture_output=True, text=True)
        assert result.returncode == 0, f"kernels {args[0]}: {result.stdout}{result.stderr}"
    return folder


def model(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """examples/kernelize/model.py, run in the example with kernels 0.17.2 installed, offline."""
    return subprocess.run(
        [sys.executable, "model.py", *args], cwd=folder, env=env_with_peer("0.17", **OFFLINE),
        capture_output=True, text=True, timeout=300,
    )


def test_the_example_runs_the_locked_kernels_layer_both_ways(example, img2gray_hub) -> None:
    commit = img2gray_hub.repos[REPO_ID].commits["1.1.0"]
    locked = read_lock(example / "kernels.lock", purpose="use").lock.get(REPO_ID)
    assert locked is not None and locked.sha == commit
    for args in ([], ["--enforce"]):
        result = model(example, *args)
        assert result.returncode == 0, result.stderr
        assert f"layer Img2Gray: {REPO_ID} 1.1.0 ({cpu_variant_name()}, commit {commit[:12]})" in result.stdout
        assert "made a 320x240 thumbnail on cpu; it matches the plain torch model" in result.stdout


def test_the_example_refuses_a_tampered_cached_layer(example, img2gray_hub) -> None:
    commit = img2gray_hub.repos[REPO_ID].commits["1.1.0"]
    folder = cache.variant_dir(cache.find_repo_dir(REPO_ID), commit, cpu_variant_name())
    target = (folder / "layers.py").resolve()
    target.write_text(target.read_text().replace("return _img2gray(image)", "return _img2gray(image) * 0"))
    for args in ([], ["--enforce"]):
        result = model(example, *args)
        assert result.returncode == 1
        assert result.stderr.startswith("kernelize: ") and "layers.py modified" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr and "layer Img2Gray" not in result.stdout

"""examples/app end to end: lock, download, verify, then the app offline with the locked op."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from kernel_deps.core.system import detect_system
from kernel_deps.core.variants import select_variant
from kernel_deps.lock.read import read_lock
from tests.fixtures.processes import KERNELS

ROOT = Path(__file__).resolve().parents[3]


def test_example_app_runs_offline_with_the_locked_kernel(img2gray_hub, hub_env, tmp_path) -> None:
    app = tmp_path / "app"
    shutil.copytree(ROOT / "examples" / "app", app)
    for args in (["lock"], ["download"], ["verify", "--require-cached"]):
        result = subprocess.run([KERNELS, *args, str(app)], capture_output=True, text=True)
        assert result.returncode == 0, f"kernels {args[0]}: {result.stdout}{result.stderr}"

    offline = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}
    output = tmp_path / "gray.pgm"
    result = subprocess.run(
        [sys.executable, "grayscale.py", "--output", str(output)], cwd=app, env=offline, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    commit = img2gray_hub.repos["kernels-test/img2gray"].commits["1.1.0"]
    # The variant this machine loads: the best fit among the locked ones, as the loader picks it.
    locked = read_lock(app / "kernels.lock", purpose="use").lock.get("kernels-test/img2gray")
    assert locked is not None and locked.sha == commit
    variant = select_variant(locked.repo_id, sorted(locked.variants), detect_system())
    assert f"kernel: kernels-test/img2gray 1.1.0 ({variant}, commit {commit[:12]})" in result.stdout
    assert "matches the pure torch reference" in result.stdout
    assert output.read_bytes().startswith(b"P5\n640 480\n255\n") and len(output.read_bytes()) == 15 + 640 * 480


def test_example_app_refuses_to_run_without_its_kernel_cached(img2gray_hub, hub_env, tmp_path) -> None:
    app = tmp_path / "app"
    shutil.copytree(ROOT / "examples" / "app", app)
    assert subprocess.run([KERNELS, "lock", str(app)], capture_output=True).returncode == 0
    offline = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "grayscale.py"], cwd=app, env=offline, capture_output=True, text=True)
    assert result.returncode == 1
    assert "is not in the cache" in result.stderr and "run 'kernels download'" in result.stderr
    assert "Traceback" not in result.stderr

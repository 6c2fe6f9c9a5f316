"""get_local_kernel and LOCAL_KERNELS from code without a file: ``python -c``, a script on
stdin (``python -``) and the interactive interpreter (``python -i``, fed through stdin).

Their ``__main__`` is loaded by BuiltinImporter, which cannot give its source: the
LocalKernelWarning still points at the caller's line, is shown, and the kernel loads.
Each case is a real interpreter in a subprocess, loading a real local build folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kernel_deps
from tests.fixtures.builder import CPU_VARIANT
from tests.fixtures.local_builds import write_local_repo

REPO_ID = "kernels-test/local-main"
WARNING = "LocalKernelWarning: {label}: loading the local build in {folder}, not a locked and verified kernel"


def _python(mode: str, code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter as ``python -c``, ``python -`` or ``python -i`` (stdin)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("LOCAL_KERNELS", "PYTHONWARNINGS", "PYTHONSTARTUP")}
    environment["PYTHONPATH"] = str(Path(kernel_deps.__file__).resolve().parents[1])  # this kernel_deps
    environment.update(env)
    args = [sys.executable, "-c", code] if mode == "-c" else [sys.executable, mode]
    stdin = None if mode == "-c" else code
    return subprocess.run(
        args, input=stdin, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("mode", ["-c", "-", "-i"])
def test_get_local_kernel_warns_and_loads_from_code_without_a_file(tmp_path, mode) -> None:
    repo = write_local_repo(tmp_path / "my-kernel", "dev-main")
    code = (
        "from kernel_deps import get_local_kernel\n"
        f"module = get_local_kernel({str(repo)!r})\n"
        "print('loaded', module.__version__, module.where())\n"
    )
    result = _python(mode, code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"loaded dev-main {CPU_VARIANT}" in result.stdout
    where = "<string>:2: " if mode == "-c" else "<stdin>:2: " if mode == "-" else "<stdin>:1: "
    assert where + WARNING.format(label=repo, folder=repo / "build" / CPU_VARIANT) in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("mode", ["-c", "-", "-i"])
def test_a_local_kernels_override_warns_and_loads_from_code_without_a_file(tmp_path, mode) -> None:
    repo = write_local_repo(tmp_path / "dev", "dev-override")
    code = (
        "from kernel_deps import load_kernel\n"
        f"module = load_kernel({REPO_ID!r}, lockfile={str(tmp_path / 'kernels.lock')!r})\n"
        "print('loaded', module.__version__)\n"
    )
    result = _python(mode, code, tmp_path, LOCAL_KERNELS=f"{REPO_ID}={repo}")
    assert result.returncode == 0, result.stderr
    assert "loaded dev-override" in result.stdout
    assert WARNING.format(label=REPO_ID, folder=repo / "build" / CPU_VARIANT) in result.stderr
    assert "Traceback" not in result.stderr

"""The in-process ``kernels`` runner (tests/fixtures/cli.py) gives what the installed command gives."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.fixtures.cli import run_kernels
from tests.fixtures.processes import KERNELS


@pytest.mark.parametrize("args", [("--version",), ("verify", "no-such-project"), ("no-such-command",)])
def test_in_process_gives_what_the_installed_command_gives(args: tuple[str, ...], tmp_path) -> None:
    real = subprocess.run([KERNELS, *args], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    here = run_kernels(*args, cwd=tmp_path)
    assert (here.returncode, here.stdout, here.stderr) == (real.returncode, real.stdout, real.stderr)


def test_env_applies_to_the_command_only(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    result = run_kernels("verify", "--online", str(tmp_path), env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 2
    assert result.stderr.startswith("error: --online needs the Hub but HF_HUB_OFFLINE is set")
    assert "HF_HUB_OFFLINE" not in os.environ


def test_cwd_applies_to_the_command_only(tmp_path) -> None:
    before = os.getcwd()
    result = run_kernels("verify", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (2, "error: no pyproject.toml in .\n")
    assert os.getcwd() == before

"""The Makefile as a newcomer meets it, run for real on a copy of it (never building the
environment): the first run says up front that it builds a virtual environment of about
1.2 GB and how long that takes, and `make clean` removes everything `make` creates and
nothing else."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def checkout(tmp_path: Path) -> Path:
    """The Makefile and what its environment depends on, in a folder of their own."""
    folder = tmp_path / "checkout"
    folder.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(ROOT / name, folder / name)
    return folder


def make(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MAKEFLAGS": ""}
    return subprocess.run(["make", "--no-print-directory", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip


def test_the_first_run_says_first_that_it_builds_a_large_environment_and_for_how_long(tmp_path: Path) -> None:
    folder = checkout(tmp_path)
    # PYTHON=false: the venv step fails at once, so nothing is built; the message came before it.
    result = make(folder, "demo", "PYTHON=false")
    assert result.returncode != 0
    first = result.stdout.splitlines()[0]
    assert first.startswith("make: first run: creating .venv, a virtual environment of about 1.2 GB")
    assert "a few minutes" in first and "'make clean' removes it" in first
    assert not (folder / ".venv").exists()


def test_a_later_run_says_only_when_it_updates_the_environment(tmp_path: Path) -> None:
    folder = checkout(tmp_path)
    python = folder / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\nexit 0\n")  # an environment that is there: its installs succeed at once
    python.chmod(0o755)
    updated = make(folder, "demo")
    assert updated.returncode == 0, updated.stderr
    assert updated.stdout.splitlines()[0].startswith("make: pyproject.toml or the Makefile changed: updating .venv")
    again = make(folder, "demo")
    assert again.returncode == 0 and "make:" not in again.stdout  # up to date: not a word about it


def test_make_clean_removes_what_make_created_and_keeps_the_rest(tmp_path: Path) -> None:
    folder = checkout(tmp_path)
    made = [".venv/bin/python", ".demo/hf-cache/x", ".mutation/table.md", ".build-cache/img2gray/k/a.so",
            ".pytest_cache/v/cache", ".hypothesis/examples/x", "src/kernel_deps/__pycache__/a.pyc",
            "tests/fixtures/__pycache__/b.pyc"]  # fmt: skip
    kept = ["notes.txt", "src/kernel_deps/a.py", ".git/hooks/__pycache__/c.pyc", "examples/app/app.py"]
    for name in made + kept:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x")
    # An image no one built: the machine's own base image of container-test stays.
    result = make(folder, "clean", "BASE_IMAGE=localhost/kernel-deps-test/never-built:0")
    assert result.returncode == 0, result.stderr
    left = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert left == sorted(["Makefile", "pyproject.toml", *kept])
    for top in (".venv", ".demo", ".mutation", ".build-cache", ".pytest_cache", ".hypothesis"):
        assert not (folder / top).exists()

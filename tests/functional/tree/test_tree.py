"""`kernels tree`: the locked kernels as a dependency tree, and the build serving each
declared target and this machine, read from the lock without the network."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernel_deps.cli import main as cli_main
from kernel_deps.commands.lock import lock_project
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, STABLE_ABI_VARIANT, UNIVERSAL_VARIANT
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.processes import KERNELS
from tests.fixtures.projects import write_project

ACTIVATION, LAYER_NORM, UNIVERSAL = "kernels-test/activation", "kernels-test/layer-norm", "kernels-test/norm-universal"
ROCM_TARGET = "torch213-cxx11-rocm71-x86_64-linux"


def kernels(*args: str, **env: str) -> CliResult:
    return run_kernels(*args, env=env)


def locked_project(tmp_path: Path, deps: str, targets: list[str]) -> Path:
    project = write_project(tmp_path / "app", deps, extra=f"[tool.kernels]\ntargets = {json.dumps(targets)}\n\n")
    lock_project(project)
    return project


def test_tree_shows_who_requires_what_and_the_build_per_target(hub_env, tmp_path) -> None:
    project = locked_project(tmp_path, f'"{LAYER_NORM}" = ">=0.1"\n"{UNIVERSAL}" = ">=1"', [CUDA_VARIANT, CPU_VARIANT])
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    short = {k.repo_id: k.sha[:12] for k in lock.kernels}

    result = kernels("tree", str(project), HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "empty-cache"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        f"{project} (kernels.lock)",
        f"├── {LAYER_NORM} >=0.1 -> v0.2.0 ({short[LAYER_NORM]})",
        # What layer-norm requires of it, as the lock records it: nothing needs to be cached.
        f"│   └── {ACTIVATION} <2,>=1.1 -> v1.2.0 ({short[ACTIVATION]})",
        f"└── {UNIVERSAL} >=1 -> v1.1 ({short[UNIVERSAL]})",
    ]
    text = result.stdout
    # Each target's section lists the loader's pick there: the stable-ABI build comes first.
    cuda = text.split(f"\n{CUDA_VARIANT}\n")[1].split("\n\n")[0].split()
    assert cuda == [ACTIVATION, STABLE_ABI_VARIANT, LAYER_NORM, CUDA_VARIANT, UNIVERSAL, UNIVERSAL_VARIANT]
    mine = text.split("\nthis machine (torch 2.13, cxx11 ABI, CPU, x86_64-linux)\n")[1].split()
    assert mine == [ACTIVATION, CPU_VARIANT, LAYER_NORM, CPU_VARIANT, UNIVERSAL, UNIVERSAL_VARIANT]



def test_tree_says_none_for_a_target_a_kernel_has_no_build_for(hub_env, tmp_path) -> None:
    project = locked_project(tmp_path, f'"{UNIVERSAL}" = ">=1"\n"{ACTIVATION}" = ">=1,<2"', [CPU_VARIANT])
    # Declared after locking: the lock serves it only through the universal kernel.
    write_project(project, f'"{UNIVERSAL}" = ">=1"\n"{ACTIVATION}" = ">=1,<2"',
                  extra=f'[tool.kernels]\ntargets = ["{CPU_VARIANT}", "{ROCM_TARGET}"]\n\n')  # fmt: skip
    result = kernels("tree", str(project), "--json", HF_HUB_OFFLINE="1")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    rocm = payload["targets"][1]
    assert rocm == {
        "name": ROCM_TARGET,
        "system": "torch 2.13, cxx11 ABI, ROCm 7.1, x86_64-linux",
        "variants": {ACTIVATION: None, UNIVERSAL: UNIVERSAL_VARIANT},
        "signers": {ACTIVATION: None, UNIVERSAL: None},  # neither is signed
    }
    assert payload["this_machine"]["name"] is None
    assert payload["this_machine"]["variants"] == {ACTIVATION: CPU_VARIANT, UNIVERSAL: UNIVERSAL_VARIANT}
    text = kernels("tree", str(project), HF_HUB_OFFLINE="1").stdout
    assert text.split(f"\n{ROCM_TARGET}\n")[1].split("\n\n")[0].split() == [ACTIVATION, "none", UNIVERSAL, UNIVERSAL_VARIANT]


def test_a_kernel_required_twice_is_expanded_once(hub_env, tmp_path) -> None:
    project = locked_project(tmp_path, f'"{ACTIVATION}" = ">=1,<2"\n"{LAYER_NORM}" = ">=0.1"', [CPU_VARIANT])
    payload = json.loads(kernels("tree", str(project), "--json").stdout)
    first, second = payload["kernels"]
    assert (first["repo_id"], first["requirement"], first["repeated"]) == (ACTIVATION, "<2,>=1", False)
    (again,) = second["dependencies"]
    assert (again["repo_id"], again["required_by"], again["repeated"]) == (ACTIVATION, LAYER_NORM, True)
    text = kernels("tree", str(project)).stdout
    assert f"│   └── {ACTIVATION}" not in text and f"    └── {ACTIVATION} <2,>=1.1 -> v1.2.0 (" in text
    assert "(*) shown in full above, not repeated" in text.splitlines()


def test_tree_without_a_lock_is_one_line(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{ACTIVATION}" = ">=1"')
    result = kernels("tree", str(project))
    assert result.returncode != 0 and len(result.stderr.splitlines()) == 1
    assert "kernels.lock" in result.stderr


def test_tree_is_offline_and_imports_neither_huggingface_hub_nor_torch(tmp_path) -> None:
    from tests.fixtures.cached_project import write_cached_project
    from tests.fixtures.processes import HEAVY, imported_modules, top_level

    env = {"HF_HUB_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1", "KERNELS_CACHE": ""}
    project = write_cached_project(tmp_path / "app", tmp_path / "cache")
    result, modules = imported_modules("tree", str(project), env_extra=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "this machine (" in result.stdout
    assert not top_level(modules) & set(HEAVY)


@pytest.mark.parametrize("into", ["pipe", "file"])
def test_tree_draws_in_ascii_where_the_output_has_no_box_drawing_characters(hub_env, tmp_path, into) -> None:
    project = locked_project(tmp_path, f'"{LAYER_NORM}" = ">=0.1"\n"{UNIVERSAL}" = ">=1"', [CPU_VARIANT])
    short = {k.repo_id: k.sha[:12] for k in read_lock(project / "kernels.lock", purpose="use").lock.kernels}
    drawn = [
        f"{project} (kernels.lock)",
        f"|-- {LAYER_NORM} >=0.1 -> v0.2.0 ({short[LAYER_NORM]})",
        f"|   `-- {ACTIVATION} <2,>=1.1 -> v1.2.0 ({short[ACTIVATION]})",
        f"`-- {UNIVERSAL} >=1 -> v1.1 ({short[UNIVERSAL]})",
    ]
    # A real process: what Python's stdout encodes is what a cp1252 console or file takes.
    env = {**os.environ, "PYTHONIOENCODING": "cp1252", "HF_HUB_OFFLINE": "1"}
    with open(tmp_path / "tree.txt", "w+b") as file:
        shown = subprocess.run([KERNELS, "tree", str(project)], stdout=subprocess.PIPE if into == "pipe" else file,
                               stderr=subprocess.PIPE, env=env, timeout=120)  # fmt: skip
        file.seek(0)
        stdout = shown.stdout if into == "pipe" else file.read()
    assert (shown.returncode, shown.stderr) == (0, b"")
    assert stdout.decode("cp1252").splitlines()[:4] == drawn
    # In-process, writing to a cp1252 stream as click's runner does.
    result = CliRunner(charset="cp1252").invoke(cli_main, ["tree", str(project)], env={"HF_HUB_OFFLINE": "1"})
    assert (result.exit_code, result.exception) == (0, None)
    assert result.stdout.splitlines()[:4] == drawn


def test_a_character_stdout_cannot_encode_is_escaped_not_a_crash(tmp_path) -> None:
    from tests.fixtures.cached_project import REPO_ID, write_cached_project

    project = write_cached_project(tmp_path / "应用", tmp_path / "cache")  # no such characters in cp1252
    env = {**os.environ, "PYTHONIOENCODING": "cp1252", "HF_HUB_OFFLINE": "1", "KERNELS_CACHE": str(tmp_path / "cache")}
    shown = subprocess.run([KERNELS, "tree", str(project)], capture_output=True, env=env, timeout=120)
    assert (shown.returncode, shown.stderr) == (0, b"")
    first, second = shown.stdout.decode("cp1252").splitlines()[:2]
    assert first == f"{tmp_path}{os.sep}\\u5e94\\u7528 (kernels.lock)"
    assert second.startswith(f"`-- {REPO_ID} >=1 -> v1.0.0 (")

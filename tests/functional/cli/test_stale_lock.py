"""A lock that no longer satisfies pyproject.toml is never used silently: ``download``,
``tree``, ``to-wheel`` and ``export`` each say so in one line on stderr, naming the kernel
and the fix, and go on (exit 0); ``tree`` marks the pin that breaks its requirement and
lists the requirement the lock lacks. A missing lock is exit 2 from every command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.schemas import validated

LAYER_NORM, ACTIVATION, FLASH = "kernels-test/layer-norm", "kernels-test/activation", "kernels-test/flash"


@pytest.fixture
def project(hub_env, tmp_path: Path) -> Path:
    return write_project(tmp_path / "app", f'"{LAYER_NORM}" = ">=0.2"', locked=True)


def declare(project: Path, deps: str) -> None:
    """pyproject.toml's requirements changed by hand after locking."""
    write_project(project, deps)


def users_of_the_lock(project: Path, tmp_path: Path) -> dict[str, tuple[str, ...]]:
    return {
        "download": ("download", str(project)),
        "tree": ("tree", str(project)),
        "to-wheel": ("to-wheel", str(project), "-o", str(tmp_path / "wheels")),
        "export": ("export", "--format", "kernels-0.17", "-o", str(tmp_path / "hf.lock"), str(project)),
    }


@pytest.mark.parametrize("command", ["download", "tree", "to-wheel", "export"])
@pytest.mark.parametrize("change", ["range-changed", "kernel-added-by-hand"])
def test_a_stale_lock_is_used_with_one_warning_naming_the_kernel_and_the_fix(project, tmp_path, command, change) -> None:
    if change == "range-changed":
        declare(project, f'"{LAYER_NORM}" = ">=5"')
        named = LAYER_NORM
    else:
        declare(project, f'"{LAYER_NORM}" = ">=0.2"\n"{FLASH}" = 1')
        named = FLASH
    result = run_kernels(*users_of_the_lock(project, tmp_path)[command])
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1, result.stderr
    assert named in warnings[0] and "run 'kernels lock'" in warnings[0]
    assert f"{project / 'kernels.lock'} does not agree with pyproject.toml" in warnings[0]
    # -q silences the report, never the warning.
    quiet = run_kernels("-q", *users_of_the_lock(project, tmp_path)[command])
    assert quiet.returncode == 0 and quiet.stderr.count("warning: ") == 1, quiet.stderr


def test_a_lock_that_agrees_is_used_without_a_word(project, tmp_path) -> None:
    for args in users_of_the_lock(project, tmp_path).values():
        result = run_kernels(*args)
        assert result.returncode == 0, result.stderr
        assert "warning" not in result.stderr, args


def test_tree_marks_the_pin_that_breaks_its_requirement_and_lists_what_the_lock_lacks(project) -> None:
    declare(project, f'"{LAYER_NORM}" = ">=5"\n"{FLASH}" = 1')
    result = run_kernels("tree", str(project))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].startswith(f"├── {LAYER_NORM} >=5 -> v0.2.0 (") and lines[1].endswith(") (!)")
    assert lines[2].startswith(f"│   └── {ACTIVATION} <2,>=1.1 -> ") and "(!)" not in lines[2]
    assert lines[3] == f"└── {FLASH} 1 -> not locked (!)"
    assert lines[4] == ("(!) kernels.lock does not meet this requirement; run 'kernels lock' (or 'kernels sync') "
                        "to update it")  # fmt: skip
    payload = validated(run_kernels("tree", "--json", str(project)), "tree")
    assert payload["ok"] is False and FLASH in payload["warning"]
    assert payload["missing"] == [{"repo_id": FLASH, "requirement": "1"}]
    (root,) = payload["kernels"]
    assert (root["repo_id"], root["unmet"], root["dependencies"][0]["unmet"]) == (LAYER_NORM, True, False)


def test_tree_marks_a_dependency_whose_pin_breaks_what_its_parent_requires(project) -> None:
    lock_file = project / "kernels.lock"
    lock = json.loads(lock_file.read_text())
    parent = next(k for k in lock if k["repo_id"] == LAYER_NORM)
    parent["kernel_depends"] = {ACTIVATION: [">=9"]}  # what the parent requires, edited by hand
    lock_file.write_text(json.dumps(lock, indent=2))
    result = run_kernels("tree", str(project))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "(!)" not in lines[1]
    assert lines[2].startswith(f"    └── {ACTIVATION} >=9 -> v1.2.0 (") and lines[2].endswith(") (!)")
    assert ACTIVATION in result.stderr and result.stderr.startswith("warning: ")


def test_export_json_carries_the_warning(project, tmp_path) -> None:
    declare(project, f'"{LAYER_NORM}" = ">=5"')
    payload = validated(run_kernels("export", "--json", "--format", "kernels-0.17", str(project)), "export")
    assert payload["ok"] is False and payload["output"] is None and payload["text"]
    (warning,) = payload["warnings"]
    assert LAYER_NORM in warning


@pytest.mark.parametrize(("command", "schema"), [("download", "download"), ("to-wheel", "to-wheel"),
                                                 ("export", "export"), ("tree", "tree")])  # fmt: skip
def test_json_of_a_stale_lock_is_not_ok_and_of_one_that_agrees_is(project, tmp_path, command, schema) -> None:
    args = users_of_the_lock(project, tmp_path)[command]
    agreeing = validated(run_kernels(*args, "--json"), schema)
    assert agreeing["ok"] is True and not agreeing.get("warnings") and not agreeing.get("warning")
    declare(project, f'"{LAYER_NORM}" = ">=5"')
    stale = run_kernels(*args, "--json")
    assert stale.returncode == 0, stale.stderr
    payload = validated(stale, schema)
    assert payload["ok"] is False
    assert LAYER_NORM in (payload["warning"] if schema == "tree" else payload["warnings"][0])


MISSING_LOCK = [
    ("verify",), ("download",), ("tree",), ("outdated",), ("export", "--format", "kernels-0.17"),
    ("to-wheel", "-o", "{out}"), ("sync", "--frozen"), ("sync", "--locked"), ("lock", "--check"),
    ("cache", "prune", "--dry-run"),
]


@pytest.mark.parametrize("args", MISSING_LOCK, ids=lambda a: " ".join(a))
def test_a_missing_lock_is_exit_2_and_one_line_from_every_command(project, tmp_path, args) -> None:
    (project / "kernels.lock").unlink()
    words = [a.format(out=tmp_path / "out") for a in args]
    result = run_kernels(*words, str(project), env={"HF_HUB_OFFLINE": "1"})  # judged before any network
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == f"error: {project / 'kernels.lock'}: not found; run 'kernels lock' to create it\n"

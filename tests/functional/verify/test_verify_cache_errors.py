"""`kernels verify` when a cached file cannot be read: one line naming the variant, once.

The command runs in-process in a thread that file modes apply to (as root, without the
capabilities that let root read any file: tests/fixtures/unprivileged.py), so mutation
testing sees what these tests check.
"""

from __future__ import annotations

import json

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.commands.download import download_project
from kernel_deps.commands.verify import verify_project
from kernel_deps.core.system import detect_system
from kernel_deps.core.variants import select_variant
from kernel_deps.lock.read import read_lock
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.unprivileged import where_modes_apply

ROTARY = "kernels-test/rotary"


def run_where_modes_apply(*args: str) -> CliResult:
    """``kernels ARGS`` where a file whose mode forbids reading it cannot be read."""
    return where_modes_apply(run_kernels, *args)


@pytest.fixture
def unreadable_variant(hub_env, tmp_path):
    """A project whose downloaded variant for this machine has one file nobody may read."""
    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)
    download_project(project)
    assert verify_project(project, require_cached=True).ok  # complete and intact before the file is locked away
    entry = read_lock(project / "kernels.lock", purpose="use").lock.get(ROTARY)
    variant = select_variant(ROTARY, entry.variants, detect_system())
    folder = cache.variant_dir(cache.repo_dir(ROTARY), entry.sha, variant)
    blob = (folder / "__init__.py").resolve()
    blob.chmod(0)
    yield project, variant
    blob.chmod(0o644)


def unreadable_problems(result: CliResult, variant: str) -> list[dict]:
    assert result.returncode == 1, result.stdout + result.stderr
    problems = json.loads(result.stdout)["problems"]
    assert [(p["kind"], p["repo_id"], p["variant"]) for p in problems] == [("unreadable", ROTARY, variant)]
    return problems


def test_an_unreadable_cached_file_is_one_problem_naming_the_variant(unreadable_variant) -> None:
    project, variant = unreadable_variant
    (problem,) = unreadable_problems(run_where_modes_apply("verify", "--json", str(project)), variant)
    assert problem["message"].startswith(f"{ROTARY} {variant}: cannot read the cached copy (Permission denied)")
    assert problem["message"].endswith("check its permissions")

    result = run_where_modes_apply("verify", str(project))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{ROTARY} {variant}: cannot read the cached copy (Permission denied); check its permissions" in result.stdout


def test_require_cached_counts_an_unreadable_variant_as_present(unreadable_variant) -> None:
    # The variant is in the cache, only unreadable: saying it is not cached would send the
    # user to 'kernels download', which cannot fix a file's permissions.
    project, variant = unreadable_variant
    unreadable_problems(run_where_modes_apply("verify", "--require-cached", "--json", str(project)), variant)


def test_an_unreadable_variant_does_not_stop_the_others_being_checked(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)
    download_project(project, all_variants=True)
    assert len(verify_project(project).verified) == 3
    entry = read_lock(project / "kernels.lock", purpose="use").lock.get(ROTARY)
    first, *others = sorted(entry.variants)  # checked in lock order: the first one fails
    blob = (cache.variant_dir(cache.repo_dir(ROTARY), entry.sha, first) / "__init__.py").resolve()
    blob.chmod(0)
    try:
        result = run_where_modes_apply("verify", "--json", str(project))
    finally:
        blob.chmod(0o644)
    unreadable_problems(result, first)
    assert sorted(v["variant"] for v in json.loads(result.stdout)["verified"]) == others

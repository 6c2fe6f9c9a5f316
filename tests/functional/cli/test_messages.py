"""Messages that say exactly what is wrong: each case as a user meets it, through the command."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project

LAYER_NORM, ACTIVATION, FLASH = "kernels-test/layer-norm", "kernels-test/activation", "kernels-test/flash"


@pytest.fixture
def project(hub_env, tmp_path: Path) -> Path:
    return write_project(tmp_path / "app", f'"{LAYER_NORM}" = ">=0.2"', locked=True)


@pytest.mark.parametrize(("typed", "meant"), [("lok", "lock"), ("sycn", "sync"), ("verfy", "verify"), ("tre", "tree")])
def test_a_mistyped_command_is_told_the_nearest_one(tmp_path, typed, meant) -> None:
    result = run_kernels(typed, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == f"error: 'kernels {typed}' is not a command; did you mean '{meant}'? (see 'kernels --help')\n"


def test_to_wheel_of_a_repo_id_without_a_revision_says_to_give_one(tmp_path) -> None:
    result = run_kernels("to-wheel", FLASH, "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert f"kernels to-wheel {FLASH}@REVISION" in result.stderr and "no pyproject.toml" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_add_prints_what_it_wrote_as_toml_and_whether_the_entry_changed(project) -> None:
    added = run_kernels("add", f"{FLASH}@v1", str(project))
    assert added.returncode == 0, added.stderr
    assert added.stdout.splitlines()[0] == f'Added {FLASH} = {{ revision = "v1" }}'
    again = run_kernels("add", f"{FLASH}@v1", str(project))
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] == f'Unchanged {FLASH} = {{ revision = "v1" }}'
    ranged = run_kernels("add", f"{LAYER_NORM}>=0.1", str(project))
    assert ranged.returncode == 0, ranged.stderr
    assert ranged.stdout.splitlines()[0] == f'Updated {LAYER_NORM} = ">=0.1"'


def test_remove_of_a_kernel_another_pulls_in_names_who_pulls_it_in(project) -> None:
    before = (project / "pyproject.toml").read_text(), (project / "kernels.lock").read_text()
    result = run_kernels("remove", ACTIVATION, str(project))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert f"kernels.lock has it because {LAYER_NORM} depends on it; remove that kernel and it goes too" in result.stderr
    assert ((project / "pyproject.toml").read_text(), (project / "kernels.lock").read_text()) == before


def test_a_revision_that_does_not_exist_is_named_as_such(project) -> None:
    before = (project / "pyproject.toml").read_text()
    for revision in ("v9.9.9", "deadbeef"):
        result = run_kernels("add", f"{FLASH}@{revision}", str(project))
        assert result.returncode != 0
        assert f"no branch, tag or full commit '{revision}' in {FLASH}" in result.stderr, result.stderr
        assert "relax one of these ranges" not in result.stderr
    assert (project / "pyproject.toml").read_text() == before


def test_a_short_commit_says_to_give_the_full_one_naming_the_commit_it_starts(hub_env, project) -> None:
    before = (project / "pyproject.toml").read_text(), (project / "kernels.lock").read_text()
    full = hub_env.repos[FLASH].commits["1.1.0"]  # where branch v1 points
    result = run_kernels("add", f"{FLASH}@{full[:10]}", str(project))
    assert result.returncode == 1
    assert result.stderr == (f"error: no branch, tag or full commit '{full[:10]}' in {FLASH}; its versions: none "
                             f"(branches v2, v1); give the full commit: '{full[:10]}' is the start of {full} (v1)\n")
    unknown = run_kernels("add", f"{FLASH}@0123456789ab", str(project))
    assert unknown.returncode == 1 and unknown.stderr.count("\n") == 1
    assert "give the full commit, 40 hex digits (no branch or tag points at one starting with it)" in unknown.stderr
    assert ((project / "pyproject.toml").read_text(), (project / "kernels.lock").read_text()) == before
    # The full commit it named is taken.
    taken = run_kernels("add", f"{FLASH}@{full}", str(project))
    assert taken.returncode == 0, taken.stderr


def test_a_range_given_to_add_that_nothing_meets_is_the_command_line_s_not_pyproject_s(project) -> None:
    from tests.fixtures.schemas import validated

    before = (project / "pyproject.toml").read_text(), (project / "kernels.lock").read_text()
    result = run_kernels("add", f"{FLASH}>=9", str(project))
    assert result.returncode == 1
    assert result.stderr == (
        "error: cannot find versions that satisfy every requirement:\n"
        f"  {FLASH} >=9 (from command line)\n"
        f"  versions of {FLASH}: none (branches v2, v1)\n"
        f"hint: relax the range given to kernels add ('{FLASH}>=9'); pyproject.toml and kernels.lock were not changed\n"
    )
    assert "[tool.kernels.dependencies]" not in result.stderr and "from project" not in result.stderr
    payload = validated(run_kernels("add", f"{FLASH}>=9", "--json", str(project)), "error")
    assert payload["conflict"]["requester"] == "command line"
    assert payload["conflict"]["causes"] == [{"repo_id": FLASH, "requirement": ">=9", "required_by": None}]
    assert ((project / "pyproject.toml").read_text(), (project / "kernels.lock").read_text()) == before
    # The same range in pyproject.toml is pyproject's, as before.
    write_project(project, f'"{LAYER_NORM}" = ">=0.2"\n"{FLASH}" = ">=9"')
    locked = run_kernels("lock", str(project))
    assert locked.returncode == 1 and f"{FLASH} >=9 (from project)" in locked.stderr
    assert "relax one of these ranges in [tool.kernels.dependencies]" in locked.stderr


def test_verify_with_nothing_cached_says_so_plainly(project) -> None:
    bare = run_kernels("verify", str(project))
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout == ("kernels.lock and pyproject.toml agree (2 kernels); nothing locked is in the cache yet, "
                           "so no file was checked: 'kernels download' fetches this machine's builds\n")  # fmt: skip
    assert run_kernels("download", str(project)).returncode == 0
    cached = run_kernels("verify", str(project))
    assert "kernels.lock, pyproject.toml and the cache agree (2 kernels, 2 cached variants verified)" in cached.stdout


def test_json_and_quiet_also_before_the_command(project) -> None:
    from tests.fixtures.schemas import validated

    payload = validated(run_kernels("--json", "tree", str(project)), "tree")
    assert payload["ok"] is True and payload["kernels"][0]["repo_id"] == LAYER_NORM
    export = ("export", "--format", "kernels-0.17", "-o", str(project / "hf.lock"), str(project))
    for args in (("-q", "tree", str(project)), ("tree", "-q", str(project)), ("-q", *export)):
        quiet = run_kernels(*args)
        assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", ""), args

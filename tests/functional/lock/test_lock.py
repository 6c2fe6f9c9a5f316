"""`kernels lock` against the local Hub: requirement forms, transitive pins, hashes, reuse."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kernel_deps.commands.lock import lock_project
from kernel_deps.core.errors import ResolutionError
from kernel_deps.hub.client import HubClient
from kernel_deps.lock.model import Lockfile
from kernel_deps.cli.render_lock import change_line
from tests.fixtures.builder import KernelRepo, Release, git_blob_id
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.projects import write_project


def run_cli(*args: str, cwd: Path | None = None, env_extra: dict | None = None) -> CliResult:
    return run_kernels(*args, cwd=cwd, env=env_extra)


def snapshot(project: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(project.iterdir()) if p.is_file()}


def entry(lock: Lockfile, repo_id: str):
    found = lock.get(repo_id)
    assert found is not None, f"{repo_id} not in lock"
    return found


@pytest.mark.parametrize(
    ("repo_id", "value", "release", "version_name"),
    [
        ("kernels-test/activation", '">=1.0,<2"', "1.2.0", "v1.2.0"),  # newest final tag in range
        ("kernels-test/activation", '">=1.3.0rc1,<2"', "1.3.0rc1", "v1.3.0rc1"),  # pre-release when asked
        ("kernels-test/activation", '"~=1.1.0"', "1.1.0", "v1.1.0"),
        ("kernels-test/activation", '"1.0.0"', "1.0.0", "v1.0.0"),  # a bare version means ==
        ("kernels-test/activation", "1", "1.2.0", "v1"),  # the v1 branch
        ("kernels-test/flash", "1", "1.1.0", "v1"),  # branches only
        ("kernels-test/flash", "2", "2.0.0", "v2"),
        ("kernels-test/rotary", '{ version = ">=1,<2" }', "1.1.0", "v1.1.0"),
        ("kernels-test/rotary", '{ revision = "v1.0.0" }', "1.0.0", "v1.0.0"),  # a tag
        ("kernels-test/rotary", '{ revision = "v2" }', "2.0.0", "v2"),  # a branch
        ("kernels-test/legacy-gelu", '">=0.1"', "0.2.0", "v0.2.0"),  # legacy model repo
        ("kernels-test/norm-universal", '">=1.1"', "1.1", "v1.1"),  # vX.Y tags
    ],
)
def test_requirement_forms(hub_env, tmp_path, repo_id, value, release, version_name) -> None:
    project = write_project(tmp_path / "app", f'"{repo_id}" = {value}')
    outcome = lock_project(project)
    locked = entry(outcome.lock, repo_id)
    assert locked.sha == hub_env.repos[repo_id].commits[release]
    assert locked.version == version_name
    assert outcome.written and (project / "kernels.lock").read_text() == outcome.lock.to_text()


def test_revision_as_full_commit(hub_env, tmp_path) -> None:
    commit = hub_env.repos["kernels-test/rotary"].commits["1.0.0"]
    project = write_project(tmp_path / "app", f'"kernels-test/rotary" = {{ revision = "{commit}" }}')
    locked = entry(lock_project(project).lock, "kernels-test/rotary")
    assert locked.sha == commit
    assert locked.requirement == f"revision={commit}"


def test_major_without_branch_takes_newest_tag_of_that_major(hub_env, tmp_path) -> None:
    built = hub_env.add_repo(
        KernelRepo("kernels-test/lock-tags-only", (Release("1.0.0"), Release("1.4.0"), Release("1.5.0rc1"), Release("2.0.0")))
    )
    for branch in ("v1", "v2"):
        built.git("branch", "-D", branch)
    project = write_project(tmp_path / "app", '"kernels-test/lock-tags-only" = 1')
    locked = entry(lock_project(project).lock, "kernels-test/lock-tags-only")
    assert (locked.sha, locked.version) == (built.commits["1.4.0"], "v1.4.0")


def test_transitive_dependency_is_locked_with_its_own_hashes(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/layer-norm" = ">=0.2"')
    lock = lock_project(project).lock
    layer_norm = entry(lock, "kernels-test/layer-norm")
    activation = entry(lock, "kernels-test/activation")
    assert layer_norm.dependencies == ("kernels-test/activation",)
    assert layer_norm.requirement == ">=0.2"
    # layer-norm 0.2.0 asks for activation >=1.1,<2: the newest is 1.2.0, not 2.0.0.
    assert activation.sha == hub_env.repos["kernels-test/activation"].commits["1.2.0"]
    assert activation.requirement is None and activation.dependencies == ()
    assert set(activation.variants) == {p.split("/")[1] for p in hub_env.repos["kernels-test/activation"].files["1.2.0"]}
    assert [k.repo_id for k in lock.kernels] == ["kernels-test/activation", "kernels-test/layer-norm"]


def independent_variant_hash(files: dict, variant: str) -> str:
    """git_lfs_concat written out from the builder's own file contents."""
    pairs = []
    prefix = f"build/{variant}/"
    for path, content in files.items():
        if not path.startswith(prefix):
            continue
        rel = path[len(prefix):]
        if rel.endswith(".pyc") or "__pycache__" in rel.split("/"):
            continue
        digest = hashlib.sha256(content.data).hexdigest() if content.lfs else git_blob_id(content.data)
        pairs.append((rel.encode(), digest))
    h = hashlib.sha256()
    for rel, digest in sorted(pairs):
        h.update(rel + bytes.fromhex(digest))
    return "sha256-" + h.hexdigest()


def test_variant_hashes_match_an_independent_computation(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/activation" = "==2.0.0"')
    locked = entry(lock_project(project).lock, "kernels-test/activation")
    files = hub_env.repos["kernels-test/activation"].files["2.0.0"]
    variants = {p.split("/")[1] for p in files}
    assert set(locked.variants) == variants
    for variant in variants:
        assert any(c.lfs for p, c in files.items() if p.startswith(f"build/{variant}/")) or variant == "torch-universal"
        assert locked.variants[variant].hash == independent_variant_hash(files, variant)
        assert locked.variants[variant].hash_type == "git_lfs_concat"


def test_conflict_names_both_sides_and_writes_nothing(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/attention" = ">=1.4"\n"kernels-test/rotary" = "<2"')
    before = snapshot(project)
    result = run_cli("lock", str(project), env_extra={"HF_ENDPOINT": hub_env.url})
    assert result.returncode == 1
    assert "kernels-test/rotary >=2 (from kernels-test/attention 1.4.0)" in result.stderr
    assert "kernels-test/rotary <2 (from project)" in result.stderr
    assert "versions of kernels-test/rotary: v2.0.0, v1.1.0, v1.0.0" in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(project) == before


def test_nothing_matches_lists_what_exists(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/rotary" = ">=5"')
    with pytest.raises(ResolutionError, match=r"(?s)kernels-test/rotary >=5 \(from project\).*v2\.0\.0, v1\.1\.0, v1\.0\.0"):
        lock_project(project)
    assert not (project / "kernels.lock").exists()


def test_check_passes_fresh_fails_stale_and_writes_nothing(hub_env, tmp_path) -> None:
    env = {"HF_ENDPOINT": hub_env.url}
    project = write_project(tmp_path / "app", '"kernels-test/rotary" = ">=1,<2"')
    missing = run_cli("lock", "--check", str(project), env_extra=env)  # as from every command: exit 2
    assert missing.returncode == 2 and "kernels.lock: not found; run 'kernels lock' to create it" in missing.stderr
    assert not (project / "kernels.lock").exists()

    assert run_cli("lock", str(project), env_extra=env).returncode == 0
    fresh = run_cli("lock", "--check", str(project), env_extra=env)
    assert fresh.returncode == 0, fresh.stderr

    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('">=1,<2"', '">=2"'))
    before = snapshot(project)
    stale = run_cli("lock", "--check", str(project), env_extra=env)
    assert stale.returncode == 1
    assert "kernels.lock is out of date" in stale.stderr
    assert "kernels-test/rotary v1.1.0" in stale.stderr and "v2.0.0" in stale.stderr
    assert snapshot(project) == before


def test_relock_after_new_upstream_tag_changes_nothing_until_upgraded(hub_env, tmp_path) -> None:
    from tests.fixtures.builder import commit_release, update_major_branches

    spec = KernelRepo("kernels-test/lock-moving", (Release("1.0.0"),))
    built = hub_env.add_repo(spec)
    project = write_project(tmp_path / "app", '"kernels-test/lock-moving" = ">=1,<2"\n"kernels-test/rotary" = ">=1,<2"')
    first = lock_project(project)
    before = (project / "kernels.lock").read_bytes()

    commit_release(built, Release("1.1.0"), 1)
    update_major_branches(built)
    again = lock_project(project)
    assert again.up_to_date and not again.written and again.changes == []
    assert (project / "kernels.lock").read_bytes() == before

    upgraded = lock_project(project, upgrade_packages=["kernels-test/lock-moving"])
    assert entry(upgraded.lock, "kernels-test/lock-moving").sha == built.commits["1.1.0"]
    assert entry(upgraded.lock, "kernels-test/rotary") == entry(first.lock, "kernels-test/rotary")
    assert any("kernels-test/lock-moving" in line and "v1.1.0" in line for line in map(change_line, upgraded.changes))


def test_upgrade_releases_every_pin(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/rotary" = ">=1,<2"')
    old = hub_env.repos["kernels-test/rotary"].commits["1.0.0"]
    (project / "kernels.lock").write_text(
        json.dumps([{"repo_id": "kernels-test/rotary", "sha": old, "variants": {}, "dependencies": []}])
    )
    assert entry(lock_project(project).lock, "kernels-test/rotary").sha == old
    assert entry(lock_project(project, upgrade=True).lock, "kernels-test/rotary").sha != old


def test_kernels_017_lock_is_read_as_prior_pins(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/rotary" = ">=1,<2"')
    old = hub_env.repos["kernels-test/rotary"].commits["1.0.0"]
    (project / "kernels.lock").write_text(
        json.dumps([{"dependency": {"repo-id": "kernels-test/rotary", "version": 1}, "lock": {"commit": old}}])
    )
    outcome = lock_project(project)
    assert entry(outcome.lock, "kernels-test/rotary").sha == old
    assert Lockfile.from_json((project / "kernels.lock").read_text()).get("kernels-test/rotary").sha == old


def test_same_inputs_give_the_same_bytes(hub_env, tmp_path) -> None:
    deps = '"kernels-test/layer-norm" = ">=0.1"\n"kernels-test/flash" = 2'
    one = write_project(tmp_path / "one", deps)
    two = write_project(tmp_path / "two", deps)
    lock_project(one)
    lock_project(two, hub=HubClient())
    assert (one / "kernels.lock").read_bytes() == (two / "kernels.lock").read_bytes()


@pytest.mark.parametrize(
    ("deps", "lock_text", "message"),
    [
        ('"kernels-test/rotary" = ">=1,,<2"', None, "pyproject.toml:"),
        ('"kernels-test/rotary" = 1.5', None, "kernels-test/rotary"),
        ('"not a repo" = ">=1"', None, "not a repo"),
        ('"kernels-test/rotary" = { version = ">=1", revision = "v1" }', None, "kernels-test/rotary"),
        ('"kernels-test/rotary" = ">=1"', "{not json", "kernels.lock"),
        ('"kernels-test/rotary" = ">=1"', '[{"repo_id": "kernels-test/rotary", "sha": "abc", "variants": {}}]', "[0].sha"),
    ],
)
def test_bad_input_is_one_line_exit_2_files_untouched(hub_env, tmp_path, deps, lock_text, message) -> None:
    project = write_project(tmp_path / "app", deps)
    if lock_text is not None:
        (project / "kernels.lock").write_text(lock_text)
    before = snapshot(project)
    result = run_cli("lock", str(project), env_extra={"HF_ENDPOINT": hub_env.url})
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert message in result.stderr
    assert snapshot(project) == before


def test_lock_json_summary(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/flash" = 1')
    result = run_cli("lock", "--json", str(project), env_extra={"HF_ENDPOINT": hub_env.url})
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["written"] is True
    assert payload["kernels"] == [
        {"repo_id": "kernels-test/flash", "version": "v1", "sha": hub_env.repos["kernels-test/flash"].commits["1.1.0"], "variants": 3}
    ]


def test_add_and_remove_keep_comments_and_relock(hub_env, tmp_path) -> None:
    env = {"HF_ENDPOINT": hub_env.url}
    project = write_project(tmp_path / "app", '"kernels-test/flash" = 1  # pinned major')
    added = run_cli("add", "kernels-test/rotary", str(project), env_extra=env)
    assert added.returncode == 0, added.stderr
    text = (project / "pyproject.toml").read_text()
    assert "# Kernels this project loads at run time." in text and "# pinned major" in text
    assert '"kernels-test/rotary" = ">=2.0.0,<3"' in text
    lock = Lockfile.from_json((project / "kernels.lock").read_text())
    assert lock.repo_ids == ("kernels-test/flash", "kernels-test/rotary")

    removed = run_cli("remove", "kernels-test/rotary", str(project), env_extra=env)
    assert removed.returncode == 0, removed.stderr
    assert "kernels-test/rotary" not in (project / "pyproject.toml").read_text()
    assert Lockfile.from_json((project / "kernels.lock").read_text()).repo_ids == ("kernels-test/flash",)


def test_failed_relock_on_add_leaves_both_files(hub_env, tmp_path) -> None:
    env = {"HF_ENDPOINT": hub_env.url}
    project = write_project(tmp_path / "app", '"kernels-test/rotary" = "<2"')
    assert run_cli("lock", str(project), env_extra=env).returncode == 0
    before = snapshot(project)
    result = run_cli("add", "kernels-test/attention>=1.4", str(project), env_extra=env)
    assert result.returncode == 1
    assert "kernels-test/rotary <2 (from project)" in result.stderr
    assert snapshot(project) == before


def test_add_and_remove_default_to_the_current_folder_and_accept_project(hub_env, tmp_path) -> None:
    """PROJECT_DIR is positional, default '.'; the older --project spelling still works."""
    env = {"HF_ENDPOINT": hub_env.url}
    project = write_project(tmp_path / "app", '"kernels-test/flash" = 1')
    added = run_cli("add", "kernels-test/rotary@v1.0.0", cwd=project, env_extra=env)
    assert added.returncode == 0, added.stderr
    assert '"kernels-test/rotary" = { revision = "v1.0.0" }' in (project / "pyproject.toml").read_text()
    assert Lockfile.from_json((project / "kernels.lock").read_text()).repo_ids == ("kernels-test/flash", "kernels-test/rotary")

    removed = run_cli("remove", "kernels-test/rotary", "--project", str(project), env_extra=env)
    assert removed.returncode == 0, removed.stderr
    assert "kernels-test/rotary" not in (project / "pyproject.toml").read_text()
    added = run_cli("add", "kernels-test/rotary<2", "--project", str(project), env_extra=env)
    assert added.returncode == 0, added.stderr
    assert Lockfile.from_json((project / "kernels.lock").read_text()).get("kernels-test/rotary").version == "v1.1.0"


@pytest.mark.parametrize("command", [["add", "kernels-test/rotary"], ["remove", "kernels-test/flash"]])
def test_project_folder_given_twice_is_bad_input(hub_env, tmp_path, command) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/flash" = 1')
    other = write_project(tmp_path / "other", '"kernels-test/flash" = 1')
    before = snapshot(project), snapshot(other)
    result = run_cli(*command, str(project), "--project", str(other), env_extra={"HF_ENDPOINT": hub_env.url})
    assert result.returncode == 2
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"error: the project folder is given twice ({project} and --project {other}); give it once, as PROJECT_DIR"
    )
    assert (snapshot(project), snapshot(other)) == before

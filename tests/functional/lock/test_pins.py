"""A lock that holds: pins stay where they were locked while upstream moves.

Each test locks a project against the local Hub, then changes the world upstream (a
branch advances, a tag is deleted, a branch is force-pushed, history is rewritten) or
the project's requirement, and checks what `kernels lock`, `lock --check` and
`kernels verify --online` say.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_deps.commands.lock import LockMode, lock_project
from kernel_deps.commands.verify import verify_project
from kernel_deps.core.errors import ResolutionError
from kernel_deps.core.spec import parse_requirement
from kernel_deps.lock.freshness import check_sync, entry_satisfies
from kernel_deps.lock.model import LockedKernel, Lockfile
from tests.fixtures.builder import KernelRepo, Release, commit_release, update_major_branches
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.peers import lock_with_kernels_016
from tests.fixtures.projects import write_project


def make_project(root: Path, deps: str) -> Path:
    return write_project(root / "app", deps)


def run_cli(*args: str, **env: str) -> CliResult:
    return run_kernels(*args, env=env)


def test_a_branch_pin_holds_when_upstream_pushes_onto_the_branch(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/pin-branch-advances"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    project = make_project(tmp_path, f'"{repo_id}" = 1')
    first = lock_project(project).lock.get(repo_id)
    assert (first.version, first.sha) == ("v1", built.commits["1.0.0"])
    before = (project / "kernels.lock").read_bytes()

    commit_release(built, Release("1.1.0"), 1)
    update_major_branches(built)  # upstream pushed a new build onto v1
    assert built.branches["v1"] != first.sha

    # --check needs no Hub while every pin still satisfies pyproject.toml.
    check = run_cli("lock", "--check", str(project), HF_HUB_OFFLINE="1")
    assert (check.returncode, check.stderr) == (0, "")
    assert "kernels.lock is up to date" in check.stdout
    again = lock_project(project)
    assert again.up_to_date and not again.written and again.changes == []
    assert (project / "kernels.lock").read_bytes() == before

    report = verify_project(project, online=True)
    assert report.ok, report.problems
    (notice,) = report.notices
    assert notice.kind == "ref-advanced" and notice.repo_id == repo_id
    assert (notice.expected, notice.got, dict(notice.facts)) == (first.sha, built.commits["1.1.0"], {"ref": "v1"})

    moved = lock_project(project, upgrade_packages=[repo_id]).lock.get(repo_id)
    assert (moved.version, moved.sha) == ("v1", built.commits["1.1.0"])


def test_a_deleted_tag_keeps_its_pin(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/pin-tag-deleted"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("1.1.0"))))
    project = make_project(tmp_path, f'"{repo_id}" = ">=1,<2"')
    lock_project(project)
    before = (project / "kernels.lock").read_bytes()
    built.git("tag", "-d", "v1.1.0")
    built.git("branch", "-D", "v1")  # nothing names the locked commit any more

    outcome = lock_project(project)
    assert outcome.up_to_date and (project / "kernels.lock").read_bytes() == before
    assert outcome.lock.get(repo_id).version == "v1.1.0"
    assert run_cli("lock", "--check", str(project)).returncode == 0


def test_a_requirement_narrowed_past_the_pin_moves_it(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/pin-narrowed"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("1.1.0"))))
    project = make_project(tmp_path, f'"{repo_id}" = ">=1,<2"')
    assert lock_project(project).lock.get(repo_id).sha == built.commits["1.1.0"]

    write_project(project, f'"{repo_id}" = "<1.1"')
    check = run_cli("lock", "--check", str(project))
    assert check.returncode == 1 and f"~ {repo_id} v1.1.0" in check.stderr and "v1.0.0" in check.stderr
    outcome = lock_project(project)
    assert outcome.lock.get(repo_id).sha == built.commits["1.0.0"]
    assert outcome.lock.get(repo_id).version == "v1.0.0"


def test_a_force_pushed_branch_keeps_the_pin_while_the_commit_is_served(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/pin-force-pushed"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", tagged=False), Release("1.1.0", tagged=False))))
    project = make_project(tmp_path, f'"{repo_id}" = 1')
    locked = lock_project(project).lock.get(repo_id)
    assert locked.sha == built.commits["1.1.0"]
    built.git("branch", "-f", "v1", built.commits["1.0.0"])  # rewound: the locked commit left v1's history

    outcome = lock_project(project)
    assert outcome.up_to_date and outcome.lock.get(repo_id) == locked
    report = verify_project(project, online=True)
    assert [(p.kind, p.repo_id) for p in report.problems] == [("ref-moved", repo_id)]
    assert dict(report.problems[0].facts) == {"ref": "v1", "ref_kind": "branch"}  # a branch rewound: a force-push


def test_a_pinned_commit_the_hub_no_longer_serves_is_a_clear_error(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/pin-rewritten"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    project = make_project(tmp_path, f'"{repo_id}" = ">=1,<2"')
    old = lock_project(project).lock.get(repo_id).sha
    before = (project / "kernels.lock").read_bytes()
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", lfs_size=100),)))  # history rewritten

    with pytest.raises(ResolutionError) as caught:
        lock_project(project)
    message = caught.value.message
    assert f"{repo_id}: the locked commit {old[:12]} (v1.0.0) is no longer on the Hub" in message
    assert f"'kernels lock --upgrade-package {repo_id}'" in message
    assert (project / "kernels.lock").read_bytes() == before

    result = run_cli("lock", str(project))
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "no longer on the Hub" in result.stderr
    assert lock_project(project, upgrade_packages=[repo_id]).lock.get(repo_id).sha != old


def test_dry_run_shows_what_would_change_and_writes_nothing(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/pin-dry-run"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    project = make_project(tmp_path, f'"{repo_id}" = ">=1,<2"')
    lock_project(project)
    before = (project / "kernels.lock").read_bytes()
    commit_release(built, Release("1.1.0"), 1)
    update_major_branches(built)

    result = run_cli("lock", "--dry-run", "--upgrade", str(project))
    assert result.returncode == 0, result.stderr
    assert f"~ {repo_id} v1.0.0" in result.stdout and "v1.1.0" in result.stdout
    assert "would update kernels.lock" in result.stdout
    assert (project / "kernels.lock").read_bytes() == before


@pytest.mark.parametrize(
    ("value", "version", "satisfied"),
    [
        (1, "v1", True),  # the branch
        (1, "v1.2.0", True),  # a final v1.* tag
        (1, "v2", False),
        (1, "v1.3.0rc1", False),
        (">=1.2,<2", "v1.2.0", True),
        (">=1.2,<2", "v1", False),  # a range is met by tags, not by a branch
        (">=1.2,<2", None, False),  # nothing recorded: nothing to judge by
        ({"revision": "main"}, "main", True),
        ({"revision": "main"}, "v1.2.0", False),
    ],
)
def test_one_rule_for_lock_entries(value, version, satisfied) -> None:
    sha = "a" * 40
    requirement = parse_requirement("org/kernel", value, source="pyproject.toml")
    entry = LockedKernel(repo_id="org/kernel", sha=sha, variants={}, version=version, requirement=requirement.text)
    assert entry_satisfies(entry, requirement) is satisfied
    problems = check_sync([requirement], Lockfile(kernels=(entry,)))
    assert [p.kind for p in problems] == ([] if satisfied else ["unsatisfied"])


def test_a_revision_pin_by_commit_is_met_by_that_commit_only() -> None:
    sha = "b" * 40
    requirement = parse_requirement("org/kernel", {"revision": sha}, source="pyproject.toml")
    assert entry_satisfies(LockedKernel(repo_id="org/kernel", sha=sha, variants={}), requirement)
    assert not entry_satisfies(LockedKernel(repo_id="org/kernel", sha="c" * 40, variants={}), requirement)


def test_outdated_shows_upgrades_newer_releases_and_moved_branches(hub_env, tmp_path) -> None:
    import json

    from kernel_deps.commands.outdated import outdated_project

    branchy, ranged = "kernels-test/outdated-branch", "kernels-test/outdated-range"
    b = hub_env.add_repo(KernelRepo(branchy, (Release("1.0.0"),)))
    r = hub_env.add_repo(KernelRepo(ranged, (Release("1.0.0"),)))
    project = make_project(tmp_path, f'"{branchy}" = 1\n"{ranged}" = ">=1,<2"')
    lock_project(project)
    assert not outdated_project(project).drifted

    commit_release(b, Release("1.1.0"), 1)
    update_major_branches(b)  # v1 moves on
    commit_release(r, Release("1.1.0"), 1)
    commit_release(r, Release("2.0.0"), 2)
    update_major_branches(r)  # a release within the range, and one outside it

    report = {k.repo_id: k for k in outdated_project(project).kernels}
    moved = report[branchy]
    assert (moved.locked_commit, moved.upgrade_commit, moved.ref_moved_to) == (
        b.commits["1.0.0"], b.commits["1.1.0"], b.commits["1.1.0"]
    )
    # Every generated variant's files name the release, so each variant's hash changes.
    assert set(moved.changed_variants) == set(lock_project(project).lock.get(branchy).variants)
    ahead = report[ranged]
    assert (ahead.locked_version, ahead.upgrade_version, ahead.latest_version) == ("v1.0.0", "v1.1.0", "v2.0.0")
    assert ahead.ref_moved_to is None and ahead.upgradable

    plain = run_cli("outdated", str(project))
    assert plain.returncode == 0, plain.stderr
    assert f"{ranged}" in plain.stdout and "v1.1.0" in plain.stdout and "v2.0.0" in plain.stdout
    assert f"note: {branchy}: v1 now points at {b.commits['1.1.0'][:12]}" in plain.stdout
    assert run_cli("outdated", "--exit-code", str(project)).returncode == 1
    data = json.loads(run_cli("outdated", "--json", str(project)).stdout)
    assert data["drifted"] is True
    assert {k["repo_id"]: k["upgradable"] for k in data["kernels"]} == {branchy: True, ranged: True}
    # Reading only: the lock did not move.
    assert lock_project(project, mode=LockMode.RESOLVE).up_to_date


def test_a_kernels_016_lock_is_downloaded_verified_and_loaded_as_it_is(hub_env, tmp_path) -> None:
    from kernel_deps import load_kernel
    from kernel_deps.commands.download import download_project

    repo_id = "kernels-test/pin-from-kernels-016"  # its own repo: modules stay loaded per process
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("1.1.0"))))
    project = make_project(tmp_path, f'"{repo_id}" = 1')
    written = lock_with_kernels_016(project)
    assert b'"dependencies"' not in written and b'"version"' not in written  # their layout, not ours

    report = download_project(project)
    assert [t.kernel.repo_id for t in report.fetched] == [repo_id]
    verified = verify_project(project, require_cached=True)
    # The cache holds exactly what it pins; its pin cannot show that it meets `= 1`: it records no version.
    assert [(p.kind, p.repo_id) for p in verified.problems] == [("version-not-recorded", repo_id)]
    assert [n.kind for n in verified.notices] == ["foreign-lock"]
    assert verified.notices[0].facts["written_by"] == "Hugging Face kernels <= 0.16"
    cli = run_cli("verify", str(project))
    assert cli.returncode == 1 and "note: " in cli.stdout, cli.stdout + cli.stderr
    assert "records no version for it" in cli.stdout and "run 'kernels lock' to convert it" in cli.stdout
    from kernel_deps.loader.api import StaleLockWarning

    with pytest.warns(StaleLockWarning, match="records no version|does not agree with pyproject.toml"):
        module = load_kernel(repo_id, lockfile=project / "kernels.lock")
    assert module.__kernel_origin__.commit == hub_env.repos[repo_id].branches["v1"]
    outdated = run_cli("outdated", str(project))
    assert outdated.returncode == 0 and repo_id in outdated.stdout, outdated.stderr
    assert (project / "kernels.lock").read_bytes() == written  # never rewritten by them

    # kernels lock converts it, keeping every pin: changes, not additions.
    outcome = lock_project(project)
    assert outcome.lock.get(repo_id).sha == hub_env.repos[repo_id].branches["v1"]
    assert outcome.changes and not any(change.action == "added" for change in outcome.changes)
    assert verify_project(project, require_cached=True).ok  # converted: now it shows its version


def test_a_kernels_017_lock_is_used_by_download_and_verify_and_gets_a_clear_message_from_the_loader(
    hub_env, tmp_path
) -> None:
    import json

    from kernel_deps import load_kernel

    repo_id = "kernels-test/rotary"
    project = make_project(tmp_path, f'"{repo_id}" = 1')
    commit = hub_env.repos[repo_id].branches["v1"]
    entry = {"dependency": {"repo-id": repo_id, "version": 1}, "lock": {"commit": commit}}
    (project / "kernels.lock").write_text(json.dumps([entry]))
    said = "pins commits but no variant hashes"
    for command in ("download", "verify"):
        result = run_cli(command, str(project))
        assert result.returncode == 0, result.stderr
        out = result.stdout + result.stderr
        converts = "'kernels lock' converts it" in out or "run 'kernels lock' to convert it" in out
        assert out.count(said) == 1 and converts, out
    expected = "records commits but no variant hashes"
    from kernel_deps.core.errors import LockfileError

    with pytest.raises(LockfileError, match=expected):
        load_kernel(repo_id, lockfile=project / "kernels.lock")

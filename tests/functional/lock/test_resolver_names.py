"""The tag or branch name `kernels lock` records beside each commit, and which commit a
revision names: what a user reads in kernels.lock and what a relock keeps, against real
repos on the local Hub, through the in-process command."""

from __future__ import annotations

import pytest

from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project


def _lock(project):
    result = run_kernels("lock", str(project))
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.parametrize(
    "branch",
    [
        "release-candidate-for-the-hopper-kernels",  # 40 characters, not hexadecimal
        "deadbeefdeadbeefdeadbeefdeadbeefdeadbeeX",  # 40 characters, all hex but one X
    ],
)
def test_a_branch_named_like_a_commit_is_locked_and_recorded_by_its_name(hub_env, tmp_path, branch: str) -> None:
    repo_id = f"kernels-test/rn-long-branch-{branch[:7]}"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("1.1.0"))))
    built.git("branch", branch, built.commits["1.0.0"])
    project = write_project(tmp_path / "app", f'"{repo_id}" = {{ revision = "{branch}" }}')
    _lock(project)
    entry = read_lock(project / "kernels.lock", purpose="use").lock.get(repo_id)
    # Only a lowercase 40-digit hexadecimal revision is a commit; this one is the branch.
    assert (entry.sha, entry.version) == (built.commits["1.0.0"], branch)


def test_a_commit_pin_keeps_its_recorded_tag_when_a_second_tag_lands_on_it(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/rn-commit-retagged"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("1.1.0"))))
    commit = built.commits["1.0.0"]
    project = write_project(tmp_path / "app", f'"{repo_id}" = {{ revision = "{commit}" }}')
    _lock(project)
    assert read_lock(project / "kernels.lock", purpose="use").lock.get(repo_id).version == "v1.0.0"
    before = (project / "kernels.lock").read_bytes()

    built.git("tag", "v1.0.1", commit)  # upstream tags the same commit again

    again = _lock(project)
    assert "kernels.lock is up to date" in again.stdout
    assert (project / "kernels.lock").read_bytes() == before


def test_a_kernel_asked_for_by_major_and_by_range_is_recorded_by_the_tag_both_accept(hub_env, tmp_path) -> None:
    kernel = "kernels-test/rn-major-and-range"
    user = "kernels-test/rn-major-and-range-user"
    built = hub_env.add_repo(KernelRepo(kernel, (Release("1.0.0"), Release("1.1.0"))))
    hub_env.add_repo(KernelRepo(user, (Release("1.0.0", variants=(CPU_VARIANT,), depends=((kernel, ">=1,<2"),)),)))
    # The project follows the v1 branch; the other kernel asks for a range, which a
    # branch name cannot show it meets: the tag names the commit for both.
    project = write_project(tmp_path / "app", f'"{kernel}" = 1\n"{user}" = ">=1"')
    _lock(project)
    entry = read_lock(project / "kernels.lock", purpose="use").lock.get(kernel)
    assert (entry.sha, entry.version) == (built.commits["1.1.0"], "v1.1.0")
    check = run_kernels("lock", "--check", str(project))
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_major_whose_branch_was_deleted_is_recorded_by_its_newest_tag(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/rn-major-branch-deleted"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("1.1.0"))))
    built.git("branch", "-D", "v1")  # main still points at 1.1.0; no v1 branch to record
    project = write_project(tmp_path / "app", f'"{repo_id}" = 1')
    _lock(project)
    entry = read_lock(project / "kernels.lock", purpose="use").lock.get(repo_id)
    assert (entry.sha, entry.version) == (built.commits["1.1.0"], "v1.1.0")


def test_a_range_that_allows_prereleases_still_locks_a_final_release_first(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/rn-final-before-rc"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("2.0.0rc1"))))
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1.0.0rc1"')
    _lock(project)
    entry = read_lock(project / "kernels.lock", purpose="use").lock.get(repo_id)
    assert (entry.sha, entry.version) == (built.commits["1.0.0"], "v1.0.0")


def test_a_revision_name_on_two_commits_locks_the_one_that_carries_a_version(hub_env, tmp_path) -> None:
    # "edge" is a tag on an unversioned development commit and a branch on 2.0.0rc1.
    repo_id = "kernels-test/rn-name-on-two-commits"
    built = hub_env.add_repo(KernelRepo(repo_id, (
        Release("1.0.0"), Release("2.0.0rc1"), Release("3.0.0.dev1", tagged=False),
    )))  # fmt: skip
    built.git("tag", "edge", built.commits["3.0.0.dev1"])
    built.git("branch", "edge", built.commits["2.0.0rc1"])
    project = write_project(tmp_path / "app", f'"{repo_id}" = {{ revision = "edge" }}')
    _lock(project)
    entry = read_lock(project / "kernels.lock", purpose="use").lock.get(repo_id)
    assert (entry.sha, entry.version) == (built.commits["2.0.0rc1"], "edge")

"""What `kernels lock` says when it cannot pin a kernel: the versions that exist, told as
the Hub has them (a repo may have tags and no version branch), and a commit asked for
that the Hub does not have. Real repos on the local Hub, through the in-process command."""

from __future__ import annotations

from tests.fixtures.builder import KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project


def test_a_conflict_over_a_repo_without_version_branches_lists_its_tags_alone(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/rc-tags-only"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("1.1.0"))))
    built.git("branch", "-D", "v1")
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=2"')

    result = run_kernels("lock", str(project))

    assert result.returncode == 1
    assert not (project / "kernels.lock").exists()
    assert result.stderr.splitlines() == [
        "error: cannot find versions that satisfy every requirement:",
        f"  {repo_id} >=2 (from project)",
        f"  versions of {repo_id}: v1.1.0, v1.0.0",
        "hint: relax one of these ranges in [tool.kernels.dependencies]",
    ]


def test_a_commit_the_hub_does_not_have_is_one_line_naming_kernel_and_commit(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/rc-unknown-commit"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    commit = "0123456789abcdef0123456789abcdef01234567"
    project = write_project(tmp_path / "app", f'"{repo_id}" = {{ revision = "{commit}" }}')

    result = run_kernels("lock", str(project))

    assert result.returncode == 1
    assert result.stderr == f"error: {repo_id}: revision '{commit}' not found on the Hub\n"
    assert not (project / "kernels.lock").exists()


def test_a_commit_the_hub_does_not_have_is_not_blamed_on_the_prior_pin(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/rc-unknown-commit-pinned"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"')
    assert run_kernels("lock", str(project)).returncode == 0
    before = (project / "kernels.lock").read_bytes()
    commit = "0123456789abcdef0123456789abcdef01234567"
    write_project(project, f'"{repo_id}" = {{ revision = "{commit}" }}')

    result = run_kernels("lock", str(project))

    assert result.returncode == 1
    assert result.stderr == f"error: {repo_id}: revision '{commit}' not found on the Hub\n"
    assert (project / "kernels.lock").read_bytes() == before


def test_a_revision_name_the_repo_lacks_lists_the_versions_it_has(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/rc-unknown-branch"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    project = write_project(tmp_path / "app", f'"{repo_id}" = {{ revision = "no-such-branch" }}')

    result = run_kernels("lock", str(project))

    assert result.returncode == 1
    assert result.stderr.splitlines() == [  # not a range to relax: a name that is not there
        f"error: no branch, tag or full commit 'no-such-branch' in {repo_id}; its versions: v1.0.0 (branches v1)",
    ]


def test_upgrading_a_kernel_the_project_does_not_have_is_bad_input_naming_it(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/rc-upgrade-known"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"')

    result = run_kernels("lock", "--upgrade-package", "kernels-test/rc-not-here", str(project))

    assert result.returncode == 2
    assert "--upgrade-package kernels-test/rc-not-here: not a kernel of this project or its lock" in result.stderr
    assert not (project / "kernels.lock").exists()

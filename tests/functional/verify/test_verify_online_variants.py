"""`kernels verify --online`: the variant sets of the lock and the Hub are compared both ways,
and a commit pinned by its SHA is checked as a commit, not as a tag or branch."""

from __future__ import annotations

import json
from pathlib import Path

from kernel_deps.commands.lock import lock_project
from kernel_deps.commands.verify import HUB_KINDS, verify_project
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, KernelRepo, Release
from tests.fixtures.projects import write_project

ROTARY = "kernels-test/rotary"
UNKNOWN_VARIANT = "torch213-cxx11-cu126-x86_64-linux"  # a valid name, not built for rotary


def edit_lock(project: Path, edit) -> None:
    path = project / "kernels.lock"
    entries = json.loads(path.read_text())
    edit(entries[0]["variants"])
    path.write_text(json.dumps(entries, indent=2) + "\n")


def locked_commit(project: Path) -> str:
    return json.loads((project / "kernels.lock").read_text())[0]["sha"]


def test_a_locked_variant_the_hub_does_not_serve_is_reported(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)
    edit_lock(project, lambda variants: variants.update({UNKNOWN_VARIANT: variants[CPU_VARIANT]}))
    assert verify_project(project).ok  # consistent with itself and pyproject, nothing cached
    locked = json.loads((project / "kernels.lock").read_text())[0]["variants"][UNKNOWN_VARIANT]["hash"]

    (problem,) = verify_project(project, online=True).problems
    assert (problem.kind, problem.repo_id, problem.variant, problem.expected, problem.got) == (
        "variant-not-on-hub", ROTARY, UNKNOWN_VARIANT, locked, None
    )
    assert dict(problem.facts) == {"commit": locked_commit(project)}  # the commit the Hub was asked about


def test_a_hub_variant_missing_from_the_lock_is_reported(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)
    served = json.loads((project / "kernels.lock").read_text())[0]["variants"][CUDA_VARIANT]["hash"]
    edit_lock(project, lambda variants: variants.pop(CUDA_VARIANT))
    assert verify_project(project).ok

    (problem,) = verify_project(project, online=True).problems
    assert (problem.kind, problem.repo_id, problem.variant, problem.expected, problem.got) == (
        "variant-not-locked", ROTARY, CUDA_VARIANT, None, served
    )
    assert dict(problem.facts) == {"commit": locked_commit(project)}


def test_both_directions_are_reported_at_once(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)

    def swap(variants: dict) -> None:
        variants[UNKNOWN_VARIANT] = variants.pop(CUDA_VARIANT)

    edit_lock(project, swap)
    problems = verify_project(project, online=True).problems
    assert sorted((p.kind, p.variant) for p in problems) == [
        ("variant-not-locked", CUDA_VARIANT), ("variant-not-on-hub", UNKNOWN_VARIANT)
    ]
    assert all(p.kind in HUB_KINDS for p in problems)


def test_a_commit_pin_no_ref_names_verifies_online(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/verify-untagged-pin"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", tagged=False), Release("1.1.0"))))
    commit = built.commits["1.0.0"]  # no tag, and the v1 branch and main point at 1.1.0
    project = write_project(tmp_path / "app", f'"{repo_id}" = {{ revision = "{commit}" }}')
    entry = lock_project(project).lock.get(repo_id)
    assert (entry.sha, entry.version) == (commit, None)

    report = verify_project(project, online=True)
    assert report.ok, report.problems
    assert report.notices == []


def test_a_commit_pin_whose_commit_is_gone_is_reported_not_as_a_ref(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/verify-untagged-gone"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", tagged=False), Release("1.1.0"))))
    commit = built.commits["1.0.0"]
    project = write_project(tmp_path / "app", f'"{repo_id}" = {{ revision = "{commit}" }}', locked=True)
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", tagged=False, lfs_size=100), Release("1.1.0"))))

    report = verify_project(project, online=True)
    assert [(p.kind, p.repo_id, p.expected) for p in report.problems] == [("commit-missing", repo_id, commit)]

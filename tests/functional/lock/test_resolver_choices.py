"""Which commit `kernels lock` chooses, the name it records, and what it says when it
cannot choose: each against real repos on the local Hub, through the in-process command
(tests/fixtures/cli.py) so that the resolver under test is the one that runs."""

from __future__ import annotations

import pytest

from kernel_deps.commands.lock import lock_project
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, METAL_VARIANT, KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project

FLASH = "kernels-test/flash"  # catalogue: vN branches only, no tags
# Five releases of one major; the v1 branch and main point at the newest.
STEPS = "kernels-test/choices-steps"
# v1.0.0 and v1.1.0 build for CUDA 12.8; v1.2.0 dropped it for CUDA 13.0.
DROPPED = "kernels-test/choices-dropped-cuda"
CU128_TARGET = "torch213-cxx11-cu128-x86_64-linux"
CU130_VARIANT = "torch213-cxx11-cu130-x86_64-linux"
OLD_TORCH_TARGET = "torch212-cxx11-cu128-x86_64-linux"


@pytest.fixture(scope="module")
def repos(local_hub):
    """This module's sample kernels, built into the session's Hub once."""
    if STEPS not in local_hub.repos:
        local_hub.add_repo(KernelRepo(STEPS, tuple(Release(f"1.{minor}.0") for minor in range(5))))
        local_hub.add_repo(KernelRepo(DROPPED, (
            Release("1.0.0"),
            Release("1.1.0"),
            Release("1.2.0", variants=(CU130_VARIANT, CPU_VARIANT, METAL_VARIANT)),
        )))  # fmt: skip
    return local_hub.repos


@pytest.mark.parametrize(
    ("spec", "expected"),
    [(">=1,<1.4", "1.3.0"), (">=1,<1.3", "1.2.0"), (">=1,<1.2", "1.1.0"), ("<1.1", "1.0.0")],
)
def test_a_range_below_the_newest_release_locks_the_newest_release_it_allows(
    hub_env, repos, tmp_path, spec: str, expected: str
) -> None:
    # Only tags name these commits (the v1 branch is on 1.4.0): the version decides.
    project = write_project(tmp_path / "app", f'"{STEPS}" = "{spec}"')
    result = run_kernels("lock", str(project))
    assert result.returncode == 0, result.stderr
    entry = read_lock(project / "kernels.lock", purpose="use").lock.get(STEPS)
    assert (entry.version, entry.sha) == (f"v{expected}", repos[STEPS].commits[expected])


def test_a_commit_no_ref_points_at_is_locked_by_its_sha(hub_env, repos, tmp_path) -> None:
    # flash's v1 branch moved on to 1.1.0: nothing names the 1.0.0 commit any more.
    commit = repos[FLASH].commits["1.0.0"]
    assert commit not in repos[FLASH].branches.values()
    project = write_project(tmp_path / "app", f'"{FLASH}" = {{ revision = "{commit}" }}')
    result = run_kernels("lock", str(project))
    assert result.returncode == 0, result.stderr
    entry = read_lock(project / "kernels.lock", purpose="use").lock.get(FLASH)
    assert (entry.sha, entry.version) == (commit, None)


def test_a_commit_on_a_branch_records_the_branch_name(hub_env, repos, tmp_path) -> None:
    commit = repos[FLASH].commits["1.1.0"]  # the v1 branch, and no tag
    project = write_project(tmp_path / "app", f'"{FLASH}" = {{ revision = "{commit}" }}')
    result = run_kernels("lock", str(project))
    assert result.returncode == 0, result.stderr
    entry = read_lock(project / "kernels.lock", purpose="use").lock.get(FLASH)
    assert (entry.sha, entry.version) == (commit, "v1")


def test_a_relock_keeps_the_tag_name_it_recorded_when_a_second_tag_lands_on_the_commit(
    hub_env, tmp_path
) -> None:
    repo_id = "kernels-test/choices-retagged"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1,<2"')
    assert lock_project(project).lock.get(repo_id).version == "v1.0.0"
    before = (project / "kernels.lock").read_bytes()

    built.git("tag", "v1.0.1", built.commits["1.0.0"])  # upstream tags the same build again

    result = run_kernels("lock", str(project))
    assert result.returncode == 0, result.stderr
    assert "kernels.lock is up to date" in result.stdout
    assert (project / "kernels.lock").read_bytes() == before


def test_a_range_a_branch_only_repo_cannot_meet_lists_its_branches_and_no_tags(hub_env, repos, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{FLASH}" = ">=1"')
    result = run_kernels("lock", str(project))
    assert result.returncode == 1
    assert not (project / "kernels.lock").exists()
    assert result.stderr.startswith("error: cannot find versions that satisfy every requirement:")
    assert f"  versions of {FLASH}: none (branches v2, v1)\n" in result.stderr
    assert "hint: relax one of these ranges in [tool.kernels.dependencies]" in result.stderr


def test_an_unservable_target_names_each_version_its_missing_target_and_its_builds(
    hub_env, repos, tmp_path
) -> None:
    extra = f'[tool.kernels]\ntargets = ["{CPU_VARIANT}", "{OLD_TORCH_TARGET}"]\n\n'
    project = write_project(tmp_path / "app", f'"{DROPPED}" = ">=1,<2"', extra=extra)
    result = run_kernels("lock", str(project))
    assert result.returncode == 1
    assert not (project / "kernels.lock").exists()
    commits = repos[DROPPED].commits
    lines = result.stderr.splitlines()
    assert lines[0] == (
        f"error: no version of {DROPPED} allowed by {DROPPED} <2,>=1 (from project) "
        "has a build for every deployment target:"
    )
    assert lines[1:4] == [
        f"  v1.2.0 ({commits['1.2.0'][:12]}): no build for {OLD_TORCH_TARGET}; "
        f"offers {CPU_VARIANT}, {CU130_VARIANT}, {METAL_VARIANT}",
        f"  v1.1.0 ({commits['1.1.0'][:12]}): no build for {OLD_TORCH_TARGET}; "
        f"offers {CPU_VARIANT}, {CU128_TARGET}, {METAL_VARIANT}",
        f"  v1.0.0 ({commits['1.0.0'][:12]}): no build for {OLD_TORCH_TARGET}; "
        f"offers {CPU_VARIANT}, {CU128_TARGET}, {METAL_VARIANT}",
    ]
    assert "[tool.kernels] targets" in lines[-1] and "kernels.lock was not changed" in lines[-1]


def _build(hub_env, prefix: str, catalogue: dict[str, dict[str, list[tuple[str, str]]]]) -> dict[str, str]:
    """Build ``catalogue`` (kernel -> version -> kernel-depends) as repos named
    ``<prefix>-<kernel>``; the repo id of each kernel."""
    names = {kernel: f"kernels-test/{prefix}-{kernel}" for kernel in catalogue}
    for kernel, releases in catalogue.items():
        if names[kernel] not in hub_env.repos:
            hub_env.add_repo(KernelRepo(names[kernel], tuple(
                Release(version, variants=(CPU_VARIANT,), depends=tuple((names[dep], spec) for dep, spec in deps))
                for version, deps in releases.items()
            )))  # fmt: skip
    return names


def _locked_versions(project, names: dict[str, str]) -> dict[str, str | None]:
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    return {kernel: (lock.get(repo_id).version if lock.get(repo_id) else None) for kernel, repo_id in names.items()}


# Four kernels whose kernel-depends make the resolver backtrack: on the way, resolvelib
# pins a 3.0.0, then loses a's requirement on c (c <2) when a stops satisfying c 1.0.0's
# "a <3", and c 2.0.0 later satisfies everyone else. Locking that would put a 3.0.0 beside
# c 2.0.0, a version of c that a 3.0.0 does not accept.
DROPPED_REQUIREMENT = {
    "a": {"1.0.0": [], "2.0.0": [("d", ">=1,<2")], "3.0.0": [("c", ">=1,<2")]},
    "b": {"1.0.0": [], "3.0.0": [("a", ">=1"), ("d", ">=3")]},
    "c": {"1.0.0": [("a", "<3"), ("b", "<3"), ("d", "==2.0.0")], "2.0.0": [("d", ">=3")]},
    "d": {"1.0.0": [("a", "==1.0.0"), ("c", ">=1")], "2.0.0": [("c", ">=2")], "3.0.0": [("c", ">=2")]},
}


def test_every_locked_kernel_accepts_the_versions_locked_for_its_dependencies(hub_env, tmp_path) -> None:
    names = _build(hub_env, "consistent", DROPPED_REQUIREMENT)
    project = write_project(tmp_path / "app", {names[k]: ">=1" for k in ("a", "b", "c")})
    result = run_kernels("lock", str(project))
    assert result.returncode == 0, result.stderr
    # The one answer that meets every kernel-depends and keeps b and c at their newest:
    # a 3.0.0 needs c <2, and c 1.0.0 needs a <3, so a cannot be 3.0.0; a 2.0.0 needs
    # d <2, and d 1.0.0 needs a 1.0.0.
    assert _locked_versions(project, names) == {"a": "v1.0.0", "b": "v3.0.0", "c": "v2.0.0", "d": "v3.0.0"}
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    assert lock.get(names["b"]).dependencies == (names["a"], names["d"])


# b 3.0.0 needs c <2, c 1.0.0 then needs a <2, and a 1.0.0 needs c 2.0.0: a conflict over
# c. The resolver next settles what the conflict is about: c 2.0.0 (which needs b <2), and
# a stays at 3.0.0. Settling the other kernels first would take b 2.0.0, which needs
# a 1.0.0: an older a than needed.
NEWEST_AFTER_A_CONFLICT = {
    "a": {"1.0.0": [("c", "==2.0.0")], "3.0.0": []},
    "b": {"1.0.0": [], "2.0.0": [("a", "==1.0.0")], "3.0.0": [("c", ">=1,<2")]},
    "c": {"1.0.0": [("a", ">=1,<2")], "2.0.0": [("b", ">=1,<2")]},
}


def test_after_a_conflict_the_newest_versions_that_fit_are_kept(hub_env, tmp_path) -> None:
    names = _build(hub_env, "after-conflict", NEWEST_AFTER_A_CONFLICT)
    project = write_project(tmp_path / "app", {repo_id: ">=1" for repo_id in names.values()})
    result = run_kernels("lock", str(project))
    assert result.returncode == 0, result.stderr
    # a 1.0.0 with b 1.0.0 and c 2.0.0 also fits; a 3.0.0 is newer and fits too.
    assert _locked_versions(project, names) == {"a": "v3.0.0", "b": "v1.0.0", "c": "v2.0.0"}


# c (pinned by commit) needs a 1.0.0, which accepts any b. Choosing a before c would take
# a 3.0.0, which needs b <3, pick b 2.0.0 under it, and keep b there once c sends a back
# to 1.0.0: an older b than needed. A kernel the project pins by revision has one possible
# commit, so it is settled first, and its kernel-depends narrow the others before they are chosen.
REVISION_FIRST = {
    "a": {"1.0.0": [("b", ">=1")], "3.0.0": [("b", "<3")]},
    "b": {"1.0.0": [("a", "==1.0.0")], "2.0.0": [("a", "<3")], "3.0.0": []},
    "c": {"3.0.0": [("a", "==1.0.0")]},
}


def test_a_kernel_pinned_by_commit_is_settled_first_and_the_others_get_their_newest_fit(hub_env, tmp_path) -> None:
    names = _build(hub_env, "order-revision", REVISION_FIRST)
    commits = {kernel: hub_env.repos[repo_id].commits for kernel, repo_id in names.items()}
    a, c = names["a"], names["c"]
    commit = commits["c"]["3.0.0"]
    project = write_project(tmp_path / "app", f'"{c}" = {{ revision = "{commit}" }}\n"{a}" = ">=1"')

    result = run_kernels("lock", str(project))

    assert result.returncode == 0, result.stderr
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    assert {k: (lock.get(r).version, lock.get(r).sha) for k, r in names.items()} == {
        "a": ("v1.0.0", commits["a"]["1.0.0"]),
        "b": ("v3.0.0", commits["b"]["3.0.0"]),
        "c": ("v3.0.0", commit),
    }


# Kernels that require each other: while backtracking, resolvelib drops the requirements
# that tied b and d to the project, and building its answer then followed b and d's
# requirements on each other forever (RecursionError). The project needs only a and c.
MUTUAL = {
    "a": {"1.0.0": [], "2.0.0": [("c", "==1.0.0")], "3.0.0": [("d", "==1.0.0")]},
    "b": {"1.0.0": [("d", ">=1")], "2.0.0": [("c", "==2.0.0")], "3.0.0": [("a", "<3"), ("d", ">=3")]},
    "c": {"2.0.0": [("a", ">=1,<2")], "3.0.0": [("a", "==1.0.0")]},
    "d": {"1.0.0": [("b", ">=1")], "3.0.0": [("a", ">=1"), ("b", ">=1,<2")]},
}


def test_kernels_that_require_each_other_lock_only_what_the_project_reaches(hub_env, tmp_path) -> None:
    names = _build(hub_env, "mutual", MUTUAL)
    project = write_project(tmp_path / "app", {names["a"]: ">=1", names["c"]: ">=1"})
    result = run_kernels("lock", str(project))
    assert result.returncode == 0, result.stderr
    assert _locked_versions(project, names) == {"a": "v1.0.0", "b": None, "c": "v3.0.0", "d": None}
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    assert (lock.get(names["a"]).dependencies, lock.get(names["c"]).dependencies) == ((), (names["a"],))


# No set of versions meets these, and resolvelib keeps undoing its own choices instead of
# saying so: it gives up after its rounds, which is one line, not a traceback.
UNSETTLED = {
    "a": {"2.0.0": [("b", "==2.0.0")], "3.0.0": [("b", ">=1,<2")]},
    "b": {"1.0.0": [("a", "==2.0.0")], "2.0.0": [("a", ">=3"), ("c", "==1.0.0")], "3.0.0": []},
    "c": {"1.0.0": [("b", "==2.0.0")], "2.0.0": [("b", ">=3")], "3.0.0": []},
}


def test_a_resolution_that_never_settles_is_one_line_and_no_lock(hub_env, tmp_path) -> None:
    names = _build(hub_env, "unsettled", UNSETTLED)
    project = write_project(tmp_path / "app", {names["a"]: ">=1", names["c"]: ">=1"})
    result = run_kernels("lock", str(project))
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        f"error: no versions found for {names['a']}, {names['c']} and their kernel dependencies within 2000 rounds "
        "of resolution (their kernel-depends keep undoing each other's choices); narrow a version range in "
        "[tool.kernels.dependencies] to help; kernels.lock was not changed\n"
    )
    assert not (project / "kernels.lock").exists()

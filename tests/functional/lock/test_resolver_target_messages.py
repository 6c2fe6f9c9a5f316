"""What `kernels lock` says when `[tool.kernels] targets` decide the versions: the
versions that miss a target with what they offer, a plain conflict told as one, no
held-back note for a version passed over for another reason, and a prior pin the Hub no
longer serves. Real repos on the local Hub, through the in-process command."""

from __future__ import annotations

import json

from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, UNIVERSAL_VARIANT, KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project

OLD_TORCH_TARGET = "torch212-cxx11-cu128-x86_64-linux"
ROCM_TARGET = "torch213-cxx11-rocm71-x86_64-linux"
HINT = (
    "hint: remove the target from [tool.kernels] targets in pyproject.toml, "
    "or allow a version of {repo} that has a build for it; kernels.lock was not changed"
)


def _targets(*names: str) -> str:
    return f"[tool.kernels]\ntargets = {json.dumps(list(names))}\n\n"


def _add(hub_env, repo_id: str, *releases: Release):
    if repo_id in hub_env.repos:
        return hub_env.repos[repo_id]
    return hub_env.add_repo(KernelRepo(repo_id, releases))


def test_an_unservable_target_required_twice_names_both_requirements_and_every_missing_target(
    hub_env, tmp_path
) -> None:
    kernel = "kernels-test/rtm-twice-kernel"
    user = "kernels-test/rtm-twice-user"
    cpu_cuda = (CPU_VARIANT, CUDA_VARIANT)
    built = _add(
        hub_env, kernel,
        *(Release(f"1.{minor}.0", variants=cpu_cuda) for minor in range(4)),
        Release("1.4.0", variants=()),  # a release without any build
        Release("2.0.0", variants=(UNIVERSAL_VARIANT,)),
    )  # fmt: skip
    _add(hub_env, user, Release("1.0.0", variants=(UNIVERSAL_VARIANT,), depends=((kernel, "<2"),)))
    extra = _targets(CPU_VARIANT, OLD_TORCH_TARGET, ROCM_TARGET)
    project = write_project(tmp_path / "app", f'"{kernel}" = ">=1"\n"{user}" = ">=1"', extra=extra)

    result = run_kernels("lock", str(project))

    assert result.returncode == 1
    assert not (project / "kernels.lock").exists()
    commits = built.commits
    offers = f"{CPU_VARIANT}, {CUDA_VARIANT}"
    assert result.stderr.splitlines() == [
        f"error: no version of {kernel} allowed by {kernel} >=1 (from project); {kernel} <2 (from {user} 1.0.0) "
        "has a build for every deployment target:",
        f"  v1.4.0 ({commits['1.4.0'][:12]}): no build for {CPU_VARIANT}, {OLD_TORCH_TARGET}, {ROCM_TARGET}; "
        "offers no builds",
        f"  v1.3.0 ({commits['1.3.0'][:12]}): no build for {OLD_TORCH_TARGET}, {ROCM_TARGET}; offers {offers}",
        f"  v1.2.0 ({commits['1.2.0'][:12]}): no build for {OLD_TORCH_TARGET}, {ROCM_TARGET}; offers {offers}",
        "  ... and 2 older versions in range, none serving every target",
        HINT.format(repo=kernel),
    ]


def test_exactly_three_unservable_versions_are_all_listed_and_nothing_more(hub_env, tmp_path) -> None:
    kernel = "kernels-test/rtm-three"
    built = _add(hub_env, kernel, *(Release(f"1.{minor}.0", variants=(CPU_VARIANT,)) for minor in range(4)))
    project = write_project(tmp_path / "app", f'"{kernel}" = ">=1,<1.3"', extra=_targets(OLD_TORCH_TARGET))

    result = run_kernels("lock", str(project))

    assert result.returncode == 1
    commits = built.commits
    assert result.stderr.splitlines() == [
        f"error: no version of {kernel} allowed by {kernel} <1.3,>=1 (from project) "
        "has a build for every deployment target:",
        *(
            f"  v{v} ({commits[v][:12]}): no build for {OLD_TORCH_TARGET}; offers {CPU_VARIANT}"
            for v in ("1.2.0", "1.1.0", "1.0.0")
        ),
        HINT.format(repo=kernel),
    ]


def test_a_range_no_version_meets_is_a_plain_conflict_even_with_targets(hub_env, tmp_path) -> None:
    kernel = "kernels-test/rtm-plain-conflict"
    _add(hub_env, kernel, Release("1.0.0", variants=(CPU_VARIANT,)))
    project = write_project(tmp_path / "app", f'"{kernel}" = ">=3"', extra=_targets(CPU_VARIANT))

    result = run_kernels("lock", str(project))

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: cannot find versions that satisfy every requirement:",
        f"  {kernel} >=3 (from project)",
        f"  versions of {kernel}: v1.0.0 (branches v1)",
        "hint: relax one of these ranges in [tool.kernels.dependencies]",
    ]


def test_a_missing_target_is_named_when_another_kernel_in_the_conflict_has_no_version_in_range(
    hub_env, tmp_path
) -> None:
    # user 2.0.0 needs a version of "served" (none exists in its range); user 1.0.0 needs
    # "unserved", whose only version lacks a build for the target: the target is the news.
    user = "kernels-test/rtm-mixed-a-user"
    served = "kernels-test/rtm-mixed-b-served"
    unserved = "kernels-test/rtm-mixed-c-unserved"
    _add(hub_env, served, Release("1.0.0", variants=(UNIVERSAL_VARIANT,)))
    built = _add(hub_env, unserved, Release("1.0.0", variants=(CPU_VARIANT,)))
    _add(
        hub_env, user,
        Release("1.0.0", variants=(UNIVERSAL_VARIANT,), depends=((unserved, ">=1"),)),
        Release("2.0.0", variants=(UNIVERSAL_VARIANT,), depends=((served, ">=5"),)),
    )  # fmt: skip
    project = write_project(tmp_path / "app", f'"{user}" = ">=1"', extra=_targets(CPU_VARIANT, OLD_TORCH_TARGET))

    result = run_kernels("lock", str(project))

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"error: no version of {unserved} allowed by {unserved} >=1 (from {user} 1.0.0) "
        "has a build for every deployment target:",
        f"  v1.0.0 ({built.commits['1.0.0'][:12]}): no build for {OLD_TORCH_TARGET}; offers {CPU_VARIANT}",
        HINT.format(repo=unserved),
    ]


def test_a_version_passed_over_for_a_conflict_is_no_held_back_note(hub_env, tmp_path) -> None:
    # kernel 1.2.0 serves the target but needs other 2.0.0, which the project rules out.
    kernel = "kernels-test/rtm-passed-kernel"
    other = "kernels-test/rtm-passed-other"
    built = _add(
        hub_env, kernel,
        Release("1.1.0", variants=(CPU_VARIANT,)),
        Release("1.2.0", variants=(CPU_VARIANT,), depends=((other, "==2.0.0"),)),
    )  # fmt: skip
    _add(hub_env, other, Release("1.0.0", variants=(CPU_VARIANT,)), Release("2.0.0", variants=(CPU_VARIANT,)))
    project = write_project(tmp_path / "app", f'"{kernel}" = ">=1"\n"{other}" = "<2"', extra=_targets(CPU_VARIANT))

    result = run_kernels("lock", str(project))

    assert result.returncode == 0, result.stderr
    assert read_lock(project / "kernels.lock", purpose="use").lock.get(kernel).sha == built.commits["1.1.0"]
    assert "note:" not in result.stdout


def test_a_pinned_commit_gone_from_the_hub_is_a_clear_error_with_targets_too(hub_env, tmp_path) -> None:
    kernel = "kernels-test/rtm-pin-rewritten"
    hub_env.add_repo(KernelRepo(kernel, (Release("1.0.0", variants=(CPU_VARIANT,)),)))
    project = write_project(tmp_path / "app", f'"{kernel}" = ">=1,<2"', extra=_targets(CPU_VARIANT))
    assert run_kernels("lock", str(project)).returncode == 0
    old = read_lock(project / "kernels.lock", purpose="use").lock.get(kernel).sha
    before = (project / "kernels.lock").read_bytes()
    hub_env.add_repo(KernelRepo(kernel, (Release("1.0.0", variants=(CPU_VARIANT,), lfs_size=100),)))  # rewritten

    result = run_kernels("lock", str(project))

    assert result.returncode == 1
    assert result.stderr == (
        f"error: {kernel}: the locked commit {old[:12]} (v1.0.0) is no longer on the Hub (history rewritten?); "
        f"run 'kernels lock --upgrade-package {kernel}' to pin a commit that exists\n"
    )
    assert (project / "kernels.lock").read_bytes() == before


def test_a_version_another_kernel_rules_out_is_no_held_back_note(hub_env, tmp_path) -> None:
    # b 2.0.0 lacks the CUDA build, and c accepts only b <2: b 1.1.0 is what c allows, not
    # a version held back by the target.
    b = "kernels-test/rtm-ruled-b"
    c = "kernels-test/rtm-ruled-c"
    built = _add(
        hub_env, b,
        Release("1.1.0", variants=(CPU_VARIANT, CUDA_VARIANT)),
        Release("2.0.0", variants=(CPU_VARIANT,)),
    )  # fmt: skip
    _add(hub_env, c, Release("1.0.0", variants=(UNIVERSAL_VARIANT,), depends=((b, "<2"),)))
    project = write_project(tmp_path / "app", f'"{b}" = ">=1"\n"{c}" = ">=1"', extra=_targets(CUDA_VARIANT))

    result = run_kernels("lock", str(project))

    assert result.returncode == 0, result.stderr
    assert read_lock(project / "kernels.lock", purpose="use").lock.get(b).sha == built.commits["1.1.0"]
    assert "note:" not in result.stdout

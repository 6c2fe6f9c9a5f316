"""What `kernels verify` reports, field by field as `--json` shows it: the kind, the kernel, the
variant, expected and got, and the facts its sentence names, for the cases a user meets (each
kind's sentence is made from these: tests/unit/lock/test_problem_text.py)."""

from __future__ import annotations

import json
import shutil

from kernel_deps.cache import store as cache
from kernel_deps.commands.download import download_project
from kernel_deps.commands.verify import verify_project
from kernel_deps.core.system import detect_system
from kernel_deps.core.variants import select_variant
from kernel_deps.lock.read import read_lock
from kernel_deps.project.pyproject import read_requirements
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, METAL_VARIANT, KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project

ROTARY = "kernels-test/rotary"


def fields(problem) -> tuple:
    return (problem.kind, problem.repo_id, problem.variant, problem.path, problem.expected, problem.got)


def test_a_repo_deleted_from_the_hub_is_reported_with_its_pin(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/verify-deleted-repo"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"', locked=True)
    shutil.rmtree(built.path)

    (problem,) = verify_project(project, online=True).problems
    assert fields(problem) == ("repo-missing", repo_id, None, None, None, None)
    assert problem.facts["commit"] == built.commits["1.0.0"] and repo_id in problem.facts["detail"]


def test_a_deleted_tag_names_the_locked_commit(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/verify-tag-gone"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    project = write_project(tmp_path / "app", f'"{repo_id}" = "==1.0.0"', locked=True)
    built.git("tag", "-d", "v1.0.0")

    (problem,) = verify_project(project, online=True).problems
    locked = built.commits["1.0.0"]
    assert fields(problem) == ("ref-missing", repo_id, None, None, locked, None)
    assert dict(problem.facts) == {"ref": "v1.0.0"}


def test_a_branch_that_moved_forward_is_a_notice_naming_both_commits(hub_env, tmp_path) -> None:
    from tests.fixtures.builder import commit_release, update_major_branches

    repo_id = "kernels-test/verify-branch-notice"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    project = write_project(tmp_path / "app", f'"{repo_id}" = 1', locked=True)
    commit_release(built, Release("1.1.0"), 1)
    update_major_branches(built)

    report = verify_project(project, online=True)
    assert report.ok
    (notice,) = report.notices
    assert fields(notice) == ("ref-advanced", repo_id, None, None, built.commits["1.0.0"], built.commits["1.1.0"])


def test_this_machines_variant_missing_from_the_cache_is_named(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)
    variant = select_variant(ROTARY, [CUDA_VARIANT, CPU_VARIANT, METAL_VARIANT], detect_system())

    (problem,) = verify_project(project, require_cached=True).problems
    assert fields(problem) == ("not-cached", ROTARY, variant, None, None, None)
    commit = read_lock(project / "kernels.lock", purpose="use").lock.get(ROTARY).sha
    assert dict(problem.facts) == {"folder": str(cache.variant_dir(cache.repo_dir(ROTARY), commit, variant))}


def test_a_lock_without_this_machines_build_lists_what_it_has(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/verify-metal-only"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(METAL_VARIANT, CUDA_VARIANT)),)))
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"', locked=True)

    (problem,) = verify_project(project, require_cached=True).problems
    assert fields(problem) == ("no-variant", repo_id, None, None, None, None)
    assert problem.facts["variants"] == (CUDA_VARIANT, METAL_VARIANT)


def test_a_lock_written_by_kernels_016_is_judged_as_far_as_it_can_show(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)
    lock = project / "kernels.lock"
    entries = [{k: v for k, v in e.items() if k in ("repo_id", "sha", "variants")} for e in json.loads(lock.read_text())]
    lock.write_text(json.dumps(entries, indent=2) + "\n")

    report = verify_project(project)
    # Its pin records no version, so it cannot show that it meets the range: a problem, with the fix.
    (problem,) = report.problems
    (asked,) = read_requirements(project)  # the range as pyproject.toml states it, parsed
    assert fields(problem) == ("version-not-recorded", ROTARY, None, None, asked.text, f"commit {entries[0]['sha'][:12]}")
    assert dict(problem.facts) == {"written_by": report.notices[0].facts["written_by"]}
    (notice,) = report.notices
    assert fields(notice) == ("foreign-lock", None, None, None, None, None)
    assert notice.facts["lock"] == str(lock)


def test_all_targets_without_declared_targets_names_pyproject(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)
    result = run_kernels("verify", "--all-targets", str(project))
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: --all-targets: {project / 'pyproject.toml'} declares no targets; ")


def test_a_failing_tree_listing_after_the_refs_answered_is_a_hub_error(hub_env, proxy, tmp_path) -> None:
    from kernel_deps.hub.client import HubClient

    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)
    proxy.only_paths = "/tree/"
    proxy.error_rate = 1.0
    report = verify_project(project, online=True, hub=HubClient(endpoint=proxy.url, retries=1, backoff=0.01))
    (problem,) = report.problems
    assert fields(problem) == ("hub-error", ROTARY, None, None, None, None)
    assert list(problem.facts) == ["detail"] and ROTARY in problem.facts["detail"]  # the Hub error, naming the kernel


def test_a_target_build_missing_from_the_cache_names_the_build_and_target(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)
    (problem,) = verify_project(project, targets=[CUDA_VARIANT]).problems
    assert fields(problem) == ("target-not-cached", ROTARY, CUDA_VARIANT, None, CUDA_VARIANT, None)
    assert problem.facts["folder"].endswith(CUDA_VARIANT)


def test_a_target_the_lock_has_no_build_for_lists_what_it_has(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/verify-target-unserved"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(METAL_VARIANT, CUDA_VARIANT)),)))
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"', locked=True)
    (problem,) = verify_project(project, targets=[CPU_VARIANT]).problems
    assert fields(problem) == ("no-variant", repo_id, None, None, CPU_VARIANT, None)
    assert dict(problem.facts) == {"variants": (CUDA_VARIANT, METAL_VARIANT)}


def test_a_cache_root_given_to_verify_is_where_every_check_looks(hub_env, tmp_path, monkeypatch) -> None:
    """verify_project(cache_root=...) checks that cache alone: what is in it, what it lacks
    and the folders the messages name; the default cache (empty here) plays no part."""
    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("KERNELS_CACHE", str(elsewhere))
    download_project(project)
    monkeypatch.delenv("KERNELS_CACHE")
    entry = read_lock(project / "kernels.lock", purpose="use").lock.get(ROTARY)
    build = cache.variant_dir(cache.repo_dir(ROTARY, root=elsewhere), entry.sha, CPU_VARIANT).parent
    stray = build / "torch-stray"
    stray.mkdir()
    (stray / "__init__.py").write_text("")

    (problem,) = verify_project(project, require_cached=True, cache_root=elsewhere).problems
    assert fields(problem) == ("unlocked-variant", ROTARY, "torch-stray", None, None, None)
    assert problem.facts["folder"] == str(stray)

    empty = tmp_path / "empty-cache"
    variant = select_variant(ROTARY, entry.variants, detect_system())
    (problem,) = verify_project(project, require_cached=True, cache_root=empty).problems
    assert fields(problem) == ("not-cached", ROTARY, variant, None, None, None)
    folder = cache.variant_dir(cache.repo_dir(ROTARY, root=empty), entry.sha, variant)
    assert dict(problem.facts) == {"folder": str(folder)}


def test_a_lock_entry_without_variants_says_it_locked_none(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)
    lock = project / "kernels.lock"
    entries = json.loads(lock.read_text())
    entries[0]["variants"] = {}
    lock.write_text(json.dumps(entries, indent=2) + "\n")

    (machine,) = verify_project(project, require_cached=True).problems
    assert fields(machine) == ("no-variant", ROTARY, None, None, None, None)
    assert machine.facts["variants"] == ()
    (target,) = verify_project(project, targets=[CPU_VARIANT]).problems
    assert (fields(target), dict(target.facts)) == (("no-variant", ROTARY, None, None, CPU_VARIANT, None), {"variants": ()})

"""Deployment targets on the local Hub: `[tool.kernels] targets` steer locking, downloads
and checks, with sample kernels whose newer release dropped a CUDA build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.commands.lock import lock_project
from kernel_deps.lock.read import read_lock
from kernel_deps.cli.render_lock import note_line
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, METAL_VARIANT, UNIVERSAL_VARIANT, KernelRepo, Release
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.projects import write_project


CU130_VARIANT = "torch213-cxx11-cu130-x86_64-linux"
OLD_TORCH_TARGET = "torch212-cxx11-cu128-x86_64-linux"
# v1.0.0 and v1.1.0 build for CUDA 12.8; v1.2.0 dropped it for CUDA 13.0.
DROPPED = "kernels-test/targets-dropped-cuda"
# A universal kernel that needs DROPPED: targets reach transitive kernels too.
USES_DROPPED = "kernels-test/targets-uses-dropped"
UNIVERSAL = "kernels-test/norm-universal"


def kernels(*args: str, **env: str) -> CliResult:
    return run_kernels(*args, env=env)


@pytest.fixture(scope="module")
def target_repos(local_hub):
    """The sample kernels of this module, built into the session's Hub once."""
    if DROPPED not in local_hub.repos:
        local_hub.add_repo(KernelRepo(DROPPED, (
            Release("1.0.0"),
            Release("1.1.0"),
            Release("1.2.0", variants=(CU130_VARIANT, CPU_VARIANT, METAL_VARIANT)),
        )))  # fmt: skip
        local_hub.add_repo(
            KernelRepo(USES_DROPPED, (Release("1.0.0", variants=(UNIVERSAL_VARIANT,), depends=((DROPPED, ">=1,<2"),)),))
        )
    return local_hub.repos


def project_with_targets(folder: Path, deps: str, targets: list[str] | None) -> Path:
    extra = "" if targets is None else f"[tool.kernels]\ntargets = {json.dumps(targets)}\n\n"
    return write_project(folder, deps, extra=extra)


def test_a_target_holds_a_kernel_at_the_newest_release_that_serves_it(hub_env, target_repos, tmp_path) -> None:
    free = project_with_targets(tmp_path / "free", f'"{DROPPED}" = ">=1,<2"', None)
    assert lock_project(free).lock.get(DROPPED).version == "v1.2.0"

    project = project_with_targets(tmp_path / "app", f'"{DROPPED}" = ">=1,<2"', [CUDA_VARIANT, CPU_VARIANT])
    result = kernels("lock", str(project))
    assert result.returncode == 0, result.stderr
    entry = read_lock(project / "kernels.lock", purpose="use").lock.get(DROPPED)
    assert (entry.version, entry.sha) == ("v1.1.0", target_repos[DROPPED].commits["1.1.0"])
    assert f"note: {DROPPED} v1.1.0 (v1.2.0 has no build for {CUDA_VARIANT})" in result.stdout

    # Relocking keeps the pin and has nothing to explain.
    again = kernels("lock", str(project))
    assert again.returncode == 0 and "note:" not in again.stdout
    assert "kernels.lock is up to date" in again.stdout


def test_targets_hold_back_a_transitive_kernel_too(hub_env, target_repos, tmp_path) -> None:
    project = project_with_targets(tmp_path / "app", f'"{USES_DROPPED}" = ">=1"', [CUDA_VARIANT])
    outcome = lock_project(project)
    assert outcome.lock.get(DROPPED).version == "v1.1.0"
    assert outcome.lock.get(DROPPED).requirement is None  # only a dependency
    assert [note_line(n) for n in outcome.notes] == [f"{DROPPED} v1.1.0 (v1.2.0 has no build for {CUDA_VARIANT})"]


def test_an_unservable_target_fails_with_exit_1_and_writes_no_lock(hub_env, target_repos, tmp_path) -> None:
    project = project_with_targets(tmp_path / "app", f'"{DROPPED}" = ">=1,<2"', [CPU_VARIANT, OLD_TORCH_TARGET])
    result = kernels("lock", str(project))
    assert result.returncode == 1
    assert not (project / "kernels.lock").exists()
    error = result.stderr
    assert error.startswith(f"error: no version of {DROPPED} allowed by {DROPPED} <2,>=1 (from project)")
    assert f"v1.2.0 ({target_repos[DROPPED].commits['1.2.0'][:12]}): no build for {OLD_TORCH_TARGET}; offers " in error
    assert f"offers {CPU_VARIANT}, {CU130_VARIANT}, {METAL_VARIANT}" in error
    assert "v1.1.0" in error and "v1.0.0" in error
    assert "[tool.kernels] targets" in error


def test_an_unservable_transitive_target_leaves_the_prior_lock_alone(hub_env, target_repos, tmp_path) -> None:
    project = project_with_targets(tmp_path / "app", f'"{USES_DROPPED}" = ">=1"', [CPU_VARIANT])
    lock_project(project)
    before = (project / "kernels.lock").read_bytes()
    project_with_targets(project, f'"{USES_DROPPED}" = ">=1"', [CPU_VARIANT, OLD_TORCH_TARGET])
    result = kernels("lock", "--upgrade", str(project))
    assert result.returncode == 1
    assert f"no version of {DROPPED}" in result.stderr and OLD_TORCH_TARGET in result.stderr
    assert (project / "kernels.lock").read_bytes() == before


def test_torch_universal_serves_any_target(hub_env, target_repos, tmp_path) -> None:
    targets = [CU130_VARIANT, "torch213-cxx11-rocm71-x86_64-linux", "torch213-metal-aarch64-darwin", OLD_TORCH_TARGET]
    project = project_with_targets(tmp_path / "app", f'"{UNIVERSAL}" = ">=1"', targets)
    outcome = lock_project(project)
    assert outcome.lock.get(UNIVERSAL).version == "v1.1" and outcome.notes == []
    tree = json.loads(kernels("tree", str(project), "--json").stdout)
    (node,) = tree["kernels"]
    assert [t["name"] for t in tree["targets"]] == targets
    assert {t["name"]: t["variants"][UNIVERSAL] for t in tree["targets"]} == dict.fromkeys(targets, UNIVERSAL_VARIANT)


def test_download_target_fetches_and_verifies_exactly_that_cuda_build(hub_env, target_repos, tmp_path) -> None:
    project = project_with_targets(tmp_path / "app", f'"{DROPPED}" = ">=1,<2"', [CUDA_VARIANT, CPU_VARIANT])
    lock_project(project)
    entry = read_lock(project / "kernels.lock", purpose="use").lock.get(DROPPED)

    result = kernels("download", str(project), "--target", CUDA_VARIANT)
    assert result.returncode == 0, result.stderr
    assert f"{DROPPED} {CUDA_VARIANT}: downloaded" in result.stdout
    build = cache.find_repo_dir(DROPPED) / "snapshots" / entry.sha / "build"
    assert {p.name for p in build.iterdir()} == {CUDA_VARIANT}  # this CPU machine's build was not fetched
    check = cache.check_variant(DROPPED, entry.sha, CUDA_VARIANT, entry.variants[CUDA_VARIANT].hash)
    assert check.ok, check.problems

    verified = kernels("verify", str(project), "--require-cached", "--target", CUDA_VARIANT, HF_HUB_OFFLINE="1")
    assert verified.returncode == 1  # this machine's (CPU) build is still absent
    assert f"{DROPPED} {CPU_VARIANT}: this machine's variant is not in the cache" in verified.stdout
    assert "for the target" not in verified.stdout  # the CUDA build is there and verified
    assert kernels("verify", str(project), "--target", CUDA_VARIANT, HF_HUB_OFFLINE="1").returncode == 0
    missing = kernels("verify", str(project), "--all-targets", HF_HUB_OFFLINE="1")
    assert missing.returncode == 1
    assert f"the variant for the target {CPU_VARIANT} is not in the cache" in missing.stdout

    everything = kernels("download", str(project), "--all-targets")
    assert everything.returncode == 0, everything.stderr
    assert {p.name for p in build.iterdir()} == {CUDA_VARIANT, CPU_VARIANT}
    assert kernels("verify", str(project), "--all-targets", "--require-cached", HF_HUB_OFFLINE="1").returncode == 0


def test_download_of_a_target_the_lock_does_not_serve_is_exit_1(hub_env, target_repos, tmp_path) -> None:
    project = project_with_targets(tmp_path / "app", f'"{DROPPED}" = ">=1,<2"', None)
    lock_project(project)  # v1.2.0: no CUDA 12.8 build; the lock keeps the metadata.json it read
    repo = cache.find_repo_dir(DROPPED)
    before = sorted(p.relative_to(repo) for p in repo.rglob("*"))
    result = kernels("download", str(project), "--target", CUDA_VARIANT)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: --target {CUDA_VARIANT}: {DROPPED} v1.2.0 has no build for it")
    assert sorted(p.relative_to(repo) for p in repo.rglob("*")) == before  # nothing fetched
    assert not (repo / "snapshots").exists()


@pytest.mark.parametrize(
    ("targets", "message"),
    [
        ('["torch213-cxx11-cu128"]', 'targets[0] = "torch213-cxx11-cu128": not a build variant name'),
        (f'["{CPU_VARIANT}", "torch-universal"]', 'targets[1] = "torch-universal": names no single machine'),
        ('["torch-stable-abi29-cu128-x86_64-linux"]', "names no single machine"),
        (f'"{CPU_VARIANT}"', "expected a list of build names"),
        (f'["{CPU_VARIANT}", 3]', "targets[1] = 3: expected a string"),
        (f'["{CPU_VARIANT}", "{CPU_VARIANT}"]', "listed twice"),
        ('["torch213-cxx11-metal-aarch64-darwin"]', "C++ ABI tag"),
    ],
)
def test_a_bad_target_is_exit_2_naming_the_line_and_nothing_is_written(
    hub_env, target_repos, tmp_path, targets, message
) -> None:
    project = write_project(tmp_path / "app", f'"{DROPPED}" = ">=1,<2"', extra=f"[tool.kernels]\ntargets = {targets}\n\n")
    for command in (("lock",), ("lock", "--check"), ("verify",)):
        result = kernels(*command, str(project))
        assert result.returncode == 2, (command, result.stderr)
        first, *rest = result.stderr.splitlines()
        assert not rest
        assert first.startswith(f"error: {project / 'pyproject.toml'}:6: tool.kernels.targets"), first
        assert message in first
    assert not (project / "kernels.lock").exists()


def test_a_bad_target_option_is_exit_2(hub_env, target_repos, tmp_path) -> None:
    project = project_with_targets(tmp_path / "app", f'"{UNIVERSAL}" = ">=1"', None)
    lock_project(project)
    bad = kernels("download", str(project), "--target", "cuda")
    assert bad.returncode == 2 and "--target cuda: not a build variant name" in bad.stderr
    none = kernels("download", str(project), "--all-targets")
    assert none.returncode == 2 and "declares no targets" in none.stderr


def test_check_and_verify_report_a_target_added_since_the_lock_was_made(hub_env, target_repos, tmp_path) -> None:
    project = project_with_targets(tmp_path / "app", f'"{DROPPED}" = ">=1,<2"', [CPU_VARIANT])
    lock_project(project)  # v1.2.0
    before = (project / "kernels.lock").read_bytes()

    # A target the locked commit serves changes nothing: --check stays green, offline.
    project_with_targets(project, f'"{DROPPED}" = ">=1,<2"', [CPU_VARIANT, CU130_VARIANT])
    ok = kernels("lock", "--check", str(project), HF_HUB_OFFLINE="1")
    assert (ok.returncode, ok.stderr) == (0, "")
    assert kernels("verify", str(project), HF_HUB_OFFLINE="1").returncode == 0

    project_with_targets(project, f'"{DROPPED}" = ">=1,<2"', [CPU_VARIANT, CUDA_VARIANT])
    check = kernels("lock", "--check", str(project))
    assert check.returncode == 1
    assert f"{DROPPED} v1.2.0 (" in check.stderr
    assert f"kernels.lock has no build for the target {CUDA_VARIANT}" in check.stderr
    assert f"~ {DROPPED} v1.2.0" in check.stderr and "-> v1.1.0" in check.stderr
    assert (project / "kernels.lock").read_bytes() == before

    verify = kernels("verify", str(project), "--json", HF_HUB_OFFLINE="1")
    assert verify.returncode == 1
    (problem,) = json.loads(verify.stdout)["problems"]
    assert (problem["kind"], problem["repo_id"], problem["expected"]) == ("target-not-served", DROPPED, CUDA_VARIANT)

    relocked = kernels("lock", str(project))
    assert relocked.returncode == 0 and read_lock(project / "kernels.lock", purpose="use").lock.get(DROPPED).version == "v1.1.0"
    assert kernels("verify", str(project), HF_HUB_OFFLINE="1").returncode == 0


def test_build_folders_with_names_kernel_deps_cannot_parse_are_listed_as_skipped(hub_env, target_repos, tmp_path) -> None:
    repo_id = "kernels-test/targets-odd-folder"
    odd = "torch213-cxx11-hpu10-x86_64-linux"
    files = (("__init__.py", b"", False), ("metadata.json", b"{}\n", False))
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CPU_VARIANT,), custom_variants=((odd, files),)),)))
    project = project_with_targets(tmp_path / "app", f'"{repo_id}" = ">=1"', [CPU_VARIANT])
    result = kernels("lock", str(project))
    assert result.returncode == 0, result.stderr
    assert f"note: {repo_id} v1.0.0 (" in result.stdout and f"skipped build/{odd}" in result.stdout
    assert set(read_lock(project / "kernels.lock", purpose="use").lock.get(repo_id).variants) == {CPU_VARIANT}


def test_outdated_offers_only_an_upgrade_that_serves_every_target(hub_env, target_repos, tmp_path) -> None:
    from kernel_deps.commands.outdated import outdated_project

    project = project_with_targets(tmp_path / "app", f'"{DROPPED}" = ">=1.0.0,<1.1"', [CUDA_VARIANT])
    lock_project(project)  # v1.0.0
    project_with_targets(project, f'"{DROPPED}" = ">=1,<2"', [CUDA_VARIANT])
    (drift,) = outdated_project(project).kernels
    assert (drift.locked_version, drift.upgrade_version) == ("v1.0.0", "v1.1.0")  # not v1.2.0: no CUDA 12.8 build


def test_a_wheel_build_refuses_a_lock_that_does_not_serve_a_declared_target(hub_env, target_repos, tmp_path, monkeypatch) -> None:
    from kernel_deps.build_hooks import ALLOW_STALE_ENV, StaleLockError, lock_for_build

    monkeypatch.delenv(ALLOW_STALE_ENV, raising=False)
    project = project_with_targets(tmp_path / "app", f'"{DROPPED}" = ">=1,<2"', [CPU_VARIANT])
    lock_project(project)  # v1.2.0
    assert lock_for_build(project).text is not None
    project_with_targets(project, f'"{DROPPED}" = ">=1,<2"', [CPU_VARIANT, CUDA_VARIANT])
    with pytest.raises(StaleLockError) as caught:
        lock_for_build(project)
    (problem,) = caught.value.problems
    assert f"no build for the target {CUDA_VARIANT}" in problem


def test_add_without_a_range_starts_from_the_newest_release_that_serves_every_target(hub_env, target_repos, tmp_path) -> None:
    project = project_with_targets(tmp_path / "app", f'"{UNIVERSAL}" = ">=1"', [CUDA_VARIANT])
    result = kernels("add", DROPPED, str(project))
    assert result.returncode == 0, result.stderr
    assert f'Added {DROPPED} = ">=1.1.0,<2"' in result.stdout
    assert read_lock(project / "kernels.lock", purpose="use").lock.get(DROPPED).version == "v1.1.0"

    unservable = project_with_targets(tmp_path / "other", f'"{UNIVERSAL}" = ">=1"', [OLD_TORCH_TARGET])
    before = (unservable / "pyproject.toml").read_bytes()
    refused = kernels("add", DROPPED, str(unservable))
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"error: {DROPPED}: no version has a build for every target")
    assert OLD_TORCH_TARGET in refused.stderr
    assert (unservable / "pyproject.toml").read_bytes() == before and not (unservable / "kernels.lock").exists()

"""How many Hub requests `kernels lock` makes with `[tool.kernels] targets` declared,
counted by the proxy: the background prefetch guesses the commit the resolver will take
(the newest that serves every target) and lists nothing the resolver would not list."""

from __future__ import annotations

from kernel_deps.commands.lock import lock_project
from kernel_deps.hub.client import HubClient
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, KernelRepo, Release
from tests.fixtures.faultproxy import by_kind
from tests.fixtures.projects import write_project


def test_with_targets_a_lock_lists_only_the_commit_it_takes(hub_env, proxy, tmp_path) -> None:
    repo_id = "kernels-test/rq-targets-all-serve"
    built = hub_env.add_repo(KernelRepo(repo_id, (
        Release("1.0.0", variants=(CPU_VARIANT,)),
        Release("1.1.0", variants=(CPU_VARIANT,)),
    )))  # fmt: skip
    extra = f'[tool.kernels]\ntargets = ["{CPU_VARIANT}"]\n\n'
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"', extra=extra)

    lock = lock_project(project, hub=HubClient(endpoint=proxy.url)).lock

    assert lock.get(repo_id).sha == built.commits["1.1.0"]
    # The newest serves the target: 1.0.0's tree is never listed.
    assert by_kind(proxy) == {"refs": 1, "tree": 1, "slash": 0, "file": 1, "other": 0}


def test_with_targets_a_lock_reads_no_metadata_of_a_version_it_passes_over(hub_env, proxy, tmp_path) -> None:
    repo_id = "kernels-test/rq-targets-newest-dropped"
    built = hub_env.add_repo(KernelRepo(repo_id, (
        Release("1.0.0", variants=(CPU_VARIANT, CUDA_VARIANT)),
        Release("1.1.0", variants=(CPU_VARIANT,)),  # dropped the CUDA build
    )))  # fmt: skip
    extra = f'[tool.kernels]\ntargets = ["{CUDA_VARIANT}"]\n\n'
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"', extra=extra)

    lock = lock_project(project, hub=HubClient(endpoint=proxy.url)).lock

    assert lock.get(repo_id).sha == built.commits["1.0.0"]
    # Both trees are listed (1.1.0 to see it lacks the target), and only 1.0.0's two
    # metadata.json files are read.
    assert by_kind(proxy) == {"refs": 1, "tree": 2, "slash": 0, "file": 2, "other": 0}

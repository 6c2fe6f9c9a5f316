"""Which kernel `kernels lock` settles first, seen in the versions it locks: a kernel the
project pins by revision has one possible commit, and its kernel-depends narrow the
others before they are chosen, so they get the newest versions that fit. Real repos on
the local Hub, through the in-process command."""

from __future__ import annotations

from kernel_deps.lockread import read_lock
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project


def _build(hub_env, prefix: str, catalogue: dict[str, dict[str, list[tuple[str, str]]]]) -> dict[str, object]:
    """Build ``catalogue`` (kernel -> version -> kernel-depends) as repos named
    ``kernels-test/<prefix>-<kernel>``; the built repo of each kernel."""
    names = {kernel: f"kernels-test/{prefix}-{kernel}" for kernel in catalogue}
    built = {}
    for kernel, releases in catalogue.items():
        built[kernel] = hub_env.repos.get(names[kernel]) or hub_env.add_repo(KernelRepo(names[kernel], tuple(
            Release(version, variants=(CPU_VARIANT,), depends=tuple((names[dep], spec) for dep, spec in deps))
            for version, deps in releases.items()
        )))  # fmt: skip
    return built


# c (pinned by commit) needs a 1.0.0, which accepts any b. Choosing a before c would take
# a 3.0.0, which needs b <3, pick b 2.0.0 under it, and keep b there once c sends a back
# to 1.0.0: an older b than needed.
REVISION_FIRST = {
    "a": {"1.0.0": [("b", ">=1")], "3.0.0": [("b", "<3")]},
    "b": {"1.0.0": [("a", "==1.0.0")], "2.0.0": [("a", "<3")], "3.0.0": []},
    "c": {"3.0.0": [("a", "==1.0.0")]},
}


def test_a_kernel_pinned_by_commit_is_settled_first_and_the_others_get_their_newest_fit(hub_env, tmp_path) -> None:
    built = _build(hub_env, "order-revision", REVISION_FIRST)
    a, b, c = (built[k].spec.repo_id for k in "abc")
    commit = built["c"].commits["3.0.0"]
    project = write_project(tmp_path / "app", f'"{c}" = {{ revision = "{commit}" }}\n"{a}" = ">=1"')

    result = run_kernels("lock", str(project))

    assert result.returncode == 0, result.stderr
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    assert {k: (lock.get(r).version, lock.get(r).sha) for k, r in (("a", a), ("b", b), ("c", c))} == {
        "a": ("v1.0.0", built["a"].commits["1.0.0"]),
        "b": ("v3.0.0", built["b"].commits["3.0.0"]),
        "c": ("v3.0.0", commit),
    }

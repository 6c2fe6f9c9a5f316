"""`kernels verify` against the local Hub and a real cache: pyproject, lock, cache and Hub agree."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.commands.lock import lock_project
from kernel_deps.checks.cache import check_cache
from kernel_deps.commands.verify import CACHE_KINDS, HUB_KINDS, SYNC_KINDS, verify_project
from kernel_deps.lock.freshness import Problem
from kernel_deps.lock.freshness import check_sync
from kernel_deps.core.errors import LockfileError, PyprojectError, UsageError
from kernel_deps.core.hashing import is_hashed_path
from kernel_deps.core.variants import system_for_variant
from kernel_deps.hub.client import HubClient
from kernel_deps.lock.model import Lockfile
from kernel_deps.project.pyproject import read_requirements
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, KernelRepo, Release, git_blob_id
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.projects import write_project

ACTIVATION = "kernels-test/activation"
ROTARY = "kernels-test/rotary"


def set_deps(project: Path, deps: str) -> None:
    text = (project / "pyproject.toml").read_text()
    head = text.split("[tool.kernels.dependencies]")[0]
    (project / "pyproject.toml").write_text(f"{head}[tool.kernels.dependencies]\n{deps}\n")


def run_cli(*args: str, env_extra: dict | None = None) -> CliResult:
    return run_kernels(*args, env=env_extra)


def cache_variant(hub_env, repo_id: str, variant: str, *, version: str | None = None, commit: str | None = None) -> Path:
    """Put one variant into the HF cache from the builder's files, as ``kernels download`` does.

    Like the download, it places only the files the variant hash covers (no ``*.pyc``).
    """
    built = hub_env.repos[repo_id]
    version = version or next(v for v, sha in built.commits.items() if sha == commit)
    repo = cache.repo_dir(repo_id)
    prefix = f"build/{variant}/"
    files: dict[str, str] = {}
    for path, content in built.files[version].items():
        if path.startswith(prefix) and is_hashed_path(path[len(prefix):]):
            name = content.lfs_sha256 or git_blob_id(content.data)
            blob = repo / "blobs" / name
            blob.parent.mkdir(parents=True, exist_ok=True)
            blob.write_bytes(content.data)
            files[path[len(prefix):]] = name
    assert files, f"{repo_id} {version} has no variant {variant}"
    return cache.place_variant(repo, commit or built.commits[version], variant, files)


def locked_project(hub_env, tmp_path: Path, deps: str, *, cached: tuple[str, ...] = ()) -> tuple[Path, Lockfile]:
    """A locked project; the named kernels' CPU variants placed in the cache."""
    project = write_project(tmp_path / "app", deps)
    lock = lock_project(project).lock
    for repo_id in cached:
        cache_variant(hub_env, repo_id, CPU_VARIANT, commit=lock.get(repo_id).sha)
    return project, lock


def kinds(problems: list[Problem]) -> list[tuple[str, str | None]]:
    return [(p.kind, p.repo_id) for p in problems]


def json_problems(*args: str) -> tuple[int, list[tuple]]:
    """``kernels verify --json ARGS``: its exit code, and each problem of the document as
    (kind, repo_id, variant, path, expected, got)."""
    result = run_cli("verify", "--json", *args)
    assert "Traceback" not in result.stderr, result.stderr
    fields = ("kind", "repo_id", "variant", "path", "expected", "got")
    return result.returncode, [tuple(p[f] for f in fields) for p in json.loads(result.stdout)["problems"]]


# -- all good -------------------------------------------------------------------------


def test_everything_agrees_cli_exit_0(hub_env, tmp_path) -> None:
    project, _ = locked_project(
        hub_env, tmp_path, f'"{ACTIVATION}" = ">=1,<2"\n"kernels-test/flash" = 1', cached=(ACTIVATION, "kernels-test/flash")
    )
    result = run_cli("verify", str(project))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == (
        "kernels.lock, pyproject.toml and the cache agree (2 kernels, 2 cached variants verified)"
    )
    required = run_cli("verify", "--require-cached", str(project))
    assert required.returncode == 0, required.stdout + required.stderr


def test_empty_cache_is_fine_without_require_cached(hub_env, tmp_path) -> None:
    project, _ = locked_project(hub_env, tmp_path, '"kernels-test/layer-norm" = ">=0.2"')
    report = verify_project(project)
    assert report.ok and report.kernels == 2 and report.checked == []


@pytest.mark.parametrize(
    "value",
    ['">=1.0,<2"', '"~=1.1.0"', '"1.0.0"', "1", '{ version = ">=1,<2" }', '{ revision = "v1.0.0" }', '{ revision = "v1" }'],
)
def test_fresh_lock_is_in_sync_for_every_requirement_form(hub_env, tmp_path, value) -> None:
    deps = f'"{ACTIVATION}" = {value}\n"kernels-test/layer-norm" = ">=0.1"\n"kernels-test/flash" = 2'
    project = write_project(tmp_path / "app", deps)
    assert check_sync(read_requirements(project), lock_project(project).lock) == []


@pytest.mark.parametrize(
    "value", ['">=1.3.0rc1,<2"', '{ revision = "v2" }', '{ revision = "main" }', '">=0.1"', '"2.0.0"', "2"]
)
def test_fresh_lock_is_in_sync_alone(hub_env, tmp_path, value) -> None:
    project = write_project(tmp_path / "app", f'"{ACTIVATION}" = {value}\n"kernels-test/legacy-gelu" = ">=0.1"')
    assert check_sync(read_requirements(project), lock_project(project).lock) == []


def test_commit_pin_is_in_sync(hub_env, tmp_path) -> None:
    commit = hub_env.repos[ROTARY].commits["1.0.0"]
    project = write_project(tmp_path / "app", f'"{ROTARY}" = {{ revision = "{commit}" }}')
    assert check_sync(read_requirements(project), lock_project(project).lock) == []


# -- (c) cache ------------------------------------------------------------------------


def test_one_changed_byte_is_named_with_expected_and_got(hub_env, tmp_path) -> None:
    project, _ = locked_project(hub_env, tmp_path, f'"{ACTIVATION}" = "==1.2.0"', cached=(ACTIVATION,))
    target = cache.variant_dir(cache.repo_dir(ACTIVATION), hub_env.repos[ACTIVATION].commits["1.2.0"], CPU_VARIANT)
    target = target / "layers" / "__init__.py"
    original = target.read_bytes()
    changed = original[:-2] + b"X" + original[-1:]
    target.write_bytes(changed)  # through the symlink: the blob itself changes, as a careless edit would

    result = run_cli("verify", str(project))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"{ACTIVATION} {CPU_VARIANT}: layers/__init__.py was modified",
        f"    Expected: {git_blob_id(original)}",
        f"    Got:      {git_blob_id(changed)}",
        "1 problem found",
        "hint: the cache differs from kernels.lock; run 'kernels download' to replace what differs",
    ]


def test_changed_lfs_file_is_named_with_sha256(hub_env, tmp_path) -> None:
    project, lock = locked_project(hub_env, tmp_path, f'"{ACTIVATION}" = "==1.2.0"', cached=(ACTIVATION,))
    folder = cache.variant_dir(cache.repo_dir(ACTIVATION), lock.get(ACTIVATION).sha, CPU_VARIANT)
    so = next(folder.glob("*.so"))
    content = hub_env.repos[ACTIVATION].files["1.2.0"][f"build/{CPU_VARIANT}/{so.name}"]
    so.write_bytes(content.data[:-1] + bytes([content.data[-1] ^ 1]))
    (problem,) = verify_project(project).problems
    assert (problem.kind, problem.path, problem.expected) == ("modified", so.name, content.lfs_sha256)
    assert problem.got is not None and len(problem.got) == 64 and problem.got != problem.expected


def test_deleted_added_and_modified_files_are_all_reported(hub_env, tmp_path) -> None:
    project, lock = locked_project(
        hub_env, tmp_path, f'"{ACTIVATION}" = ">=1,<2"\n"{ROTARY}" = ">=1,<2"', cached=(ACTIVATION, ROTARY)
    )
    activation = cache.variant_dir(cache.repo_dir(ACTIVATION), lock.get(ACTIVATION).sha, CPU_VARIANT)
    rotary = cache.variant_dir(cache.repo_dir(ROTARY), lock.get(ROTARY).sha, CPU_VARIANT)
    (activation / "_ops.py").unlink()
    (activation / "layers" / "evil.py").write_text("import os\n")
    (rotary / "metadata.json").write_bytes((rotary / "metadata.json").read_bytes() + b" ")

    report = verify_project(project)
    found = [(p.kind, p.repo_id, p.variant, p.path) for p in report.problems]
    assert found == [
        ("missing", ACTIVATION, CPU_VARIANT, "_ops.py"),
        ("extra", ACTIVATION, CPU_VARIANT, "layers/evil.py"),
        ("modified", ROTARY, CPU_VARIANT, "metadata.json"),
    ]
    assert report.verified == []

    ops = hub_env.repos[ACTIVATION].files["1.2.0"][f"build/{CPU_VARIANT}/_ops.py"].data
    metadata = hub_env.repos[ROTARY].files["1.1.0"][f"build/{CPU_VARIANT}/metadata.json"].data
    changed = (rotary / "metadata.json").read_bytes()
    assert json_problems(str(project)) == (1, [
        ("missing", ACTIVATION, CPU_VARIANT, "_ops.py", git_blob_id(ops), None),
        ("extra", ACTIVATION, CPU_VARIANT, "layers/evil.py", None, git_blob_id(b"import os" + bytes([10]))),
        ("modified", ROTARY, CPU_VARIANT, "metadata.json", git_blob_id(metadata), git_blob_id(changed)),
    ])  # fmt: skip


def plain_file_hashes(folder: Path) -> dict[str, str]:
    """Every hashed file of a variant folder, hashed with hashlib alone.

    A link into ``blobs/`` is hashed by the algorithm of the blob's name (64 hex digits:
    SHA-256, else git's blob SHA-1); a plain file by git's blob SHA-1.
    """
    found = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if not path.is_file() or not is_hashed_path(rel):
            continue
        data = path.read_bytes()
        if path.is_symlink() and len(Path(os.readlink(path)).name) == 64:
            found[rel] = hashlib.sha256(data).hexdigest()
        else:
            found[rel] = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return found


def test_parallel_hashing_gives_what_serial_hashing_gives(hub_env, tmp_path, monkeypatch) -> None:
    project, lock = locked_project(
        hub_env, tmp_path, f'"{ACTIVATION}" = ">=1,<2"\n"{ROTARY}" = ">=1,<2"', cached=(ACTIVATION, ROTARY)
    )
    for repo_id in (ACTIVATION, ROTARY):
        cache_variant(hub_env, repo_id, CUDA_VARIANT, commit=lock.get(repo_id).sha)
    activation = cache.variant_dir(cache.repo_dir(ACTIVATION), lock.get(ACTIVATION).sha, CPU_VARIANT)
    rotary = cache.variant_dir(cache.repo_dir(ROTARY), lock.get(ROTARY).sha, CUDA_VARIANT)
    so = next(activation.glob("*.so"))
    so.write_bytes(so.read_bytes()[:-1] + b"!")  # tampered, through the link: an LFS blob
    (activation / "_ops.py").unlink()  # missing
    (activation / "layers" / "big.bin").write_bytes(os.urandom(3 * (1 << 20) + 17))  # extra, several chunks
    (rotary / "metadata.json").write_bytes((rotary / "metadata.json").read_bytes() + b" ")  # tampered

    monkeypatch.setenv("KERNELS_HASH_THREADS", "1")
    serial = check_cache(lock)
    monkeypatch.setenv("KERNELS_HASH_THREADS", "4")
    parallel = check_cache(lock)

    assert parallel == serial
    problems, checked = parallel
    assert [(p.kind, p.repo_id, p.variant, p.path) for p in problems] == [
        ("modified", ACTIVATION, CPU_VARIANT, so.name),
        ("missing", ACTIVATION, CPU_VARIANT, "_ops.py"),
        ("extra", ACTIVATION, CPU_VARIANT, "layers/big.bin"),
        ("modified", ROTARY, CUDA_VARIANT, "metadata.json"),
    ]
    assert len(checked) == 4
    for result in checked:
        assert dict(result.files) == plain_file_hashes(result.path)
    assert [result.ok for result in checked] == [False, True, True, False]


def test_variant_folder_the_lock_does_not_list_is_reported(hub_env, tmp_path) -> None:
    project, lock = locked_project(hub_env, tmp_path, f'"{ROTARY}" = ">=1,<2"', cached=(ROTARY,))
    snapshot = cache.variant_dir(cache.repo_dir(ROTARY), lock.get(ROTARY).sha, CPU_VARIANT).parent
    (snapshot / "torch213-cxx11-cu999-x86_64-linux").mkdir()
    assert kinds(verify_project(project).problems) == [("unlocked-variant", ROTARY)]


def test_cache_without_manifest_still_detects_a_change(hub_env, tmp_path) -> None:
    project, lock = locked_project(hub_env, tmp_path, f'"{ROTARY}" = ">=1,<2"', cached=(ROTARY,))
    repo = cache.repo_dir(ROTARY)
    cache.manifest_path(repo, lock.get(ROTARY).sha, CPU_VARIANT).unlink()  # as another HF tool would leave it
    assert verify_project(project).ok
    (cache.variant_dir(repo, lock.get(ROTARY).sha, CPU_VARIANT) / "new.py").write_text("x = 1\n")
    (problem,) = verify_project(project).problems
    assert problem.kind == "hash-mismatch" and problem.expected == lock.get(ROTARY).variants[CPU_VARIANT].hash


def test_require_cached_names_the_kernel_whose_variant_is_absent(hub_env, tmp_path) -> None:
    project, lock = locked_project(hub_env, tmp_path, f'"{ACTIVATION}" = ">=1,<2"\n"{ROTARY}" = ">=1,<2"', cached=(ROTARY,))
    assert verify_project(project).ok  # absent is fine by default
    (problem,) = verify_project(project, require_cached=True).problems
    folder = cache.variant_dir(cache.repo_dir(ACTIVATION), lock.get(ACTIVATION).sha, CPU_VARIANT)
    assert (problem.kind, problem.repo_id, problem.variant, dict(problem.facts)) == (
        "not-cached", ACTIVATION, CPU_VARIANT, {"folder": str(folder)}
    )
    assert json_problems("--require-cached", str(project)) == (1, [("not-cached", ACTIVATION, CPU_VARIANT, None, None, None)])


def test_require_cached_reports_a_kernel_with_no_variant_for_this_machine(hub_env, tmp_path) -> None:
    hub_env.add_repo(KernelRepo("kernels-test/verify-cuda-only", (Release("1.0.0", variants=(CUDA_VARIANT,)),)))
    project, _ = locked_project(hub_env, tmp_path, '"kernels-test/verify-cuda-only" = ">=1"')
    machine = system_for_variant(CPU_VARIANT)
    report = verify_project(project, require_cached=True, system=machine)
    (problem,) = report.problems
    assert (problem.kind, problem.repo_id, problem.expected) == ("no-variant", "kernels-test/verify-cuda-only", None)
    assert dict(problem.facts) == {"variants": (CUDA_VARIANT,), "machine": machine.describe()}


# -- (b) pyproject <-> lock -----------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (f'"{ROTARY}" = ">=1,<2"', f'"{ROTARY}" = ">=2"', [("unsatisfied", ROTARY)]),
        (f'"{ROTARY}" = ">=1,<2"', f'"{ROTARY}" = ">=1.0,<2"', [("requirement-changed", ROTARY)]),
        (f'"{ROTARY}" = ">=1,<2"', f'"{ROTARY}" = ">=1,<2"\n"kernels-test/flash" = 1', [("not-locked", "kernels-test/flash")]),
        (f'"{ROTARY}" = ">=1,<2"\n"kernels-test/flash" = 1', f'"{ROTARY}" = ">=1,<2"', [("removed", "kernels-test/flash")]),
        ('"kernels-test/flash" = 1', '"kernels-test/flash" = 2', [("unsatisfied", "kernels-test/flash")]),
        (f'"{ROTARY}" = {{ revision = "v1.0.0" }}', f'"{ROTARY}" = {{ revision = "v1.1.0" }}', [("unsatisfied", ROTARY)]),
        (
            f'"kernels-test/layer-norm" = ">=0.2"\n"{ROTARY}" = 1',
            f'"{ROTARY}" = 1',
            [("removed", "kernels-test/layer-norm"), ("orphan", ACTIVATION)],
        ),
    ],
    ids=["range-unsatisfied", "text-changed", "added", "removed", "major-changed", "revision-changed", "orphan"],
)
def test_pyproject_changed_after_locking(hub_env, tmp_path, before, after, expected) -> None:
    project, _ = locked_project(hub_env, tmp_path, before)
    set_deps(project, after)
    report = verify_project(project)
    assert kinds(report.problems) == expected
    assert all(problem.kind in SYNC_KINDS for problem in report.problems)

    code, problems = json_problems(str(project))
    assert code == 1
    assert [(kind, repo_id) for kind, repo_id, *_ in problems] == expected


def test_unsatisfied_range_shows_both_sides(hub_env, tmp_path) -> None:
    project, lock = locked_project(hub_env, tmp_path, f'"{ROTARY}" = ">=1,<2"')
    set_deps(project, f'"{ROTARY}" = ">=2"')
    (problem,) = verify_project(project).problems
    assert problem.expected == ">=2"
    assert problem.got == f"v1.1.0 ({lock.get(ROTARY).sha[:12]})"


# -- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lock_text", "pyproject_deps", "message"),
    [
        ("{not json", f'"{ROTARY}" = ">=1"', "kernels.lock: not valid JSON"),
        ('[{"repo_id": "kernels-test/rotary", "sha": "abc", "variants": {}, "dependencies": []}]', f'"{ROTARY}" = ">=1"', "[0].sha"),
        (None, f'"{ROTARY}" = ">=1"', "not found; run 'kernels lock'"),
        ("[]", f'"{ROTARY}" = ">=1,,<2"', "pyproject.toml:"),
    ],
    ids=["not-json", "bad-sha", "no-lock", "bad-pyproject"],
)
def test_unreadable_input_is_one_line_exit_2(hub_env, tmp_path, lock_text, pyproject_deps, message) -> None:
    project = write_project(tmp_path / "app", pyproject_deps)
    if lock_text is not None:
        (project / "kernels.lock").write_text(lock_text)
    with pytest.raises((LockfileError, PyprojectError)):
        verify_project(project)
    result = run_cli("verify", str(project))
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
    assert result.stdout == ""

    as_json = run_cli("verify", "--json", str(project))
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["ok"] is False and message in json.loads(as_json.stdout)["error"]


# -- --json ---------------------------------------------------------------------------


def test_json_report(hub_env, tmp_path) -> None:
    project, lock = locked_project(hub_env, tmp_path, f'"{ACTIVATION}" = ">=1,<2"\n"{ROTARY}" = ">=1,<2"', cached=(ACTIVATION, ROTARY))
    good = json.loads(run_cli("verify", "--json", str(project)).stdout)
    assert good["ok"] is True and good["problems"] == [] and good["kernels"] == 2 and good["online"] is False
    assert good["lockfile"] == str(project / "kernels.lock")
    assert [(v["repo_id"], v["variant"]) for v in good["verified"]] == [(ACTIVATION, CPU_VARIANT), (ROTARY, CPU_VARIANT)]
    assert good["verified"][0]["commit"] == lock.get(ACTIVATION).sha
    assert good["verified"][0]["hash"] == lock.get(ACTIVATION).variants[CPU_VARIANT].hash

    (cache.variant_dir(cache.repo_dir(ROTARY), lock.get(ROTARY).sha, CPU_VARIANT) / "_ops.py").unlink()
    set_deps(project, f'"{ACTIVATION}" = ">=1,<2"\n"{ROTARY}" = ">=1,<2"\n"kernels-test/flash" = 1')
    result = run_cli("verify", "--json", str(project))
    assert result.returncode == 1
    payload = json.loads(result.stdout)
    assert payload["ok"] is False
    assert [(v["repo_id"], v["variant"]) for v in payload["verified"]] == [(ACTIVATION, CPU_VARIANT)]
    assert payload["problems"] == [
        {
            "kind": "not-locked", "repo_id": "kernels-test/flash", "variant": None, "path": None,
            "message": "kernels-test/flash is in pyproject.toml ('1') but not in kernels.lock; run 'kernels lock' to update kernels.lock",
            "expected": None, "got": None,
        },
        {
            "kind": "missing", "repo_id": ROTARY, "variant": CPU_VARIANT, "path": "_ops.py",
            "message": f"{ROTARY} {CPU_VARIANT}: _ops.py is missing",
            "expected": git_blob_id(hub_env.repos[ROTARY].files["1.1.0"][f"build/{CPU_VARIANT}/_ops.py"].data), "got": None,
        },
    ]  # fmt: skip


# -- offline means offline ------------------------------------------------------------


def test_offline_verify_makes_no_http_request(hub_env, proxy, tmp_path, monkeypatch) -> None:
    project, _ = locked_project(hub_env, tmp_path, f'"kernels-test/layer-norm" = ">=0.2"\n"{ROTARY}" = 1', cached=(ROTARY,))
    set_deps(project, f'"kernels-test/layer-norm" = ">=0.1"\n"{ROTARY}" = 1\n"kernels-test/flash" = 1')  # problems too
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)
    proxy.reset_counts()
    assert not verify_project(project, require_cached=True).ok
    for args in (("verify",), ("verify", "--json"), ("verify", "--require-cached")):
        assert run_cli(*args, str(project)).returncode == 1
    assert proxy.total_requests() == 0

    assert run_cli("verify", "--online", str(project)).returncode == 1
    assert proxy.total_requests() > 0  # the same setup does reach the Hub through the proxy when asked


# -- --online -------------------------------------------------------------------------


def test_online_everything_fine(hub_env, tmp_path) -> None:
    deps = '"kernels-test/layer-norm" = ">=0.2"\n"kernels-test/flash" = 1\n"kernels-test/legacy-gelu" = ">=0.1"'
    project, _ = locked_project(hub_env, tmp_path, deps, cached=("kernels-test/flash",))
    result = run_cli("verify", "--online", str(project))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(4 kernels, 1 cached variant verified); every locked commit, tag and branch checked on the Hub" in result.stdout
    assert json.loads(run_cli("verify", "--online", "--json", str(project)).stdout)["online"] is True


def test_online_reports_a_moved_tag(hub_env, tmp_path) -> None:
    built = hub_env.add_repo(KernelRepo("kernels-test/verify-moving-tag", (Release("1.0.0"), Release("2.0.0"))))
    project, _ = locked_project(hub_env, tmp_path, '"kernels-test/verify-moving-tag" = ">=1,<2"')
    locked, other = built.commits["1.0.0"], built.commits["2.0.0"]
    assert verify_project(project, online=True).ok
    built.git("tag", "-f", "v1.0.0", other)

    assert verify_project(project).ok  # offline, nothing can tell
    (problem,) = verify_project(project, online=True).problems
    assert (problem.kind, problem.repo_id, problem.expected, problem.got) == (
        "ref-moved", "kernels-test/verify-moving-tag", locked, other
    )
    assert dict(problem.facts) == {"ref": "v1.0.0", "ref_kind": "tag"}
    assert json_problems("--online", str(project)) == (
        1, [("ref-moved", "kernels-test/verify-moving-tag", None, None, locked, other)]
    )


def test_online_reports_a_force_pushed_branch_and_a_deleted_tag(hub_env, tmp_path) -> None:
    branchy = hub_env.add_repo(KernelRepo("kernels-test/verify-moving-branch", (Release("1.0.0"), Release("1.1.0"))))
    tagged = hub_env.add_repo(KernelRepo("kernels-test/verify-deleted-tag", (Release("1.0.0"), Release("2.0.0"))))
    deps = '"kernels-test/verify-moving-branch" = 1\n"kernels-test/verify-deleted-tag" = "==1.0.0"'
    project, _ = locked_project(hub_env, tmp_path, deps)
    branchy.git("branch", "-f", "v1", branchy.commits["1.0.0"])  # rewound: a force-push
    tagged.git("tag", "-d", "v1.0.0")
    report = verify_project(project, online=True)
    assert kinds(report.problems) == [
        ("ref-missing", "kernels-test/verify-deleted-tag"),
        ("ref-moved", "kernels-test/verify-moving-branch"),
    ]
    moved = report.problems[1]
    assert (moved.expected, moved.got) == (branchy.commits["1.1.0"], branchy.commits["1.0.0"])
    assert dict(moved.facts) == {"ref": "v1", "ref_kind": "branch"}
    gone = report.problems[0]
    assert (gone.expected, gone.got, dict(gone.facts)) == (tagged.commits["1.0.0"], None, {"ref": "v1.0.0"})


def test_online_accepts_a_branch_that_moved_forward(hub_env, tmp_path) -> None:
    from tests.fixtures.builder import commit_release, update_major_branches

    built = hub_env.add_repo(KernelRepo("kernels-test/verify-advancing-branch", (Release("1.0.0"),)))
    project, lock = locked_project(hub_env, tmp_path, '"kernels-test/verify-advancing-branch" = 1')
    commit_release(built, Release("1.1.0"), 1)
    update_major_branches(built)  # v1 now points at the new release, the locked commit in its history
    assert built.branches["v1"] != lock.get("kernels-test/verify-advancing-branch").sha
    report = verify_project(project, online=True)
    assert report.ok, report.problems


def test_online_reports_a_commit_that_no_longer_exists(hub_env, tmp_path) -> None:
    repo_id = "kernels-test/verify-rewritten"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    project, lock = locked_project(hub_env, tmp_path, f'"{repo_id}" = ">=1,<2"')
    old = lock.get(repo_id).sha
    rewritten = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", lfs_size=100),)))  # history rewritten
    assert rewritten.commits["1.0.0"] != old

    report = verify_project(project, online=True)
    assert kinds(report.problems) == [("ref-moved", repo_id), ("commit-missing", repo_id)]
    missing = report.problems[1]
    assert (missing.variant, missing.path, missing.expected, missing.got, dict(missing.facts)) == (None, None, old, None, {})
    assert all(p.kind in HUB_KINDS for p in report.problems)


def test_online_catches_a_lock_hash_that_the_hub_does_not_serve(hub_env, tmp_path) -> None:
    project, lock = locked_project(hub_env, tmp_path, f'"{ROTARY}" = ">=1,<2"')
    raw = json.loads((project / "kernels.lock").read_text())
    real = raw[0]["variants"][CPU_VARIANT]["hash"]
    raw[0]["variants"][CPU_VARIANT]["hash"] = "sha256-" + "0" * 64
    (project / "kernels.lock").write_text(json.dumps(raw, indent=2) + "\n")
    assert verify_project(project).ok  # consistent with itself and pyproject, nothing cached
    (problem,) = verify_project(project, online=True).problems
    assert (problem.kind, problem.variant, problem.expected, problem.got) == (
        "hub-hash-mismatch", CPU_VARIANT, "sha256-" + "0" * 64, real
    )


def test_online_with_offline_mode_is_a_usage_error(hub_env, tmp_path, monkeypatch) -> None:
    project, _ = locked_project(hub_env, tmp_path, f'"{ROTARY}" = ">=1,<2"')
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert verify_project(project).ok  # offline verification does not need the Hub
    with pytest.raises(UsageError, match="--online needs the Hub but HF_HUB_OFFLINE is set"):
        verify_project(project, online=True)
    result = run_cli("verify", "--online", str(project))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --online needs the Hub but HF_HUB_OFFLINE is set; unset HF_HUB_OFFLINE or drop --online"
    ]


def test_online_hub_failures_are_reported_per_kernel(hub_env, proxy, tmp_path) -> None:
    project, _ = locked_project(hub_env, tmp_path, f'"{ROTARY}" = ">=1,<2"\n"kernels-test/flash" = 1')
    proxy.fail_all()
    report = verify_project(project, online=True, hub=HubClient(endpoint=proxy.url, retries=1, backoff=0.01))
    assert kinds(report.problems) == [("hub-error", "kernels-test/flash"), ("hub-error", ROTARY)]
    assert all("kept failing" in p.message for p in report.problems)


def test_problem_kinds_are_disjoint() -> None:
    assert not (SYNC_KINDS & CACHE_KINDS or SYNC_KINDS & HUB_KINDS or CACHE_KINDS & HUB_KINDS)

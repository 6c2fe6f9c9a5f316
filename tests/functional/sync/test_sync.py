"""`kernels sync` against the local Hub: lock when stale, download, verify, and ``--into``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, KernelRepo, Release
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.faultproxy import by_kind
from tests.fixtures.processes import KERNELS
from tests.fixtures.projects import write_project
from tests.fixtures.schemas import validated

OFFLINE = {"HF_HUB_OFFLINE": "1"}


def kernels(*args: str, **env: str | None) -> CliResult:
    return run_kernels(*args, env=env)


def add_kernel(hub_env, name: str) -> str:
    repo_id = f"kernels-test/sync-{name}"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("1.1.0"))))
    return repo_id


def cached_variants(root: Path, repo_id: str) -> set[tuple[str, str]]:
    repo = cache.find_repo_dir(repo_id, root)
    snapshots = repo / "snapshots" if repo else None
    if snapshots is None or not snapshots.is_dir():
        return set()
    return {(c.name, v.name) for c in snapshots.iterdir() for v in (c / "build").iterdir()}


@pytest.fixture
def app(hub_env, tmp_path) -> tuple[Path, str]:
    repo_id = add_kernel(hub_env, tmp_path.name[-20:].replace("_", "-").strip("-"))
    return write_project(tmp_path / "app", f'"{repo_id}" = ">=1,<2"'), repo_id


def test_sync_locks_a_project_without_a_lock_downloads_this_machines_variant_and_verifies(hub_env, app) -> None:
    project, repo_id = app
    result = kernels("sync", str(project))
    assert result.returncode == 0, result.stderr
    commit = hub_env.repos[repo_id].commits["1.1.0"]
    assert f"+ {repo_id} v1.1.0" in result.stdout
    assert "Synced 1 kernel: wrote kernels.lock; 1 variant present, verified (1 downloaded" in result.stdout
    assert (project / "kernels.lock").is_file()
    assert cached_variants(cache.cache_root(), repo_id) == {(commit, CPU_VARIANT)}  # this machine's only
    assert kernels("verify", str(project), "--require-cached").returncode == 0


def test_a_second_sync_asks_the_hub_nothing_like_lock_check_and_offline_works(hub_env, proxy, app) -> None:
    project, _ = app
    assert kernels("sync", str(project), HF_ENDPOINT=proxy.url).returncode == 0
    lock_bytes = (project / "kernels.lock").read_bytes()
    proxy.reset_counts()
    assert kernels("lock", "--check", str(project), HF_ENDPOINT=proxy.url).returncode == 0
    check_requests = proxy.total_requests()
    proxy.reset_counts()
    again = kernels("sync", str(project), HF_ENDPOINT=proxy.url)
    assert again.returncode == 0, again.stderr
    assert "kernels.lock up to date; 1 variant present, verified (0 downloaded, 0 files, 0 bytes)" in again.stdout
    assert proxy.total_requests() <= check_requests == 0
    offline = kernels("sync", str(project), **OFFLINE)
    assert offline.returncode == 0, offline.stderr
    assert (project / "kernels.lock").read_bytes() == lock_bytes


def test_sync_relocks_a_changed_pyproject_keeping_the_pins_it_can(hub_env, tmp_path) -> None:
    first, second = add_kernel(hub_env, "kept"), add_kernel(hub_env, "added")
    project = write_project(tmp_path / "app", {first: ">=1.0,<1.1"}, locked=True)
    kept = (project / "kernels.lock").read_text()
    assert hub_env.repos[first].commits["1.0.0"] in kept
    write_project(project, f'"{first}" = ">=1,<2"\n"{second}" = ">=1"')
    result = kernels("sync", str(project))
    assert result.returncode == 0, result.stderr
    assert f"+ {second} v1.1.0" in result.stdout and f"~ {first}: requirement" in result.stdout
    text = (project / "kernels.lock").read_text()
    assert hub_env.repos[first].commits["1.0.0"] in text  # the pin still meets the range: kept
    assert {repo for repo in (first, second) if cached_variants(cache.cache_root(), repo)} == {first, second}


def test_a_stale_lock_is_resolved_once_not_judged_online_and_then_relocked(hub_env, proxy, tmp_path) -> None:
    first, second = add_kernel(hub_env, "once-a"), add_kernel(hub_env, "once-b")
    project = write_project(tmp_path / "app", {first: ">=1"}, locked=True)
    write_project(project, {first: ">=1", second: ">=1"})
    proxy.reset_counts()
    result = kernels("sync", str(project), HF_ENDPOINT=proxy.url)
    assert result.returncode == 0, result.stderr
    assert f"+ {second} v1.1.0" in result.stdout
    # Each repo's refs are listed once: the relock is the only resolution, and the download
    # uses what it learnt (whether each repo is a kernel or a model repo).
    assert by_kind(proxy)["refs"] == 2


def test_locked_with_a_stale_lock_exits_1_and_writes_and_fetches_nothing(hub_env, tmp_path) -> None:
    first, second = add_kernel(hub_env, "stale-a"), add_kernel(hub_env, "stale-b")
    project = write_project(tmp_path / "app", {first: ">=1"}, locked=True)
    before = (project / "kernels.lock").read_bytes()
    write_project(project, {first: ">=1", second: ">=1"})
    for env in ({}, OFFLINE):
        result = kernels("sync", "--locked", str(project), **env)
        assert result.returncode == 1, (result.stdout, result.stderr)
        assert "kernels.lock is out of date" in result.stderr
        assert (project / "kernels.lock").read_bytes() == before
        assert not cached_variants(cache.cache_root(), first)  # nothing downloaded either
    as_json = validated(kernels("sync", "--locked", "--json", str(project)), "sync")
    assert (as_json["ok"], as_json["lock_state"], as_json["download"]) == (False, "out-of-date", None)
    assert as_json["lock"]["ok"] is False  # the lock it judged is out of date
    # Once the lock is fresh, --locked syncs.
    assert kernels("lock", str(project)).returncode == 0
    assert kernels("sync", "--locked", str(project)).returncode == 0
    assert cached_variants(cache.cache_root(), second)


def test_frozen_offline_uses_the_lock_as_it_is_whatever_pyproject_says(hub_env, app) -> None:
    project, repo_id = app
    assert kernels("sync", str(project)).returncode == 0
    before = (project / "kernels.lock").read_bytes()
    write_project(project, {repo_id: ">=2"})  # the lock no longer meets it
    assert kernels("sync", str(project), **OFFLINE).returncode == 1
    result = kernels("sync", "--frozen", str(project), **OFFLINE)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "kernels.lock used as it is" in result.stdout
    assert (project / "kernels.lock").read_bytes() == before


def test_frozen_offline_with_nothing_cached_says_what_is_missing(hub_env, app) -> None:
    project, _ = app
    assert kernels("lock", str(project)).returncode == 0
    result = kernels("sync", "--frozen", str(project), **OFFLINE)
    assert result.returncode == 1
    assert "HF_HUB_OFFLINE is set" in result.stderr and "kernels download" in result.stderr


def test_locked_and_frozen_together_are_bad_input(hub_env, app) -> None:
    project, _ = app
    result = kernels("sync", "--locked", "--frozen", str(project))
    assert result.returncode == 2 and "--locked and --frozen" in result.stderr
    assert not (project / "kernels.lock").exists()


def test_json_matches_its_schema_and_quiet_prints_nothing(hub_env, app) -> None:
    project, repo_id = app
    payload = validated(kernels("sync", "--json", str(project)), "sync")
    assert (payload["ok"], payload["lock_state"]) == (True, "created")
    assert [v["state"] for v in payload["download"]["variants"]] == ["downloaded"]
    assert payload["verify"]["ok"] and payload["into"] is None
    assert payload["lock"]["ok"] is True and payload["download"]["ok"] is True
    quiet = kernels("sync", "-q", str(project))
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    frozen = validated(kernels("sync", "--frozen", "--json", str(project), **OFFLINE), "sync")
    assert (frozen["lock_state"], frozen["lock"]) == ("frozen", None)


def test_target_downloads_and_verifies_the_build_serving_it(hub_env, app) -> None:
    project, repo_id = app
    result = kernels("sync", "--target", CUDA_VARIANT, str(project))
    assert result.returncode == 0, result.stderr
    commit = hub_env.repos[repo_id].commits["1.1.0"]
    assert cached_variants(cache.cache_root(), repo_id) == {(commit, CUDA_VARIANT)}


def test_a_modified_cached_file_is_downloaded_again_and_offline_says_so(hub_env, app) -> None:
    project, repo_id = app
    assert kernels("sync", str(project)).returncode == 0
    commit = hub_env.repos[repo_id].commits["1.1.0"]
    folder = cache.variant_dir(cache.find_repo_dir(repo_id), commit, CPU_VARIANT)
    real = Path(os.path.realpath(next(folder.rglob("__init__.py"))))
    original = real.read_bytes()
    real.write_bytes(original + b"\n# changed\n")
    offline = kernels("sync", "--frozen", str(project), **OFFLINE)
    assert offline.returncode == 1 and f"{repo_id} {CPU_VARIANT}" in offline.stderr
    result = kernels("sync", "--frozen", str(project))
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "(1 downloaded" in result.stdout
    assert Path(os.path.realpath(next(folder.rglob("__init__.py")))).read_bytes() == original


# -- --into ---------------------------------------------------------------------------


def load_from(folder: Path, project: Path, repo_id: str, empty_cache: Path) -> subprocess.CompletedProcess:
    """``load_kernel`` in a fresh interpreter, with only ``folder`` as its kernel cache."""
    code = f"from kernel_deps import load_kernel; m = load_kernel({repo_id!r}, lockfile={str(project / 'kernels.lock')!r}); print(m.__version__, m.VARIANT, m.__kernel_origin__.path)"  # noqa: E501
    env = {**os.environ, "KERNELS_CACHE": str(folder), "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(empty_cache),
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # fmt: skip
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_into_places_exactly_the_locked_variant_and_a_fresh_process_loads_from_it(hub_env, app, tmp_path) -> None:
    project, repo_id = app
    into = tmp_path / "image-cache"
    result = kernels("sync", "--into", str(into), str(project))
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert f"placed in {into}, verified" in result.stdout
    commit = hub_env.repos[repo_id].commits["1.1.0"]
    assert sorted(p.name for p in into.iterdir()) == [".kernel-deps-into.json", cache.find_repo_dir(repo_id).name]
    assert cached_variants(into, repo_id) == {(commit, CPU_VARIANT)}
    blobs = list((cache.find_repo_dir(repo_id, into) / "blobs").iterdir())
    assert blobs and all(b.is_file() and not b.is_symlink() for b in blobs)
    shared = cache.find_repo_dir(repo_id) / "blobs"
    assert any(os.path.samefile(b, shared / b.name) for b in blobs)  # hard links on one file system

    empty = tmp_path / "empty-hub-cache"
    empty.mkdir()
    loaded = load_from(into, project, repo_id, empty)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split()[:2] == ["1.1.0", CPU_VARIANT]
    assert str(into) in loaded.stdout
    assert not any(empty.iterdir())
    payload = validated(kernels("sync", "--json", "--frozen", "--into", str(into), str(project), **OFFLINE), "sync")
    assert payload["into"]["ok"] and payload["into_verify"]["ok"] and payload["into"]["removed"] == []


def test_into_again_replaces_what_changed_and_removes_only_what_it_placed(hub_env, tmp_path) -> None:
    repo_id = add_kernel(hub_env, "rerun")
    project = write_project(tmp_path / "app", {repo_id: ">=1.0,<1.1"})
    into = tmp_path / "image-cache"
    assert kernels("sync", "--into", str(into), str(project)).returncode == 0
    old = hub_env.repos[repo_id].commits["1.0.0"]
    assert cached_variants(into, repo_id) == {(old, CPU_VARIANT)}
    # The user's own files, added to the folder: --into did not place them, so it keeps them.
    (into / "kernels--someone--else").mkdir()
    (into / "notes.txt").write_text("mine")
    stray = cache.find_repo_dir(repo_id, into) / "blobs" / ("0" * 40)
    stray.write_bytes(b"not locked")
    old_variant = cache.variant_dir(cache.find_repo_dir(repo_id, into), old, CPU_VARIANT)
    old_blobs = {p.name for p in (cache.find_repo_dir(repo_id, into) / "blobs").iterdir()} - {stray.name}

    write_project(project, {repo_id: ">=1.1,<2"})
    result = kernels("sync", "--into", str(into), str(project))
    assert result.returncode == 0, (result.stdout, result.stderr)
    new = hub_env.repos[repo_id].commits["1.1.0"]
    assert cached_variants(into, repo_id) == {(new, CPU_VARIANT)} and not old_variant.exists()
    assert (into / "kernels--someone--else").is_dir() and (into / "notes.txt").read_text() == "mine"
    assert stray.read_bytes() == b"not locked"
    kept = {p.name for p in (cache.find_repo_dir(repo_id, into) / "blobs").iterdir()}
    new_blobs = set(cache.check_variant(repo_id, new, CPU_VARIANT, "", root=into).files.values())
    assert kept == new_blobs | {stray.name} and old_blobs - new_blobs  # the old commit's own blobs went
    empty = tmp_path / "empty"
    empty.mkdir()
    loaded = load_from(into, project, repo_id, empty)
    assert loaded.returncode == 0 and loaded.stdout.startswith("1.1.0 "), loaded.stderr


def test_into_the_cache_itself_is_bad_input(hub_env, app) -> None:
    project, _ = app
    result = kernels("sync", "--into", str(cache.cache_root()), str(project))
    assert result.returncode == 2 and "--into" in result.stderr


def _files(folder: Path) -> dict[str, bytes | str]:
    """Every file and link under ``folder``: its bytes, or for a link where it leads."""
    found: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[rel] = os.readlink(path)
        elif path.is_file():
            found[rel] = path.read_bytes()
    return found


def test_into_refuses_the_project_the_caches_and_a_folder_it_did_not_write(hub_env, app, tmp_path) -> None:
    project, repo_id = app
    assert kernels("sync", str(project)).returncode == 0
    (project / "src").mkdir()
    (project / "src" / "main.py").write_text("print('app')\n")
    hf_home = tmp_path / "hf-home"
    (hf_home / "hub" / "models--someone--bert" / "blobs").mkdir(parents=True)
    (hf_home / "hub" / "models--someone--bert" / "blobs" / "abc").write_bytes(b"weights")
    (hf_home / "token").write_text("hf_secret")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "report.pdf").write_bytes(b"%PDF")
    watched = (project, hf_home, cache.cache_root(), theirs)
    before = {folder: _files(folder) for folder in watched}
    refused = [
        (("sync", "--into", ".", "."), {}, "is the project folder"),
        (("download", "--into", str(project / "image"), str(project)), {}, "lies inside the project folder"),
        (("sync", "--into", str(tmp_path), str(project)), {}, "holds the project folder"),
        (("download", "--into", str(hf_home), str(project)), {"HF_HOME": str(hf_home)}, "is the Hugging Face home"),
        (("download", "--into", str(cache.cache_root()), str(project)), {}, "is the kernel cache"),
        (("sync", "--into", str(cache.find_repo_dir(repo_id)), str(project)), {}, "lies inside the kernel cache"),
        (("download", "--into", str(theirs), str(project)), {}, "not empty, and not a folder kernels --into wrote"),
    ]
    for args, env, message in refused:
        result = run_kernels(*args, cwd=project, env=env)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
    assert {folder: _files(folder) for folder in watched} == before  # every file still there


def test_into_trusts_no_record_it_did_not_write(hub_env, app, tmp_path) -> None:
    """A checkout can hold a folder with a record in it: it is input, read strictly."""
    project, repo_id = app
    assert kernels("lock", str(project)).returncode == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    for number, placed in enumerate((["../outside/keep.txt"], ["kernels--a--b/../../outside"], ["notes.txt"], "all")):
        planted = tmp_path / f"planted-{number}"
        planted.mkdir()
        (planted / ".kernel-deps-into.json").write_text(json.dumps({"kernel-deps-into": 1, "placed": placed}))
        (planted / "notes.txt").write_text("mine")
        result = kernels("download", "--into", str(planted), str(project))
        assert result.returncode == 2 and ".kernel-deps-into.json" in result.stderr, result.stderr
        assert (planted / "notes.txt").read_text() == "mine"
    # A record naming a path of a kind --into places, which holds a folder of the user's: it stays.
    name = cache.repo_dir(repo_id).name
    planted = tmp_path / "planted-kind"
    user_folder = planted / name / "snapshots" / ("0" * 40) / "build" / "mine"
    user_folder.mkdir(parents=True)
    (user_folder / "data.bin").write_bytes(b"mine")
    record = {"kernel-deps-into": 1, "placed": [f"{name}/snapshots/{'0' * 40}/build/mine"]}
    (planted / ".kernel-deps-into.json").write_text(json.dumps(record))
    result = kernels("download", "--into", str(planted), str(project))
    assert result.returncode == 0, result.stderr
    assert (user_folder / "data.bin").read_bytes() == b"mine"
    assert (outside / "keep.txt").read_text() == "mine"


def test_into_writes_nothing_through_a_link_it_did_not_create(hub_env, app, tmp_path) -> None:
    project, repo_id = app
    into = tmp_path / "image-cache"
    assert kernels("sync", "--into", str(into), str(project)).returncode == 0
    repo = cache.find_repo_dir(repo_id, into)
    # blobs/ swapped for a link to a folder elsewhere, after a first run wrote the folder.
    outside = tmp_path / "outside-blobs"
    (repo / "blobs").rename(outside)
    (repo / "blobs").symlink_to(outside)
    for blob in outside.iterdir():
        blob.unlink()
    (outside / "precious").write_text("mine")
    result = kernels("sync", "--into", str(into), str(project))
    assert result.returncode == 2 and f"{repo / 'blobs'} is a symbolic link" in result.stderr, result.stderr
    assert _files(outside) == {"precious": b"mine"}
    # A fresh folder whose repo holds a planted .kernel-deps link (the manifests' folder).
    planted = tmp_path / "planted"
    (planted / repo.name).mkdir(parents=True)
    (planted / ".kernel-deps-into.json").write_text('{"kernel-deps-into": 1, "placed": []}')
    records = tmp_path / "outside-records"
    records.mkdir()
    (planted / repo.name / ".kernel-deps").symlink_to(records)
    result = kernels("sync", "--into", str(planted), str(project))
    assert result.returncode == 2 and "is a symbolic link" in result.stderr, result.stderr
    assert list(records.iterdir()) == [] and not (planted / repo.name / "blobs").exists()
    linked = tmp_path / "linked-into"
    linked.symlink_to(outside)
    result = kernels("sync", "--into", str(linked), str(project))
    assert result.returncode == 2 and "is a symbolic link" in result.stderr
    assert _files(outside) == {"precious": b"mine"}


def test_download_into_places_the_variants_it_made_present_and_replaces_what_changed(hub_env, app, tmp_path) -> None:
    project, repo_id = app
    assert kernels("lock", str(project)).returncode == 0
    into = tmp_path / "shipped"
    payload = validated(kernels("download", "--json", "--into", str(into), "--variant", CUDA_VARIANT, str(project)),
                        "download")  # fmt: skip
    commit = hub_env.repos[repo_id].commits["1.1.0"]
    assert payload["into"]["ok"] and [v["variant"] for v in payload["into"]["variants"]] == [CUDA_VARIANT]
    assert cached_variants(into, repo_id) == {(commit, CUDA_VARIANT)}
    # A placed file changed in the folder: the next run puts the locked bytes back.
    placed = next(cache.variant_dir(cache.find_repo_dir(repo_id, into), commit, CUDA_VARIANT).rglob("__init__.py"))
    original = placed.read_bytes()
    blob = Path(os.path.realpath(placed))
    blob.unlink()
    blob.write_bytes(b"tampered")
    again = kernels("download", "--into", str(into), "--variant", CUDA_VARIANT, str(project))
    assert again.returncode == 0, (again.stdout, again.stderr)
    assert placed.read_bytes() == original
    result = kernels("download", "--into", str(into), str(project))
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert f"placed in {into}, verified" in result.stdout
    assert cached_variants(into, repo_id) == {(commit, CPU_VARIANT)}  # exactly this run's variants
    # The CUDA variant went with its blobs: only the CPU variant's remain.
    kept = {p.name for p in (cache.find_repo_dir(repo_id, into) / "blobs").iterdir()}
    assert kept == set(cache.check_variant(repo_id, commit, CPU_VARIANT, "", root=into).files.values())


# -- killed -----------------------------------------------------------------------------


def test_a_sync_killed_at_any_moment_is_completed_by_the_next_run(hub_env, proxy, tmp_path) -> None:
    """A real process (a kill is only a process's), killed while locking, downloading or placing."""
    import signal
    import time

    from tests.fixtures.downloads import add_repos

    project = write_project(tmp_path / "app", add_repos(hub_env, "sync-killed", lfs_size=1 << 20, kernels=2))
    proxy.latency = 0.05
    into = tmp_path / "shipped"
    env = {**os.environ, "HF_ENDPOINT": proxy.url}
    for delay in (0.4, 0.8, 1.2, 1.6, 2.0, 2.6):
        process = subprocess.Popen([KERNELS, "sync", "-q", "--into", str(into), str(project)], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        time.sleep(delay)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        lock = project / "kernels.lock"
        assert not lock.exists() or kernels("lock", "--check", str(project), **OFFLINE).returncode == 0
    rerun = kernels("sync", "--into", str(into), str(project), HF_ENDPOINT=proxy.url)
    assert rerun.returncode == 0, (rerun.stdout, rerun.stderr)
    assert kernels("verify", "--require-cached", str(project)).returncode == 0
    placed = kernels("verify", "--require-cached", str(project), KERNELS_CACHE=str(into))
    assert placed.returncode == 0, placed.stdout
    assert not [p for p in into.rglob("*") if p.name.endswith(".incoming")]


def test_a_variant_placed_with_into_that_does_not_check_out_is_a_record_said_in_one_line() -> None:
    from kernel_deps.cache.store import FileProblem, VariantCheck
    from kernel_deps.cache.subset import PlacedMismatch, SubsetReport, placed_mismatch_text

    sha = "a" * 40
    good = VariantCheck("org/k", sha, "torch-cpu", Path("/f/x"), True, "h", "h", ())
    bad = VariantCheck("org/k", sha, "torch-cuda", Path("/f/y"), True, "h", "g", (FileProblem("modified", "a.py", "1", "2"),))
    missing = VariantCheck("org/j", sha, "torch-cpu", Path("/f/z"), False, "h", None, ())
    report = SubsetReport(Path("/f"), (good, bad, missing), ())
    assert not report.ok and SubsetReport(Path("/f"), (good,), ()).ok
    assert [(p.kind, p.repo_id, p.variant, p.files) for p in report.problems] == [
        ("placed-mismatch", "org/k", "torch-cuda", bad.problems), ("placed-mismatch", "org/j", "torch-cpu", ()),
    ]  # fmt: skip
    assert isinstance(report.problems[0], PlacedMismatch)
    assert report.to_json()["problems"] == [placed_mismatch_text(p) for p in report.problems] == [
        "org/k torch-cuda: placed in /f but does not match kernels.lock (a.py modified); run it again",
        "org/j torch-cpu: placed in /f but does not match kernels.lock (missing); run it again",
    ]

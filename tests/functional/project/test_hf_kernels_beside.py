"""kernel-deps and the Hugging Face ``kernels`` 0.17.2 release on one Hub cache and one project folder.

The real kernels 0.17.2 (``.venv/compat``) runs its own ``kernels lock`` and ``kernels
download`` in a process of its own, against the same local Hub (behind the fault proxy,
which answers the organizations' overview as the Hub does) and the same ``HF_HUB_CACHE``;
kernel-deps' commands then run on what it left, and the other way round.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, UNIVERSAL_VARIANT
from tests.fixtures.cli import run_kernels
from tests.fixtures.hf_beside import hf_repo, run_hf, run_hf_code, trusting
from tests.fixtures.projects import write_project

SHARED = "kernels-test/hf-beside"
UNIVERSAL = "kernels-test/hf-beside-universal"


def _world(hub_env, proxy, monkeypatch) -> None:
    for repo_id, variants in ((SHARED, (CPU_VARIANT, CUDA_VARIANT)), (UNIVERSAL, (UNIVERSAL_VARIANT,))):
        if repo_id not in hub_env.repos:
            hub_env.add_repo(hf_repo(repo_id, variants))
    trusting(proxy, "kernels-test")
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)


def _snapshot(repo_id: str, commit: str) -> Path:
    return Path(os.environ["HF_HUB_CACHE"]) / f"kernels--{repo_id.replace('/', '--')}" / "snapshots" / commit


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if not p.is_dir())


# --- one cache: what another tool cached of a variant is not the variant ----------------------


def test_after_hugging_face_kernels_lock_the_metadata_it_cached_is_not_cached_variants(
    hub_env, proxy, tmp_path, monkeypatch
) -> None:
    _world(hub_env, proxy, monkeypatch)
    project = write_project(tmp_path / "app", f'"{SHARED}" = 1\n"{UNIVERSAL}" = 1\n')
    theirs = run_hf(proxy, "lock", str(project))
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    assert run_kernels("lock", str(project)).returncode == 0  # converted, its pins kept
    commits = {repo_id: hub_env.repos[repo_id].branches["v1"] for repo_id in (SHARED, UNIVERSAL)}
    # kernels 0.17's lock cached each variant's metadata.json alone, in the cache kernel-deps uses.
    for repo_id, variants in ((SHARED, (CPU_VARIANT, CUDA_VARIANT)), (UNIVERSAL, (UNIVERSAL_VARIANT,))):
        for variant in variants:
            assert _files(_snapshot(repo_id, commits[repo_id]) / "build" / variant) == ["metadata.json"]

    verified = run_kernels("verify", str(project))
    assert verified.returncode == 0, verified.stdout  # nothing cached is called modified
    required = run_kernels("verify", "--json", "--require-cached", str(project))
    assert required.returncode == 1
    found = [(p["kind"], p["repo_id"], p["variant"]) for p in json.loads(required.stdout)["problems"]]
    assert found == [("not-cached", SHARED, CPU_VARIANT), ("not-cached", UNIVERSAL, UNIVERSAL_VARIANT)]

    downloaded = run_kernels("download", str(project))
    assert downloaded.returncode == 0, downloaded.stderr
    assert "2 variants present and verified (2 downloaded" in downloaded.stderr + downloaded.stdout
    assert len(_files(_snapshot(SHARED, commits[SHARED]) / "build" / CPU_VARIANT)) > 1
    for command in (("verify", "--require-cached"), ("sync", "--frozen")):
        result = run_kernels(*command, str(project))
        assert result.returncode == 0, (command, result.stdout, result.stderr)
        assert "different value" not in result.stdout + result.stderr
    # The CUDA build is still kernels 0.17's metadata.json alone: still not cached, never "modified".
    assert _files(_snapshot(SHARED, commits[SHARED]) / "build" / CUDA_VARIANT) == ["metadata.json"]


def test_a_variant_hugging_face_kernels_downloaded_is_verified_and_loaded_by_kernel_deps(
    hub_env, proxy, tmp_path, monkeypatch
) -> None:
    from kernel_deps import load_kernel

    repo_id = "kernels-test/hf-beside-their-download"  # its own repo: modules stay loaded per process
    if repo_id not in hub_env.repos:
        hub_env.add_repo(hf_repo(repo_id, (UNIVERSAL_VARIANT,)))
    _world(hub_env, proxy, monkeypatch)
    project = write_project(tmp_path / "app", f'"{repo_id}" = 1\n')
    for args in (("lock", str(project)), ("download", str(project))):
        theirs = run_hf(proxy, *args)
        assert theirs.returncode == 0, (args, theirs.stderr[-3000:])
    assert run_kernels("lock", str(project)).returncode == 0
    offline = {"HF_HUB_OFFLINE": "1"}
    verified = run_kernels("verify", "--require-cached", str(project), env=offline)
    assert verified.returncode == 0, verified.stdout
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    module = load_kernel(repo_id, lockfile=project / "kernels.lock")
    assert module.VARIANT == UNIVERSAL_VARIANT


# huggingface_hub's hf_hub_download of one file of a variant: argv[1] repo id, argv[2] commit, argv[3] the file.
ONE_FILE = """
import json, sys
from huggingface_hub import hf_hub_download
print(json.dumps(hf_hub_download(sys.argv[1], sys.argv[3], repo_type="kernel", revision=sys.argv[2])))
"""


def test_a_partial_snapshot_huggingface_hub_left_is_fetched_whole_by_download_and_the_loader(
    hub_env, proxy, tmp_path, monkeypatch
) -> None:
    from kernel_deps import get_locked_kernel

    _world(hub_env, proxy, monkeypatch)
    project = write_project(tmp_path / "app", f'"{UNIVERSAL}" = 1\n')
    assert run_kernels("lock", str(project)).returncode == 0
    commit = hub_env.repos[UNIVERSAL].branches["v1"]
    run_hf_code(proxy, ONE_FILE, UNIVERSAL, commit, f"build/{UNIVERSAL_VARIANT}/__init__.py")
    folder = _snapshot(UNIVERSAL, commit) / "build" / UNIVERSAL_VARIANT
    assert _files(folder) == ["__init__.py"]
    assert run_kernels("verify", str(project)).returncode == 0
    offline = run_kernels("verify", "--require-cached", str(project), env={"HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 1 and "not in the cache" in offline.stdout, offline.stdout
    module = get_locked_kernel(UNIVERSAL, lockfile=project / "kernels.lock")  # fetches the rest, verified
    origin = module.__kernel_origin__
    assert (origin.variant, origin.path) == (UNIVERSAL_VARIANT, folder) and len(_files(folder)) > 1, origin
    assert run_kernels("verify", "--require-cached", str(project)).returncode == 0


# --- one project folder: an invalid lock of theirs is refused, not re-resolved ------------------


def test_a_kernels_017_lock_naming_one_dependency_twice_is_refused_by_both_tools(
    hub_env, proxy, tmp_path, monkeypatch
) -> None:
    _world(hub_env, proxy, monkeypatch)
    project = write_project(tmp_path / "app", f'"{SHARED}" = 1\n')
    theirs = run_hf(proxy, "lock", str(project))
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    path = project / "kernels.lock"
    entries = json.loads(path.read_text())
    other = hub_env.repos[SHARED].commits["1.0.0"][::-1]  # a second commit for the same dependency
    path.write_text(json.dumps([*entries, {**entries[0], "lock": {"commit": other}}], indent=2))
    written = path.read_bytes()
    refused = run_hf(proxy, "download", str(project))
    assert refused.returncode != 0 and "duplicate dependency" in refused.stderr
    line = f"error: {path}: dependency '{SHARED}' (version 1) is locked twice, in '[0]' and '[1]' (kernels 0.17 lock);"
    for command in (("lock", "--dry-run"), ("lock", "--check"), ("lock",), ("download",), ("verify",),
                    ("sync", "--frozen"), ("sync",)):  # fmt: skip
        result = run_kernels(*command, str(project))
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert result.stderr.startswith(line) and result.stderr.count("\n") == 1, (command, result.stderr)
    assert path.read_bytes() == written


# --- one project folder: a lock kernels 0.17 wrote, used as it is -----------------------------


def test_download_uses_a_kernels_017_lock_as_it_is_checking_each_build_against_the_hub(
    hub_env, proxy, tmp_path, monkeypatch
) -> None:
    _world(hub_env, proxy, monkeypatch)
    project = write_project(tmp_path / "app", f'"{SHARED}" = 1\n"{UNIVERSAL}" = 1\n')
    theirs = run_hf(proxy, "lock", str(project))
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    path = project / "kernels.lock"
    written = path.read_bytes()
    downloaded = run_kernels("download", str(project))
    assert downloaded.returncode == 0, downloaded.stderr
    note = (f"warning: {path} was written by Hugging Face kernels 0.17: it pins commits but no variant hashes, so "
            "each build is checked against the Hub's listing at its commit")  # fmt: skip
    assert downloaded.stderr.count(note) == 1 and "run 'kernels lock' to convert it" in downloaded.stderr
    assert "2 variants present and verified (2 downloaded" in downloaded.stderr + downloaded.stdout
    assert path.read_bytes() == written  # used as it is, not converted
    commits = {repo_id: hub_env.repos[repo_id].branches["v1"] for repo_id in (SHARED, UNIVERSAL)}
    assert len(_files(_snapshot(SHARED, commits[SHARED]) / "build" / CPU_VARIANT)) > 1
    # What it placed is what kernels 0.17's own loader loads from the same cache, offline.
    loaded = run_hf_code(proxy, LOAD_WITH_017, str(path), UNIVERSAL, HF_HUB_OFFLINE="1")
    assert loaded["variant"] == UNIVERSAL_VARIANT
    # verify and sync --frozen use it the same way, and say so once.
    said = "was written by Hugging Face kernels 0.17: it pins commits but no variant hashes"
    for command in (("verify", "--require-cached"), ("sync", "--frozen")):
        result = run_kernels(*command, str(project))
        assert result.returncode == 0, (command, result.stdout, result.stderr)
        assert (result.stdout + result.stderr).count(said) == 1, (command, result.stdout, result.stderr)
    offline = run_kernels("verify", str(project), env={"HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 2 and "only with the Hub's listings, and HF_HUB_OFFLINE is set" in offline.stderr
    # `kernels lock --check` still says it would convert it.
    checked = run_kernels("lock", "--check", str(project))
    assert checked.returncode == 1 and path.read_bytes() == written


# kernels 0.17.2's load_kernel (the cache only, never the network): argv[1] the lock, argv[2] the repo id.
LOAD_WITH_017 = """
import json, pathlib, sys
from kernels import load_kernel
module = load_kernel(sys.argv[2], lockfile=pathlib.Path(sys.argv[1]))
print(json.dumps({"variant": module.VARIANT}))
"""


def test_download_of_a_kernels_017_lock_refuses_a_build_whose_files_miss_its_digest(
    hub_env, proxy, tmp_path, monkeypatch
) -> None:
    import dataclasses

    repo_id = "kernels-test/hf-beside-tampered"
    if repo_id not in hub_env.repos:
        spec = hf_repo(repo_id, (CPU_VARIANT,), digest="sha256")

        def tamper(variant, files):
            files = dict(files)
            files["__init__.py"] = dataclasses.replace(files["__init__.py"], data=b"print('planted')\n")
            return files

        hub_env.add_repo(dataclasses.replace(spec, releases=tuple(dataclasses.replace(r, tamper=tamper)
                                                                  for r in spec.releases)))  # fmt: skip
    _world(hub_env, proxy, monkeypatch)
    project = write_project(tmp_path / "app", f'"{repo_id}" = 1\n')
    theirs = run_hf(proxy, "lock", str(project))
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    refused = run_kernels("download", str(project))
    assert refused.returncode == 1, refused.stderr
    assert "does not match its digest" in refused.stderr and repo_id in refused.stderr
    commit = hub_env.repos[repo_id].branches["v1"]
    assert _files(_snapshot(repo_id, commit) / "build" / CPU_VARIANT) == ["metadata.json"]  # only kernels 0.17's


def test_a_project_requiring_signatures_still_refuses_a_kernels_017_lock(hub_env, proxy, tmp_path, monkeypatch) -> None:
    _world(hub_env, proxy, monkeypatch)
    project = write_project(tmp_path / "app", f'"{UNIVERSAL}" = 1\n')
    theirs = run_hf(proxy, "lock", str(project))
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    pyproject = project / "pyproject.toml"
    required = "[tool.kernels.trust]\nrequire-signatures = true\n"
    pyproject.write_text(pyproject.read_text().replace("[tool.kernels.trust]\n", required))
    for command in (("download",), ("sync", "--frozen")):
        refused = run_kernels(*command, str(project))
        assert refused.returncode == 1 and "refusing to download" in refused.stderr, (command, refused.stderr)
    verified = run_kernels("verify", "--json", str(project))
    assert verified.returncode == 1
    found = [(p["kind"], p["repo_id"]) for p in json.loads(verified.stdout)["problems"]]
    assert found == [("signature-missing", UNIVERSAL)]
    commit = hub_env.repos[UNIVERSAL].branches["v1"]
    assert _files(_snapshot(UNIVERSAL, commit) / "build" / UNIVERSAL_VARIANT) == ["metadata.json"]

"""What `kernels verify` and the loader make of a cached variant whose folder or manifest
was changed by hand: each difference is named once, nothing is hidden behind the first
odd entry, and an edited manifest neither trusts nor blames the files. Real files placed
by kernel-deps' own cache code, the command run in-process (tests/fixtures/cli.py)."""

from __future__ import annotations

import json
import locale
import os
import subprocess
import sys
from pathlib import Path

import kernel_deps
from kernel_deps.cache import store as cache
from kernel_deps.commands.verify import verify_project
from kernel_deps.lock.read import read_lock
from tests.fixtures.cached_project import COMMIT, REPO_ID, VARIANT
from tests.fixtures.cli import run_kernels


def _locked_hash(project: Path) -> str:
    return read_lock(project / "kernels.lock", purpose="use").lock.get(REPO_ID).variants[VARIANT].hash


def _check(project: Path) -> cache.VariantCheck:
    return cache.check_variant(REPO_ID, COMMIT, VARIANT, _locked_hash(project))


def _manifest(folder: Path) -> Path:
    return folder.parents[3] / ".kernel-deps" / COMMIT / f"{VARIANT}.json"


def test_a_file_copied_in_place_of_its_link_with_other_bytes_is_named_as_modified(cached) -> None:
    # Tools that copy instead of linking leave plain files: the manifest says what they must hash to.
    project, folder = cached
    ops = folder / "startup" / "_ops.py"
    ops.unlink()
    ops.write_bytes(b"OPS = ('planted',)\n")
    result = run_kernels("verify", str(project))
    assert result.returncode == 1
    assert "startup/_ops.py was modified" in result.stdout


def test_a_compiled_file_first_in_the_folder_does_not_hide_the_rest(cached) -> None:
    project, folder = cached
    (folder / "a.pyc").write_bytes(b"\0")  # not part of the hash, and walked before startup/
    assert _check(project).problems == ()
    (folder / "startup" / "_ops.py").unlink()
    (folder / "startup" / "_ops.py").write_bytes(b"OPS = ('planted',)\n")
    assert [(p.kind, p.path) for p in _check(project).problems] == [("modified", "startup/_ops.py")]


def test_a_broken_link_first_in_the_folder_is_one_problem_and_the_rest_is_still_checked(cached) -> None:
    project, folder = cached
    os.symlink("nowhere", folder / "a_link")
    assert _check(project).problems == (cache.FileProblem("not-a-file", "a_link"),)


def test_a_file_linked_outside_first_in_the_folder_is_one_problem_and_the_rest_is_still_checked(cached, tmp_path) -> None:
    project, folder = cached
    outside = tmp_path / "outside.py"
    outside.write_bytes(b"print('planted')\n")
    os.symlink(outside, folder / "a.py")
    assert _check(project).problems == (cache.FileProblem("outside-cache", "a.py", None, str(outside.resolve())),)


def test_a_locked_file_linked_outside_the_cache_is_reported_once_not_also_missing(cached, tmp_path) -> None:
    project, folder = cached
    ops = folder / "startup" / "_ops.py"
    outside = tmp_path / "outside.py"
    outside.write_bytes(ops.read_bytes())
    ops.unlink()
    os.symlink(outside, ops)
    assert _check(project).problems == (cache.FileProblem("outside-cache", "startup/_ops.py", None, str(outside.resolve())),)
    result = run_kernels("verify", str(project))
    assert result.returncode == 1
    assert "is missing" not in result.stdout


def test_a_manifest_edited_to_list_another_file_is_ignored_and_the_intact_files_pass(cached) -> None:
    project, folder = cached
    manifest = _manifest(folder)
    entries = json.loads(manifest.read_text())
    entries["files"]["startup/ghost.py"] = "0" * 40
    manifest.write_text(json.dumps(entries))
    assert run_kernels("verify", str(project)).returncode == 0
    assert _check(project).ok


def test_compiled_files_listed_in_a_manifest_are_not_required(cached) -> None:
    # They are no part of the locked hash, so such a manifest still matches the lock.
    project, folder = cached
    manifest = _manifest(folder)
    entries = json.loads(manifest.read_text())
    entries["files"]["startup/__pycache__/_ops.cpython-311.pyc"] = "0" * 40
    manifest.write_text(json.dumps(entries))
    result = run_kernels("verify", str(project))
    assert result.returncode == 0, result.stdout
    assert _check(project).problems == ()


def _first_load(project: Path, caught: str) -> str:
    """What a first load prints, in a process of its own: in this one an earlier test may have loaded the
    same repo and commit (the fixture's), which any later call is served from memory, verified then."""
    code = (f"import sys\nfrom kernel_deps import load_kernel\nfrom kernel_deps.core.errors import {caught}\n"
            f"try:\n    load_kernel(sys.argv[1], lockfile=sys.argv[2])\nexcept {caught} as exc:\n"
            "    print(exc)\nelse:\n    print('loaded')\n")  # fmt: skip
    src = str(Path(kernel_deps.__file__).resolve().parents[1])
    run = subprocess.run([sys.executable, "-c", code, REPO_ID, str(project / "kernels.lock")], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": src}, timeout=120)  # fmt: skip
    return run.stdout


def test_a_removed_file_without_a_manifest_is_a_partial_snapshot_not_cached(cached) -> None:
    # Every file left is a link to the blob its name says: another tool's partial snapshot
    # (or ours, its manifest gone) holds only some of the files, so it is not cached.
    project, folder = cached
    _manifest(folder).unlink()
    (folder / "startup" / "_ops.py").unlink()
    check = _check(project)
    assert (check.present, check.ok, check.problems) == (False, False, ())
    assert run_kernels("verify", str(project)).returncode == 0  # nothing of it is called modified
    required = run_kernels("verify", "--require-cached", str(project))
    assert required.returncode == 1 and f"{REPO_ID} {VARIANT}" in required.stdout and "not in the cache" in required.stdout
    assert "is not in the cache" in _first_load(project, "KernelNotCachedError")  # the fixture runs offline


def test_a_removed_file_beside_a_plain_copy_without_a_manifest_refuses_the_load_with_both_hashes(cached) -> None:
    # A plain file (a tool that copies instead of linking) cannot be checked on its own: the folder's
    # files then only hash to another value than the lock's, which is named with both hashes.
    project, folder = cached
    _manifest(folder).unlink()
    init = folder / "startup" / "__init__.py"
    data = init.read_bytes()
    init.unlink()
    init.write_bytes(data)
    (folder / "startup" / "_ops.py").unlink()
    check = _check(project)
    locked = _locked_hash(project)
    assert check.present and check.problems == (cache.FileProblem("hash-mismatch", ".", locked, check.actual_hash),)
    assert f"differ from kernels.lock: . hash-mismatch (expected {locked}, got sha256-" in _first_load(
        project, "KernelIntegrityError"
    )


def test_verify_reads_the_cache_it_is_given_not_the_default_one(cached, tmp_path, monkeypatch) -> None:
    project, _ = cached
    monkeypatch.setenv("KERNELS_CACHE", str(tmp_path / "empty-cache"))
    report = verify_project(project, cache_root=tmp_path / "cache")
    assert [(c.repo_id, c.variant, c.ok) for c in report.checked] == [(REPO_ID, VARIANT, True)]


def test_a_manifest_with_non_ascii_text_is_read_as_utf8_in_any_locale(cached) -> None:
    # A manifest rewritten by another tool may keep non-ASCII text raw; under an ASCII
    # locale it must still be read, so a removed file is named rather than only a hash.
    project, folder = cached
    manifest = _manifest(folder)
    entries = json.loads(manifest.read_text())
    entries["files"]["startup/__pycache__/café.cpython-311.pyc"] = "0" * 40  # not part of the hash
    manifest.write_text(json.dumps(entries, ensure_ascii=False), encoding="utf-8")
    (folder / "startup" / "_ops.py").unlink()
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        problems = _check(project).problems
    finally:
        locale.setlocale(locale.LC_CTYPE, before)
    assert [(p.kind, p.path) for p in problems] == [("missing", "startup/_ops.py")]


def test_the_legacy_huggingface_hub_cache_variable_still_names_the_cache(cached, tmp_path, monkeypatch) -> None:
    project, _ = cached
    for name in ("KERNELS_CACHE", "HF_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("HUGGINGFACE_HUB_CACHE", str(tmp_path / "cache"))
    result = run_kernels("verify", str(project), "--require-cached")
    assert result.returncode == 0, result.stdout
    assert "1 cached variant verified" in result.stdout

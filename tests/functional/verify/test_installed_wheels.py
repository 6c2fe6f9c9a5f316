"""Installed kernel wheels as the loader and `kernels verify` see them: found, checked, refused.

The wheel is written by ``kernels to-wheel`` from a project locked and cached without the
Hub, then unpacked into a folder on ``sys.path`` as an installer lays it out (the real
index and pip are in tests/functional/to_wheel/test_to_wheel.py), and the cache is emptied. Each load runs in
a process of its own, as an application would, so no test sees another's loaded module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.fixtures.cached_project import COMMIT, REPO_ID, VARIANT
from tests.fixtures.cli import run_kernels
from tests.fixtures.schemas import validated

SRC = Path(__file__).resolve().parents[3] / "src"
PACKAGE = "kernels_test_startup_o2"
LOAD = (
    "import sys; from kernel_deps import load_kernel; from kernel_deps.core.errors import KernelDepsError\n"
    "try:\n    m = load_kernel('kernels-test/startup', lockfile=sys.argv[1])\n"
    "except KernelDepsError as e:\n    print(e, file=sys.stderr); sys.exit(1)\n"
    "print(m.answer(), m.__kernel_origin__.path)\n"
)


@pytest.fixture
def site(cached, tmp_path) -> tuple[Path, Path]:
    """(project, the folder its kernel's wheel is installed in); the Hub cache left empty."""
    project, folder = cached
    wheels = tmp_path / "wheels"
    result = run_kernels("to-wheel", str(project), "-o", str(wheels))
    assert result.returncode == 0, result.stderr
    (wheel,) = wheels.glob("*.whl")
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    shutil.rmtree(os.environ["KERNELS_CACHE"])
    return project, target


def load(project: Path, target: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KERNELS_"))}
    env.update(HF_HUB_OFFLINE="1", KERNELS_CACHE=str(tmp_path / "empty"),
               PYTHONPATH=os.pathsep.join([str(SRC), str(target)]))  # fmt: skip
    return subprocess.run([sys.executable, "-c", LOAD, str(project / "kernels.lock")], env=env, capture_output=True,
                          text=True, cwd=tmp_path, timeout=120)  # fmt: skip


def record_path(target: Path) -> Path:
    (info,) = target.glob("*.dist-info")
    return info / "kernel_deps.json"


def test_a_build_of_the_older_layout_loads_from_its_installed_wheel(site, tmp_path) -> None:
    project, target = site
    result = load(project, target, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["42", str(target / PACKAGE)]
    assert (target / PACKAGE / "startup" / "__init__.py").is_file()  # the variant's files under the package


def rewrite(target: Path, change) -> None:
    """The record changed: a new text (or a function of the record), or "fifo" / "link:PATH"
    to put a FIFO or a symbolic link in its place."""
    path = record_path(target)
    if change == "fifo" or str(change).startswith("link:"):
        path.unlink()
        os.mkfifo(path) if change == "fifo" else path.symlink_to(change.removeprefix("link:"))
        return
    record = json.loads(path.read_text())
    path.write_text(change(record) if callable(change) else change)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("{not json", "is not a JSON document"),
        ('{"schema_version": 1, "schema_version": 1}', "is not a JSON document (has the key 'schema_version' twice"),
        (lambda r: json.dumps({**r, "files": {**r["files"], "../../evil.py": "0" * 40}}),
         "files: '../../evil.py' is not a safe"),
        (lambda r: json.dumps({**r, "files": {"startup/__init__.py": "zz"}}),
         "files['startup/__init__.py'] is not a git blob"),
        (lambda r: json.dumps({**r, "repo_id": "kernels-test/other"}), "names 'kernels-test/other'"),
        (lambda r: json.dumps([r]), "is not an object with schema_version 1"),
        # Never read whole, never waited on: a link to an endless device, a FIFO nobody writes.
        ("link:/dev/zero", "cannot be read (a character device, not a regular file)"),
        ("fifo", "cannot be read (a FIFO, not a regular file)"),
    ],
)
def test_a_hostile_record_is_never_trusted_and_is_named(site, tmp_path, change, reason) -> None:
    project, target = site
    rewrite(target, change)
    result = load(project, target, tmp_path)
    assert result.returncode == 1
    assert "is not in the cache" in result.stderr
    assert "not used: the installed wheel kernels-test-startup-o2" in result.stderr
    assert f"kernel_deps.json {reason}" in result.stderr and "Traceback" not in result.stderr


def test_a_record_whose_files_do_not_hash_to_the_lock_is_refused(site, tmp_path) -> None:
    project, target = site
    (target / PACKAGE / "startup" / "_ops.py").write_text("OPS = ('planted',)\n")
    from kernel_deps.core.hashing import git_blob_id

    planted = git_blob_id(b"OPS = ('planted',)\n")
    rewrite(target, lambda r: json.dumps({**r, "files": {**r["files"], "startup/_ops.py": planted}}))
    result = load(project, target, tmp_path)
    assert result.returncode == 1
    assert "refusing to load kernels-test/startup torch-universal" in result.stderr
    assert "kernel_deps.json hash-mismatch (expected sha256-" in result.stderr


def test_a_removed_installed_file_is_refused_naming_it(site, tmp_path) -> None:
    project, target = site
    (target / PACKAGE / "startup" / "_ops.py").unlink()
    result = load(project, target, tmp_path)
    assert result.returncode == 1 and "startup/_ops.py missing" in result.stderr


def test_a_wheel_of_another_commit_is_not_used(site, tmp_path) -> None:
    project, target = site
    rewrite(target, lambda r: json.dumps({**r, "commit": "f" * 40}))
    result = load(project, target, tmp_path)
    assert result.returncode == 1
    assert f"{REPO_ID} {VARIANT} at {COMMIT[:12]} is not in the cache" in result.stderr
    assert "not used" not in result.stderr


# -- kernels verify ----------------------------------------------------------------------


def test_verify_reports_the_installed_wheel_it_verified(site, monkeypatch) -> None:
    project, target = site
    monkeypatch.syspath_prepend(str(target))
    result = run_kernels("verify", str(project), "--require-cached", "--json")
    assert result.returncode == 0, result.stdout
    report = validated(result, "verify")
    assert report["schema_version"] == 4 and report["verified"] == []
    assert [(w["repo_id"], w["commit"], w["variant"], w["path"]) for w in report["wheels"]] == [
        (REPO_ID, COMMIT, VARIANT, str(target / PACKAGE))
    ]
    text = run_kernels("verify", str(project))
    assert "0 cached variants verified, 1 installed kernel wheel verified" in text.stdout


def test_verify_names_each_installed_file_that_differs(site, monkeypatch) -> None:
    project, target = site
    monkeypatch.syspath_prepend(str(target))
    (target / PACKAGE / "startup" / "_ops.py").write_text("OPS = ('planted',)\n")
    (target / PACKAGE / "startup" / "extra.py").write_text("")
    result = run_kernels("verify", str(project), "--json")
    assert result.returncode == 1
    problems = {(p["kind"], p["path"]) for p in validated(result, "verify")["problems"]}
    assert problems == {("wheel-modified", "startup/_ops.py"), ("wheel-extra", "startup/extra.py")}
    text = run_kernels("verify", str(project))
    assert "the installed wheel kernels-test-startup-o2 1.0.0 (" in text.stdout
    assert "startup/_ops.py was modified" in text.stdout
    assert "reinstall the wheels 'kernels to-wheel' writes" in text.stdout


def test_verify_flags_an_installed_wheel_of_a_commit_the_lock_does_not_pin(site, monkeypatch) -> None:
    project, target = site
    monkeypatch.syspath_prepend(str(target))
    rewrite(target, lambda r: json.dumps({**r, "commit": "f" * 40}))
    result = run_kernels("verify", str(project), "--json")
    assert result.returncode == 1
    (problem,) = validated(result, "verify")["problems"]
    assert (problem["kind"], problem["expected"], problem["got"]) == ("wheel-not-locked", COMMIT, "f" * 40)

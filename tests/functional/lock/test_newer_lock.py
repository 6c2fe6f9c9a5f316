"""A kernels.lock written by a newer kernel-deps (keys this version does not know) is read-only
here, as docs/locking.md, "A lock from a newer kernel-deps", says: every command that would
rewrite it, and verify, refuses with one line naming the lock and the keys and saying to
upgrade (never to relock), writing nothing; download, tree, export and the loader use its
pins with one warning saying the same."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from importlib.metadata import version
from kernel_deps.loader.api import StaleLockWarning, load_kernel
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project

ACTIVATION = "kernels-test/activation"
LOCKING = Path(__file__).resolve().parents[3] / "docs" / "locking.md"
KEYS = "('provenance', 'variants.*.size')"


def newer_lock(project: Path) -> bytes:
    """Give the project's lock an entry key and a variant key a later kernel-deps might write; its bytes."""
    entries = json.loads((project / "kernels.lock").read_text())
    entries[0]["provenance"] = {"builder": "kernel-builder 9"}
    for variant in entries[0]["variants"].values():
        variant["size"] = 4096
    (project / "kernels.lock").write_text(json.dumps(entries, indent=2) + "\n")
    return (project / "kernels.lock").read_bytes()


@pytest.fixture
def project(hub_env, tmp_path: Path) -> Path:
    """A project locked and downloaded, whose lock a newer kernel-deps then rewrote."""
    folder = write_project(tmp_path / "app", f'"{ACTIVATION}" = ">=1.2,<2"')
    assert run_kernels("lock", str(folder)).returncode == 0
    assert run_kernels("download", str(folder)).returncode == 0
    newer_lock(folder)
    return folder


def shown_in_docs(start: str) -> str:
    """The line of docs/locking.md's newer-lock section that starts with ``start``, this version's number in it."""
    section = LOCKING.read_text().split("### A lock from a newer kernel-deps")[1].split("\n## ")[0]
    line = next(line.strip() for line in section.splitlines() if line.strip().startswith(start))
    return re.sub(r"kernel-deps \d+\.\d+\.\d+ does", f"kernel-deps {version('kernel-deps')} does", line)


@pytest.mark.parametrize(
    "args",
    [
        ("lock",), ("lock", "--check"), ("lock", "--dry-run"), ("lock", "--upgrade"),
        ("add", "kernels-test/rotary"), ("remove", ACTIVATION),
        ("sync",), ("sync", "--locked"), ("sync", "--frozen"), ("verify",), ("verify", "--require-cached"),
    ],
    ids=" ".join,
)  # fmt: skip
def test_a_command_that_would_rewrite_it_or_vouch_for_it_refuses_and_says_to_upgrade(project: Path, args) -> None:
    lock_before = (project / "kernels.lock").read_bytes()
    pyproject_before = (project / "pyproject.toml").read_bytes()
    cache = Path(str(project.parent / "hf-cache"))
    cached_before = sorted(p.relative_to(cache) for p in cache.rglob("*"))

    result = run_kernels(*args, ".", cwd=project)

    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr == shown_in_docs("error: kernels.lock: written by a newer kernel-deps") + "\n"
    assert KEYS in result.stderr and "upgrade kernel-deps" in result.stderr
    assert "kernels lock" not in result.stderr and "relock" not in result.stderr
    assert (project / "kernels.lock").read_bytes() == lock_before  # what it cannot read is still there
    assert (project / "pyproject.toml").read_bytes() == pyproject_before
    assert sorted(p.relative_to(cache) for p in cache.rglob("*")) == cached_before  # nothing fetched either
    assert sorted(p.name for p in project.iterdir()) == ["kernels.lock", "pyproject.toml"]  # no journal left


@pytest.mark.parametrize(
    "args", [("download",), ("tree",), ("export", "--format", "kernels-0.17"), ("-q", "download")], ids=" ".join
)
def test_a_command_that_only_uses_the_pins_uses_them_with_one_warning(project: Path, args) -> None:
    lock_before = (project / "kernels.lock").read_bytes()

    result = run_kernels(*args, ".", cwd=project)

    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warned == [shown_in_docs("warning: kernels.lock was written by a newer kernel-deps")], result.stderr
    assert ACTIVATION in result.stdout or args[0] == "-q"
    assert (project / "kernels.lock").read_bytes() == lock_before


def test_the_json_of_a_command_that_uses_it_carries_the_warning_and_a_refusal_is_the_error_document(project) -> None:
    used = json.loads(run_kernels("download", "--json", ".", cwd=project).stdout)
    assert [w for w in used["warnings"] if "newer kernel-deps" in w] and KEYS in used["warnings"][0]
    refused = run_kernels("lock", "--json", ".", cwd=project)
    error = json.loads(refused.stdout)
    assert (refused.returncode, error["ok"], error["exit_code"]) == (2, False, 2)
    assert error["subject"] == "kernels.lock" and error["hint"].startswith("upgrade kernel-deps")


def test_the_loader_loads_the_pinned_build_with_one_warning(project: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = load_kernel(ACTIVATION, lockfile=project / "kernels.lock")
    assert module.__kernel_origin__.repo_id == ACTIVATION
    said = [str(w.message) for w in caught if issubclass(w.category, StaleLockWarning)]
    assert len(said) == 1 and "newer kernel-deps" in said[0] and KEYS in said[0] and "upgrade kernel-deps" in said[0]


def test_a_lock_with_known_keys_only_gets_no_word(hub_env, tmp_path: Path) -> None:
    folder = write_project(tmp_path / "app", f'"{ACTIVATION}" = ">=1.2,<2"')
    assert run_kernels("lock", str(folder)).returncode == 0
    for args in (("tree",), ("lock", "--check"), ("download",), ("verify",)):
        result = run_kernels(*args, ".", cwd=folder)
        assert result.returncode == 0 and "newer" not in result.stderr, (args, result.stderr)


def test_a_bad_value_of_a_known_key_is_still_bad_input_not_a_newer_lock(project: Path) -> None:
    entries = json.loads((project / "kernels.lock").read_text())
    for variant in entries[0]["variants"].values():
        variant["hash_type"] = "blake3"
    (project / "kernels.lock").write_text(json.dumps(entries, indent=2) + "\n")
    result = run_kernels("download", ".", cwd=project)
    assert result.returncode == 2 and "newer" not in result.stderr and "hash_type" in result.stderr, result.stderr

"""Both lock formats: ``kernels export`` writes the locks the Hugging Face ``kernels`` releases
read, each checked by that release's own reader, and ``kernels lock`` converts what they wrote.

The real kernels 0.16 and 0.17.2 code runs in subprocesses with the release on
``PYTHONPATH`` (installed beside kernel-deps); the locks come from the local olah Hub.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_deps.commands.lock import lock_project
from kernel_deps.lock.formats import to_kernels017
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import KernelRepo, Release
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.peers import READ_WITH_016, READ_WITH_017, WRITE_WITH_017, lock_with_kernels_016, run_peer
from tests.fixtures.projects import write_project

BASE = "kernels-test/export-base"
TOP = "kernels-test/export-top"


def cli(*args: str) -> CliResult:
    return run_kernels(*args)


def add_export_repos(hub_env) -> None:
    """TOP 1.0.0 depends on BASE in the Hugging Face form ``{"repo-id", "version": 1}``."""
    if BASE not in hub_env.repos:
        hub_env.add_repo(KernelRepo(BASE, (Release("1.0.0"), Release("1.1.0"), Release("2.0.0"))))
        hub_env.add_repo(KernelRepo(TOP, (Release("1.0.0", depends=((BASE, 1),)),)))  # type: ignore[arg-type]


@pytest.fixture
def project(hub_env, tmp_path):
    """A project locked against the Hub: a major (whose kernel depends on another, in the
    Hugging Face form ``{"repo-id", "version": 1}``), a PEP 440 range and a revision."""
    add_export_repos(hub_env)
    deps = f'"{TOP}" = 1\n"kernels-test/rotary" = ">=1,<2"\n"kernels-test/flash" = {{ revision = "v2" }}\n'
    return write_project(tmp_path / "app", deps, locked=True)


def test_the_kernels_017_export_is_read_by_kernels_017_itself(hub_env, project: Path, tmp_path: Path) -> None:
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    out = tmp_path / "exported.lock"
    result = cli("export", "--format", "kernels-0.17", "-o", str(out), str(project))
    assert result.returncode == 0, result.stderr
    assert result.stderr == f"Wrote {out} (kernels-0.17 format, 4 kernels)\n"
    assert out.read_text() == to_kernels017(lock)
    direct = [TOP, "kernels-test/rotary", "kernels-test/flash"]
    read = run_peer("0.17", READ_WITH_017, str(out), ",".join(direct), json.dumps([[BASE, 1]]))
    assert read["same_bytes"] is True  # laid out exactly as its own writer does
    assert read["top_level"] == {repo_id: lock.get(repo_id).sha for repo_id in direct}
    # The transitive kernel is found under the key its parent's metadata.json asks with.
    assert lock.get(BASE).sha == hub_env.repos[BASE].branches["v1"] and lock.get(BASE).requirement is None
    assert read["asked"] == {BASE: lock.get(BASE).sha}
    entries = json.loads(out.read_text())
    assert {"repo-id": "kernels-test/rotary", "revision": lock.get("kernels-test/rotary").version} in [
        e["dependency"] for e in entries
    ]  # a range kernels 0.17 cannot express: the locked tag
    # Without -o it goes to stdout, and the project's lock is left as it was.
    assert cli("export", "--format", "kernels-0.17", str(project)).stdout == to_kernels017(lock) + "\n"
    assert read_lock(project / "kernels.lock", purpose="use").lock == lock


def test_a_kernels_016_lock_is_exported_for_kernels_017_only_once_it_holds_the_transitive_kernels(
    hub_env, tmp_path: Path
) -> None:
    add_export_repos(hub_env)
    project = write_project(tmp_path / "app", f'"{TOP}" = 1\n')
    written = lock_with_kernels_016(project)  # by kernels 0.16 itself: TOP only, not the BASE it depends on
    assert [e["repo_id"] for e in json.loads(written)] == [TOP]
    out = tmp_path / "exported.lock"

    refused = cli("export", "--format", "kernels-0.17", "-o", str(out), str(project))
    assert refused.returncode == 2 and refused.stdout == ""
    (line,) = refused.stderr.splitlines()
    assert line.startswith(f"error: {project / 'kernels.lock'}: written by Hugging Face kernels <= 0.16")
    assert f"would lack whatever {TOP} depend on" in line and "run 'kernels lock' first" in line
    assert not out.exists() and (project / "kernels.lock").read_bytes() == written
    # Its own format holds what it locked: nothing is lost there.
    assert cli("export", "--format", "kernels-0.16", str(project)).returncode == 0

    assert cli("lock", str(project)).returncode == 0  # converts it, keeping TOP's pin, adding BASE
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    assert lock.get(TOP).sha == json.loads(written)[0]["sha"] and lock.get(BASE) is not None
    exported = cli("export", "--format", "kernels-0.17", "-o", str(out), str(project))
    assert exported.returncode == 0, exported.stderr
    read = run_peer("0.17", READ_WITH_017, str(out), TOP, json.dumps([[BASE, 1]]))
    assert read["same_bytes"] is True
    assert read["top_level"] == {TOP: lock.get(TOP).sha}
    assert read["asked"] == {BASE: lock.get(BASE).sha}  # what kernels 0.17 loads TOP's dependency by


def test_the_kernels_017_export_has_the_key_each_parent_asks_with(hub_env, tmp_path: Path) -> None:
    """A dependency locked under a tag (the project asks for a range) is still found by the
    major its parent's kernel-depends asks for, as kernels 0.17 looks it up."""
    add_export_repos(hub_env)
    project = write_project(tmp_path / "app", f'"{TOP}" = 1\n"{BASE}" = ">=1.0,<1.1"\n', locked=True)
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    assert lock.get(BASE).version == "v1.0.0"  # a tag, not the v1 branch (which is at v1.1.0)
    out = tmp_path / "exported.lock"
    assert cli("export", "--format", "kernels-0.17", "-o", str(out), str(project)).returncode == 0
    read = run_peer("0.17", READ_WITH_017, str(out), f"{TOP},{BASE}", json.dumps([[BASE, 1]]))
    assert read["same_bytes"] is True
    assert read["asked"] == {BASE: lock.get(BASE).sha}


@pytest.mark.parametrize("fmt", ["ours", "kernels-0.16"])
def test_kernels_016_reads_our_lock_and_its_export(project: Path, tmp_path: Path, fmt: str) -> None:
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    path = project / "kernels.lock"
    if fmt != "ours":
        path = tmp_path / "exported.lock"
        assert cli("export", "--format", fmt, "-o", str(path), str(project)).returncode == 0
        assert all(set(e) == {"repo_id", "sha", "variants"} for e in json.loads(path.read_text()))
    read = run_peer("0.16", READ_WITH_016, str(path), ",".join(k.repo_id for k in lock.kernels))
    assert read == {**{k.repo_id: k.sha for k in lock.kernels}, "entries": len(lock.kernels)}


def test_kernels_lock_converts_a_kernels_017_lock_keeping_its_pins(hub_env, tmp_path: Path) -> None:
    flash = hub_env.repos["kernels-test/flash"]
    project = write_project(tmp_path / "app", '"kernels-test/flash" = 1\n')
    # kernels 0.17.2 writes the lock, pinning v1 at its first commit (the branch has moved on since).
    run_peer("0.17", WRITE_WITH_017, str(project / "kernels.lock"), json.dumps([["kernels-test/flash", 1, flash.commits["1.0.0"]]]))
    assert flash.branches["v1"] != flash.commits["1.0.0"]

    dry = cli("lock", "--dry-run", str(project))
    assert dry.returncode == 0 and dry.stdout.startswith("Would convert kernels.lock from the Hugging Face kernels 0.17")
    result = cli("lock", str(project))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "Converted kernels.lock from the Hugging Face kernels 0.17 format to kernel-deps' "
        "(its pins are kept; 'kernels export' writes the old format again)"
    )
    assert read_lock(project / "kernels.lock", purpose="use").lock.get("kernels-test/flash").sha == flash.commits["1.0.0"]
    # Converted once: the next run has nothing to say.
    assert lock_project(project).converted_from is None


def test_kernels_lock_says_it_converts_a_kernels_016_lock(hub_env, project: Path) -> None:
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    legacy = [{"repo_id": k.repo_id, "sha": k.sha, "variants": {n: {"hash": v.hash, "hash_type": v.hash_type} for n, v in k.variants.items()}} for k in lock.kernels]
    (project / "kernels.lock").write_text(json.dumps(legacy, indent=2))
    result = cli("lock", str(project))
    assert result.returncode == 0 and "from the Hugging Face kernels <= 0.16 format" in result.stdout.splitlines()[0]
    assert {k.repo_id: k.sha for k in read_lock(project / "kernels.lock", purpose="use").lock.kernels} == {k.repo_id: k.sha for k in lock.kernels}


def test_export_bad_input_is_one_line_and_writes_nothing(project: Path, tmp_path: Path) -> None:
    out = tmp_path / "never.lock"
    unknown = cli("export", "--format", "kernels-9", "-o", str(out), str(project))
    assert unknown.returncode == 2 and unknown.stderr == (
        "error: unknown export format 'kernels-9'; use one of kernels-0.16, kernels-0.17, pylock\n"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = cli("export", "--format", "kernels-0.17", "-o", str(out), str(empty))
    assert missing.returncode == 2 and len(missing.stderr.splitlines()) == 1 and str(empty / "kernels.lock") in missing.stderr
    (empty / "kernels.lock").write_text(to_kernels017(read_lock(project / "kernels.lock", purpose="use").lock))
    theirs = cli("export", "--format", "kernels-0.16", "-o", str(out), str(empty))
    assert theirs.returncode == 2 and "run 'kernels lock' to convert it" in theirs.stderr
    assert not out.exists()


def test_export_writes_through_no_link(project: Path, tmp_path: Path) -> None:
    """A checkout can commit the export's file as a link to a file of the user's: refused."""
    bashrc = tmp_path / ".bashrc"
    bashrc.write_text("export PATH=$HOME/bin:$PATH\n")
    out = tmp_path / "kernels-017.lock"
    out.symlink_to(bashrc)
    result = cli("export", "--format", "kernels-0.17", "-o", str(out), str(project))
    assert result.returncode == 2 and "is a symbolic link" in result.stderr and len(result.stderr.splitlines()) == 1
    assert bashrc.read_text() == "export PATH=$HOME/bin:$PATH\n" and out.is_symlink()

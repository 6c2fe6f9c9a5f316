"""`kernels add` / `kernels remove` change pyproject.toml and kernels.lock as one.

A kill at any moment, during resolution over a slow Hub or while the files are replaced,
leaves both files old or both new once the next command that writes the project has run;
links to pyproject.toml are written through to the file they point at. The journal such a
kill leaves is input like any file in a checkout: commands that only read report it and
apply nothing, and a command that writes applies it only when it proves to be an
interrupted edit of the project's own two files. Only the killed commands run in a
process of their own; the others run in-process (tests/fixtures/cli.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kernel_deps import load_kernel
from kernel_deps.build_hooks import lock_for_build
from kernel_deps.commands.edit import edit_and_relock
from kernel_deps.core.errors import PendingEditError
from kernel_deps.core.settings import EDIT_JOURNAL_NAME, EDIT_LOCK_NAME
from kernel_deps.project.pyproject import read_requirements
from kernel_deps.project.toml_edit import add_requirement
from tests.fixtures.cli import run_kernels
from tests.fixtures.processes import KERNELS, sigint_as_in_a_terminal
from tests.fixtures.projects import write_project

ROTARY, ADDED = "kernels-test/rotary", "kernels-test/activation"


def make_project(root: Path) -> Path:
    return write_project(root / "app", f'"{ROTARY}" = ">=1,<2"', locked=True)


def state(project: Path) -> tuple[bytes, bytes]:
    return (project / "pyproject.toml").read_bytes(), (project / "kernels.lock").read_bytes()


def digest(data: bytes | None) -> str | None:
    return None if data is None else "sha256:" + hashlib.sha256(data).hexdigest()


def write_journal(project: Path, texts: dict[str, str], before: dict[str, bytes | None] | None = None) -> Path:
    """A journal as `kernels add` writes it at its commit point: for each file, what it held
    (``before``, default: what it holds now) and its new text."""
    def held(name: str) -> bytes | None:
        path = project / name
        return path.read_bytes() if path.exists() else None

    before = before if before is not None else {name: held(name) for name in texts}
    files = [{"name": name, "before": digest(before[name]), "text": text} for name, text in texts.items()]
    journal = project / EDIT_JOURNAL_NAME
    journal.write_text(json.dumps({"kernel-deps-edit": 1, "files": files}))
    return journal


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_killed_add_leaves_both_files_old_or_both_new(hub_env, proxy, tmp_path, sig) -> None:
    project = make_project(tmp_path / "template")
    old = state(project)
    done = shutil.copytree(project, tmp_path / "reference")
    assert run_kernels("add", f"{ADDED}>=1,<2", str(done)).returncode == 0
    new = state(done)
    assert new != old

    proxy.latency = 0.1  # resolution takes several round trips: kills land in it, and after
    env = {**os.environ, "HF_ENDPOINT": proxy.url}
    outcomes = set()
    for i, delay in enumerate([0.2, 0.5, 0.9, 1.3, 1.8, 2.5, 3.5, 6.0]):
        trial = shutil.copytree(project, tmp_path / f"trial-{i}")
        process = subprocess.Popen([KERNELS, "add", f"{ADDED}>=1,<2", str(trial)], env=env, preexec_fn=sigint_as_in_a_terminal,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(delay)
        os.killpg(process.pid, sig)
        process.wait(timeout=60)
        finished = run_kernels("lock", str(trial))  # the next command writing the project finishes a committed change
        assert finished.returncode == 0, finished.stderr
        after = state(trial)
        assert after in (old, new), f"a kill after {delay} s left a mix"
        assert not (trial / EDIT_JOURNAL_NAME).exists() and not (trial / EDIT_LOCK_NAME).exists()
        outcomes.add(after == new)
    assert outcomes == {False, True}, "the kills should land both before and after the change"


def test_a_committed_change_is_reported_by_readers_and_finished_by_the_next_writer(hub_env, tmp_path) -> None:
    """What a kill between the commit point and the file replacements leaves behind."""
    project = make_project(tmp_path)
    old = state(project)
    reference = shutil.copytree(project, tmp_path / "reference")
    edit_and_relock(reference, lambda text: add_requirement(text, ADDED, ">=1,<2", source="pyproject.toml"))
    new = state(reference)
    # The journal names both files with their old states and new texts; only the lock was replaced yet.
    journal = write_journal(project, {"pyproject.toml": new[0].decode(), "kernels.lock": new[1].decode()})
    (project / "kernels.lock").write_bytes(new[1])

    check = run_kernels("lock", "--check", str(project))
    assert check.returncode == 1 and check.stderr.count("\n") == 1
    assert f"{journal}: an edit of pyproject.toml and kernels.lock is pending" in check.stderr
    assert f"run 'kernels lock {project}' to finish" in check.stderr
    assert state(project) == (old[0], new[1]) and journal.exists()

    finished = run_kernels("lock", str(project))
    assert finished.returncode == 0, finished.stderr
    assert f"finished an interrupted edit of pyproject.toml and kernels.lock recorded in {journal}" in finished.stderr
    assert state(project) == new and not journal.exists()
    assert run_kernels("lock", "--check", str(project)).returncode == 0


def planted_checkout(tmp_path: Path) -> tuple[Path, Path]:
    """A checkout whose pull request added a journal: other texts for both files, and a conftest.py."""
    project = make_project(tmp_path)
    emptied = "[project]\nname = \"app\"\nversion = \"0.1.0\"\n\n[tool.kernels.dependencies]\n"
    journal = write_journal(project, {"pyproject.toml": emptied, "kernels.lock": "[]\n"})
    record = json.loads(journal.read_text())
    record["files"].append({"name": "conftest.py", "before": None, "text": "import os\nos.system('echo owned')\n"})
    journal.write_text(json.dumps(record))
    return project, journal


READ_ONLY = [
    ("lock", "--check"), ("lock", "--dry-run"), ("verify",), ("tree",), ("outdated",),
    ("export", "--format", "kernels-0.17"), ("download",),
]


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: " ".join(c))
def test_a_planted_journal_is_reported_by_each_read_only_command_and_applied_by_none(hub_env, tmp_path, command) -> None:
    project, journal = planted_checkout(tmp_path)
    committed = state(project)
    result = run_kernels(*command, str(project))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{journal}: an edit of pyproject.toml and kernels.lock is pending" in result.stderr
    assert "up to date" not in result.stdout + result.stderr
    assert state(project) == committed and journal.exists()
    assert not (project / "conftest.py").exists() and not (project / EDIT_LOCK_NAME).exists()


def test_the_loader_and_the_build_hooks_refuse_a_lock_with_a_journal_beside_it(hub_env, tmp_path, monkeypatch) -> None:
    project, journal = planted_checkout(tmp_path)
    committed = state(project)
    monkeypatch.chdir(project)
    with pytest.raises(PendingEditError, match=f"^{journal}: an edit of pyproject.toml and kernels.lock is pending"):
        load_kernel(ROTARY)  # the project's lock, found from the working directory
    with pytest.raises(PendingEditError, match="is pending"):
        load_kernel(ROTARY, lockfile=project / "kernels.lock")
    with pytest.raises(PendingEditError, match="is pending"):  # a build never writes the project: it refuses
        lock_for_build(project)
    assert state(project) == committed and not (project / "conftest.py").exists()


def test_a_journal_naming_another_file_is_refused_by_commands_that_write(hub_env, tmp_path) -> None:
    project, journal = planted_checkout(tmp_path)
    committed = state(project)
    for command in (("lock",), ("add", f"{ADDED}>=1,<2"), ("remove", ROTARY)):
        result = run_kernels(*command, str(project))
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert f"{journal}: refused, not an interrupted edit of kernels.lock and pyproject.toml " in result.stderr
        assert "it names 'conftest.py'; an edit journal may name only kernels.lock and pyproject.toml" in result.stderr
        assert "it was left in place: check kernels.lock and pyproject.toml, then delete it" in result.stderr
        assert state(project) == committed and journal.exists() and not (project / "conftest.py").exists()


@pytest.mark.parametrize("which", ["pyproject.toml", "kernels.lock"])
def test_a_journal_not_matching_the_files_it_names_is_refused_and_left(hub_env, tmp_path, which) -> None:
    """Texts recorded as changing files that held something else: not an edit of these files."""
    project = make_project(tmp_path)
    committed = state(project)
    before = {"pyproject.toml": committed[0], "kernels.lock": committed[1], which: b"something else\n"}
    texts = {"pyproject.toml": "[tool.kernels.dependencies]\n", "kernels.lock": "[]\n"}
    journal = write_journal(project, texts, before)
    result = run_kernels("lock", str(project))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"{journal}: refused" in result.stderr
    assert f"({which} holds neither what it held before that edit nor what the edit writes)" in result.stderr
    assert state(project) == committed and journal.exists()


@pytest.mark.parametrize("where", ["pyproject.toml", "kernels.lock"])
def test_a_journal_is_not_finished_through_a_link(hub_env, tmp_path, where) -> None:
    """A link committed in a checkout could lead the journal's text to any file whose content is known."""
    project = make_project(tmp_path)
    target = tmp_path / "known.txt"
    target.write_bytes((project / where).read_bytes())
    (project / where).unlink()
    (project / where).symlink_to(target)
    journal = write_journal(project, {where: "planted\n"})
    result = run_kernels("lock", str(project))
    assert result.returncode == 2
    assert f"({where} is a link; an interrupted edit is finished only in plain files)" in result.stderr
    assert target.read_text() != "planted\n" and journal.exists()


def test_an_unreadable_journal_is_one_line_and_changes_nothing(hub_env, tmp_path) -> None:
    project = make_project(tmp_path)
    old = state(project)
    journal = project / EDIT_JOURNAL_NAME
    for text, reason in [
        ("{not json", "not valid JSON (line 1 column 2"),
        ("[" * 100_000 + "]" * 100_000, "nested more than 64 deep"),
        (json.dumps({"files": [{"name": "kernels.lock", "text": "[]"}]}), "not a journal of this kernel-deps"),
    ]:
        journal.write_text(text)
        assert run_kernels("verify", str(project)).returncode == 1  # it only reads: the journal is not even opened
        result = run_kernels("lock", str(project))
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        refused = f"{journal}: refused, not an interrupted edit of kernels.lock and pyproject.toml ({reason}"
        assert refused in result.stderr
        assert state(project) == old and journal.exists()


@pytest.mark.parametrize("name", ["../outside.txt", "/tmp/kernel-deps-journal-target", "sub/file", "..", "conftest.py"])
def test_a_journal_naming_a_file_elsewhere_writes_nothing(hub_env, tmp_path, name) -> None:
    """A journal may only name the project's own two files."""
    project = make_project(tmp_path)
    old = state(project)
    (project / EDIT_JOURNAL_NAME).write_text(json.dumps(
        {"kernel-deps-edit": 1, "files": [{"name": name, "before": None, "text": "planted"}]}
    ))
    result = run_kernels("lock", str(project))
    assert result.returncode == 2 and f"it names {name!r}; an edit journal may name only" in result.stderr
    assert state(project) == old
    assert not (tmp_path / "outside.txt").exists() and not Path("/tmp/kernel-deps-journal-target").exists()
    assert not (project / "conftest.py").exists()


def test_add_and_remove_write_through_a_symlinked_pyproject(hub_env, tmp_path) -> None:
    project = make_project(tmp_path)
    real = tmp_path / "shared-pyproject.toml"
    (project / "pyproject.toml").rename(real)
    (project / "pyproject.toml").symlink_to(real)
    assert run_kernels("add", f"{ADDED}>=1,<2", str(project)).returncode == 0
    assert (project / "pyproject.toml").is_symlink()
    assert ADDED in real.read_text()
    assert {r.repo_id for r in read_requirements(project)} == {ROTARY, ADDED}
    # A failed add (no such kernel) leaves the link and its target as they were.
    before = real.read_bytes()
    failed = run_kernels("add", "kernels-test/no-such-kernel>=1", str(project))
    assert failed.returncode == 1
    assert (project / "pyproject.toml").is_symlink() and real.read_bytes() == before
    assert run_kernels("remove", ADDED, str(project)).returncode == 0
    assert (project / "pyproject.toml").is_symlink() and ADDED not in real.read_text()


def test_add_writes_through_a_hard_linked_pyproject(hub_env, tmp_path) -> None:
    project = make_project(tmp_path)
    other = tmp_path / "other-name.toml"
    os.link(project / "pyproject.toml", other)
    assert run_kernels("add", f"{ADDED}>=1,<2", str(project)).returncode == 0
    assert os.stat(other).st_ino == os.stat(project / "pyproject.toml").st_ino
    assert ADDED in other.read_text()


def test_a_planted_link_in_place_of_the_edit_lock_is_refused_and_never_opened(hub_env, tmp_path) -> None:
    project = make_project(tmp_path)
    committed = state(project)
    target = tmp_path / "someone-elses-file"
    target.write_text("keep me\n")
    (project / EDIT_LOCK_NAME).symlink_to(target)
    result = run_kernels("add", f"{ADDED}>=1,<2", str(project))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"{project / EDIT_LOCK_NAME}: a symbolic link; kernel-deps locks a project with a plain file there" in result.stderr
    assert target.read_text() == "keep me\n" and state(project) == committed

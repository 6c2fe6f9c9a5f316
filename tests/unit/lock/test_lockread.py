"""kernel_deps.lock.read: the one lock reader tells a file's format once, and every consumer gets its answer.

Locks are written by their real writers: ``kernels lock`` for ours, the Hugging Face
``kernels`` 0.16 and 0.17.2 code (in subprocesses, installed beside kernel-deps) for
theirs, against the local Hub. Each consumer is then run as a user runs it: the CLI for
the commands, ``load_kernel`` for the loader, ``lock_for_build`` for the build hooks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernel_deps import load_kernel
from kernel_deps.build_hooks import StaleLockError, lock_for_build
from kernel_deps.commands.lock import LockMode, lock_project
from kernel_deps.commands.verify import verify_project
from kernel_deps.core.errors import LockfileError, PendingEditError
from kernel_deps.core.settings import EDIT_JOURNAL_NAME
from kernel_deps.lock.model import Lockfile
from kernel_deps.lock.entries import LockedPin
from kernel_deps.lock.read import FORMATS, PURPOSES, WRITTEN_BY, lock_format, parse_lock, read_lock
from kernel_deps.project.pyproject import read_project
from tests.fixtures.builder import KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.locks import SHA_A, entries_with, example_text
from tests.fixtures.peers import WRITE_WITH_017, lock_with_kernels_016, run_peer

ROTARY = "kernels-test/rotary"
# Every command that uses a lock as it is and cannot fetch what a kernels 0.17 lock lacks, and its arguments
# (download, sync and verify hash its builds from the Hub: tests/functional/project/test_hf_kernels_beside.py).
USE_COMMANDS = [
    ("tree",),
    ("outdated",),
    ("export", "--format", "kernels-0.16"),
]


def written_by_kernels_017(project: Path, pins: list[tuple[str, int, str]]) -> bytes:
    """The project's kernels.lock as kernels 0.17.2 itself writes it; its bytes."""
    run_peer("0.17", WRITE_WITH_017, str(project / "kernels.lock"), json.dumps(pins))
    return (project / "kernels.lock").read_bytes()


# --- the format, told once ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ([], "kernel-deps"),
        (json.loads(example_text()), "kernel-deps"),
        ([{k: v for k, v in e.items() if k in ("repo_id", "sha", "variants")} for e in entries_with()], "kernels-0.16"),
        ([entries_with()[0], {k: v for k, v in entries_with()[1].items() if k != "dependencies"}], "kernels-0.16"),
        ([{"dependency": {"repo-id": "a/b", "version": 1}, "lock": {"commit": SHA_A}}], "kernels-0.17"),
        ([{"lock": {"commit": SHA_A}}], "kernels-0.17"),  # told by its first entry, then read strictly
    ],
    ids=["empty", "ours", "kernels-0.16", "one-entry-without-dependencies", "kernels-0.17", "kernels-0.17-partial"],
)
def test_the_format_is_told_from_the_entries(entries: list, expected: str) -> None:
    assert lock_format(entries) == expected
    assert set(FORMATS) == set(WRITTEN_BY) and WRITTEN_BY["kernel-deps"] is None


def test_our_lock_is_one_answer_for_every_purpose(hub_env, tmp_path: Path) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = 1\n', locked=True)
    path = project / "kernels.lock"
    reads = [read_lock(path, purpose=purpose) for purpose in PURPOSES]
    lock = Lockfile.from_json(path.read_text())
    for found in reads:
        assert (found.source, found.format, found.written_by) == (str(path), "kernel-deps", None)
        assert found.lock == lock and found.raw == path.read_bytes()
        assert found.pins == {ROTARY: LockedPin(commit=hub_env.repos[ROTARY].branches["v1"], version="v1")}
    assert parse_lock(path.read_text(), source="embedded", purpose="load").lock == lock
    # Each consumer takes it as ours: no conversion, no foreign-lock notice, embedded as it is without a warning.
    assert lock_project(project, mode=LockMode.RESOLVE).converted_from is None
    assert [n.kind for n in verify_project(project).notices] == []
    assert lock_for_build(project).warnings == () and lock_for_build(project).text == path.read_text()


def test_a_kernels_016_lock_from_kernels_016_itself_is_named_alike_by_every_consumer(hub_env, tmp_path: Path) -> None:
    repo_id = "kernels-test/lockread-016"  # its own repo: modules stay loaded per process
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"),)))
    project = write_project(tmp_path / "app", f'"{repo_id}" = 1\n')
    written = lock_with_kernels_016(project)
    path = project / "kernels.lock"
    commit = hub_env.repos[repo_id].branches["v1"]
    for purpose in PURPOSES:
        found = read_lock(path, purpose=purpose)
        assert (found.format, found.written_by) == ("kernels-0.16", "Hugging Face kernels <= 0.16")
        assert found.lock.get(repo_id).sha == commit and found.lock.get(repo_id).dependencies == ()
        assert found.pins == {repo_id: LockedPin(commit=commit, version=None)} and found.raw == written
    name = WRITTEN_BY["kernels-0.16"]
    assert lock_project(project, mode=LockMode.RESOLVE).converted_from == name
    verified = verify_project(project)
    assert [(n.kind, dict(n.facts)) for n in verified.notices] == [("foreign-lock", {"lock": str(path), "written_by": name})]
    # It records no version, so it cannot show that its pin meets `= 1`: every consumer says so.
    assert [(p.kind, p.repo_id) for p in verified.problems] == [("version-not-recorded", repo_id)]
    with pytest.raises(StaleLockError, match=f"{repo_id}: kernels.lock \\(written by {re.escape(name)}\\) pins "
                       f"commit {commit[:12]} but records no version for it"):  # fmt: skip
        lock_for_build(project)
    refused = run_kernels("export", "--format", "kernels-0.17", str(project))
    assert refused.returncode == 2 and refused.stderr.startswith(f"error: {path}: written by {name}, ")
    assert path.read_bytes() == written  # read by all of them, rewritten by none


def test_a_kernels_017_lock_from_kernels_017_itself_is_refused_alike_by_every_user_and_read_as_pins_by_lock(
    hub_env, tmp_path: Path
) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = 1\n')
    commit = hub_env.repos[ROTARY].branches["v1"]
    written = written_by_kernels_017(project, [(ROTARY, 1, commit)])
    path = project / "kernels.lock"
    message = (
        f"{path}: written by Hugging Face kernels 0.17, which records commits but no variant hashes, so nothing "
        "could be verified against it; run 'kernels lock' to convert it (its pins are kept)"
    )
    for command in USE_COMMANDS:
        result = run_kernels(*command, str(project))
        assert (result.returncode, result.stdout, result.stderr) == (2, "", f"error: {message}\n"), command
    # load_kernel, which never uses the network, cannot check the cache against commits alone.
    with pytest.raises(LockfileError) as caught:
        load_kernel(ROTARY, lockfile=path)
    assert str(caught.value) == (
        f"{path}: written by Hugging Face kernels 0.17, which records commits but no variant hashes, so the cached "
        "files can be checked against it only with the Hub's listings, and load_kernel never uses the network; run "
        "'kernels lock' to convert it (its pins are kept), or load with get_locked_kernel, which checks each build "
        "against the Hub's listing"
    )
    with pytest.raises(LockfileError) as caught:
        read_lock(path, purpose="use")
    assert str(caught.value) == message
    # `kernels lock` keeps its pins (under the branch its major names), the build hooks carry it as it is,
    # the loader gets its pins (docs/hf-kernels.md).
    for purpose in ("lock", "embed", "load"):
        found = read_lock(path, purpose=purpose)
        assert (found.format, found.lock, found.raw) == ("kernels-0.17", None, written)
        assert found.pins == {ROTARY: LockedPin(commit=commit, version="v1")}
    outcome = lock_project(project, mode=LockMode.RESOLVE)
    assert outcome.converted_from == WRITTEN_BY["kernels-0.17"] and outcome.lock.get(ROTARY).sha == commit
    built = lock_for_build(project)
    assert built.text == written.decode() and built.warnings[0].startswith(f"{path} was written by Hugging Face kernels 0.17;")
    assert path.read_bytes() == written


MALFORMED_017 = [
    [{"dependency": {"repo-id": "a/b", "version": 1}, "lock": {"commit": "abc"}}],
    [{"dependency": {"repo-id": "a/b", "version": 1, "revision": "main"}, "lock": {"commit": SHA_A}}],
]


@pytest.mark.parametrize("entries", MALFORMED_017, ids=["bad-commit", "version-and-revision"])
def test_a_malformed_kernels_017_lock_is_one_message_for_lock_and_the_build_hooks(tmp_path: Path, entries) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = 1\n')
    path = project / "kernels.lock"
    path.write_text(json.dumps(entries))
    messages = []
    for purpose in ("lock", "embed"):
        with pytest.raises(LockfileError) as caught:
            read_lock(path, purpose=purpose)
        messages.append(str(caught.value))
    with pytest.raises(LockfileError) as caught:
        lock_for_build(project)
    messages.append(str(caught.value))
    checked = run_kernels("lock", "--check", str(project), env={"HF_HUB_OFFLINE": "1"})
    assert checked.returncode == 2
    messages.append(checked.stderr.removeprefix("error: ").rstrip("\n"))
    assert len(set(messages)) == 1 and messages[0].startswith(f"{path}: ") and "(kernels 0.17 lock)" in messages[0]


# --- what every read refuses ------------------------------------------------------------------


def test_a_pending_edit_is_refused_by_every_purpose_with_one_message(hub_env, tmp_path: Path) -> None:
    project = write_project(tmp_path / "app", f'"{ROTARY}" = 1\n', locked=True)
    path = project / "kernels.lock"
    assert read_lock(path, purpose="load").lock is not None  # read once: a later read is refused all the same
    journal = project / EDIT_JOURNAL_NAME
    journal.write_text("{}")
    messages = set()
    for purpose in PURPOSES:
        with pytest.raises(PendingEditError) as caught:
            read_lock(path, purpose=purpose)
        messages.add(str(caught.value))
    with pytest.raises(PendingEditError) as caught:
        load_kernel(ROTARY, lockfile=path)
    messages.add(str(caught.value))
    # A lock judged without writing, from requirements given in code, never reads a lock mid-edit either.
    requirements, targets = read_project_after(journal, project)
    with pytest.raises(PendingEditError) as caught:
        lock_project(project, mode=LockMode.RESOLVE, requirements=requirements, targets=targets)
    messages.add(str(caught.value))
    (message,) = messages
    assert message.startswith(f"{journal}: an edit of pyproject.toml and kernels.lock is pending")
    assert journal.read_text() == "{}"  # applied by none


def read_project_after(journal: Path, project: Path):
    """The project's requirements and targets, read while ``journal`` is set aside."""
    aside = journal.rename(journal.with_suffix(".aside"))
    try:
        return read_project(project)
    finally:
        aside.rename(journal)


def test_a_missing_lock_is_none_for_lock_and_an_error_for_every_other_purpose(tmp_path: Path) -> None:
    path = tmp_path / "kernels.lock"
    assert read_lock(path, purpose="lock") is None
    for purpose in ("use", "load", "embed"):
        with pytest.raises(LockfileError) as caught:
            read_lock(path, purpose=purpose)
        assert str(caught.value) == f"{path}: not found; run 'kernels lock' to create it"


def test_the_loader_parses_a_lock_again_only_once_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "kernels.lock"
    path.write_text(example_text())
    first = read_lock(path, purpose="load")
    assert read_lock(path, purpose="load") is first
    assert read_lock(path, purpose="use") is not first  # a command reads the file it is given
    path.write_text(json.dumps([{"dependency": {"repo-id": "a/b", "version": 1}, "lock": {"commit": SHA_A}}]))
    changed = read_lock(path, purpose="load")  # a kernels 0.17 lock: its pins, which the loader judges
    assert changed is not first and changed.format == "kernels-0.17" and changed.lock is None


# --- moved from test_lockfile: the reader's file errors ---------------------------------------


def test_read_lock(tmp_path: Path) -> None:
    path = tmp_path / "kernels.lock"
    path.write_text(example_text(), encoding="utf-8")
    assert read_lock(path, purpose="use").lock == Lockfile.from_json(example_text())


def test_read_lock_problems_are_lockfile_errors(tmp_path: Path) -> None:
    missing = tmp_path / "kernels.lock"
    with pytest.raises(LockfileError, match=r"kernels\.lock: not found; run 'kernels lock'"):
        read_lock(missing, purpose="use")
    missing.mkdir()
    with pytest.raises(LockfileError, match="cannot read"):
        read_lock(missing, purpose="use")
    binary = tmp_path / "binary.lock"
    binary.write_bytes(b'[{"repo_id": "\xff"}]')
    with pytest.raises(LockfileError, match="not UTF-8"):
        read_lock(binary, purpose="use")
    broken = tmp_path / "broken.lock"
    broken.write_text(json.dumps(entries_with(sha="abc")))
    with pytest.raises(LockfileError, match=rf"^{str(broken)}: invalid commit 'abc' in '\[1\].sha'"):
        read_lock(broken, purpose="use")


def test_a_pin_pyproject_no_longer_allows_is_named_by_every_consumer_whichever_tool_wrote_the_lock(
    hub_env, tmp_path: Path
) -> None:
    from kernel_deps import get_locked_kernel
    from kernel_deps.loader.api import StaleLockWarning

    repo_id = "kernels-test/lockread-agree"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("2.0.0"))))
    project = write_project(tmp_path / "app", f'"{repo_id}" = ">=1,<2"\n')
    assert run_kernels("lock", str(project)).returncode == 0
    path = project / "kernels.lock"
    ours = path.read_bytes()
    formats = {}
    for name in ("kernels-0.16", "kernels-0.17"):
        out = tmp_path / f"{name}.lock"
        assert run_kernels("export", "--format", name, "-o", str(out), str(project)).returncode == 0
        formats[name] = out.read_bytes()
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('">=1,<2"', '">=2"'))  # the pin v1.0.0 no longer fits

    for name, text in (("kernel-deps", ours), ("kernels-0.16", formats["kernels-0.16"])):
        path.write_bytes(text)
        verified = run_kernels("verify", "--json", str(project))
        assert verified.returncode == 1, (name, verified.stdout)
        kinds = [(p["kind"], p["repo_id"]) for p in json.loads(verified.stdout)["problems"]]
        expected = "unsatisfied" if name == "kernel-deps" else "version-not-recorded"
        assert kinds == [(expected, repo_id)], (name, kinds)
        # download, to-wheel and the loader use it as it is, but never silently.
        for args in (("download",), ("to-wheel", "-o", str(tmp_path / f"wheels-{name}"))):
            result = run_kernels(*args, str(project))
            assert result.returncode == 0, (name, args, result.stderr)
            warning = f"warning: {path} does not agree with pyproject.toml for {repo_id}; using it as it is; "
            assert warning in result.stderr and "run 'kernels lock'" in result.stderr, (name, args, result.stderr)
        with pytest.warns(StaleLockWarning, match=f"does not agree with pyproject.toml for {repo_id}"):
            get_locked_kernel(repo_id, lockfile=path)
        with pytest.raises(StaleLockError, match="does not satisfy '>=2'|cannot show that it satisfies '>=2'"):
            lock_for_build(project)
    # kernels 0.17 records the tag each pin was locked under: the build hooks (which carry
    # it as it is) see that v1.0.0 does not satisfy the new range.
    path.write_bytes(formats["kernels-0.17"])
    with pytest.raises(StaleLockError, match=re.escape(f"{repo_id}: the locked v1.0.0 (") + ".* does not satisfy '>=2'"):
        lock_for_build(project)

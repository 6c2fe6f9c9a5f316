"""Files kernel-deps did not write are read only when regular, and never past a limit (core.boundedread).

A checkout is input: its ``pyproject.toml``, ``kernels.lock`` or the ``trusted-root`` file
may be a symbolic link to ``/dev/zero`` (read whole: a ``MemoryError``), a FIFO (``open``
waits for a writer that never comes) or a file of gigabytes. Each command that reads
them says so in one line naming the file (exit 2), at once. The commands run as real
processes with a timeout, so a hang fails the test instead of the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kernel_deps.core.boundedread import JOURNAL_LIMIT, PROJECT_FILE_LIMIT, RefusedFileError, read_bounded
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release
from tests.fixtures.processes import KERNELS
from tests.fixtures.projects import trust_table, write_project
from tests.fixtures.sigstore_ca import Identity

SRC = Path(__file__).resolve().parents[3] / "src"
REPO_ID = "kernels-test/bounded-reads"
ROOT_NAME = "trusted_root.json"


def test_only_a_regular_file_is_read_and_only_up_to_its_limit(tmp_path) -> None:
    plain = tmp_path / "plain"
    plain.write_bytes(b"x" * 10)
    (tmp_path / "link").symlink_to(plain)
    assert read_bounded(tmp_path / "link", 10) == b"x" * 10  # a link to a regular file is followed
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    for name, why in (("fifo", "a FIFO, not a regular file"), ("zero", "a character device, not a regular file")):
        with pytest.raises(RefusedFileError) as refused:
            read_bounded(tmp_path / name, 10)
        assert refused.value.strerror == why and refused.value.filename == str(tmp_path / name)
    with pytest.raises(RefusedFileError, match="larger than 9 bytes, the most kernel-deps reads of this file"):
        read_bounded(plain, 9)
    if Path("/proc/self/status").is_file():  # a regular file that says it is empty, and is not
        assert os.stat("/proc/self/status").st_size == 0
        with pytest.raises(RefusedFileError, match="larger than 16 bytes"):
            read_bounded("/proc/self/status", 16)
    with pytest.raises(IsADirectoryError):
        read_bounded(tmp_path, 10)
    with pytest.raises(FileNotFoundError):
        read_bounded(tmp_path / "absent", 10)


@pytest.fixture(scope="module")
def signed(local_hub, local_sigstore, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A project locking a signed kernel, its trusted root beside it, downloaded: (project, env)."""
    root = tmp_path_factory.mktemp("bounded")
    sign = lambda data, variant: local_sigstore.sign(data, Identity(REPO_ID))  # noqa: E731
    local_hub.add_repo(KernelRepo(REPO_ID, (Release("1.0.0", variants=(CPU_VARIANT,), digest="sha256", sign=sign),)))
    project = root / "app"
    project.mkdir()
    local_sigstore.write_trusted_root(project / ROOT_NAME)
    policy = trust_table(["kernels-test"]) + f'trusted-root = "{ROOT_NAME}"\n\n'
    write_project(project, {REPO_ID: ">=1"}, extra=policy, trusted=())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KERNELS_"))}
    env.update(HF_ENDPOINT=local_hub.url, HF_HUB_CACHE=str(root / "hf-cache"), PYTHONPATH=str(SRC))
    for args in (("lock",), ("download", "--all-variants")):
        done = subprocess.run([KERNELS, *args, str(project)], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    return project, {**env, "HF_HUB_OFFLINE": "1"}


def kernels(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([KERNELS, *args], env=env, capture_output=True, text=True, timeout=60)


def plant(path: Path, kind: str, limit: int) -> None:
    """Put a hostile file at ``path``: a link to /dev/zero, a FIFO, or a (sparse) file one byte over ``limit``."""
    path.unlink(missing_ok=True)
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        with open(path, "wb") as file:
            file.truncate(limit + 1)


WHY = {
    "dev-zero": "a character device, not a regular file",
    "fifo": "a FIFO, not a regular file",
    "oversized": "larger than 16 MiB, the most kernel-deps reads of this file",
}


@pytest.mark.parametrize("kind", list(WHY))
@pytest.mark.parametrize("name", ["pyproject.toml", "kernels.lock", ROOT_NAME])
def test_a_checkout_file_that_is_no_regular_file_or_too_large_is_one_line_exit_2(signed, tmp_path, name, kind) -> None:
    source, env = signed
    project = Path(shutil.copytree(source, tmp_path / "app", symlinks=True))
    plant(project / name, kind, PROJECT_FILE_LIMIT)
    # The trusted root is read only where a signature is verified again: lock --check judges
    # the lock's recorded signers by the policy alone, and never opens it.
    commands = [("verify",), ("download", "--all-variants")] + ([("lock", "--check")] if name != ROOT_NAME else [])
    for args in commands:
        result = kernels(*args, str(project), env=env)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr
        (line,) = result.stderr.splitlines()
        assert str(project / name) in line and WHY[kind] in line, (args, line)
    if name == ROOT_NAME:
        assert kernels("lock", "--check", str(project), env=env).returncode == 0


def test_an_interrupted_edit_is_never_finished_into_a_fifo_nor_from_an_oversized_journal(signed, tmp_path) -> None:
    # The writer's side: `kernels lock` finishes an edit journal only after reading both
    # files it names; a FIFO in place of one, or a journal too large, is refused, not waited on.
    source, env = signed
    project = Path(shutil.copytree(source, tmp_path / "app", symlinks=True))
    pyproject = (project / "pyproject.toml").read_text()
    journal = project / ".kernels-edit.json"
    files = [{"name": "pyproject.toml", "before": None, "text": pyproject}]
    journal.write_text(json.dumps({"kernel-deps-edit": 1, "files": files}))
    plant(project / "pyproject.toml", "fifo", PROJECT_FILE_LIMIT)
    result = kernels("lock", str(project), env=env)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert f"{journal}: refused" in line and "pyproject.toml cannot be read: a FIFO, not a regular file" in line
    assert journal.is_file() and (project / "pyproject.toml").is_fifo()  # left as they were

    (project / "pyproject.toml").unlink()
    (project / "pyproject.toml").write_text(pyproject)
    plant(journal, "oversized", JOURNAL_LIMIT)
    result = kernels("lock", str(project), env=env)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert f"{journal}: refused" in line and "larger than 64 MiB, the most kernel-deps reads of this file" in line
    assert journal.stat().st_size == JOURNAL_LIMIT + 1

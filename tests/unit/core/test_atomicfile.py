"""kernel_deps.core.atomicfile: every file kernel-deps writes is replaced whole or not at all."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.core import atomicfile
from kernel_deps.core.errors import FileWriteError


def test_write_text_creates_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    atomicfile.write_text(path, "one\n")
    assert path.read_text(encoding="utf-8") == "one\n"
    atomicfile.write_text(path, "twö\r\n")
    assert path.read_bytes() == "twö\r\n".encode("utf-8")  # UTF-8, newlines as given
    assert os.listdir(tmp_path) == ["f.txt"]


def test_a_new_file_gets_the_umask_and_a_replaced_one_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    umask = os.umask(0o027)
    try:
        atomicfile.write_text(path, "new\n")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    path.chmod(0o604)
    atomicfile.write_text(path, "changed\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o604


def test_write_text_if_changed_leaves_an_equal_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    assert atomicfile.write_text_if_changed(path, "same\n") is True
    before = path.stat()
    assert atomicfile.write_text_if_changed(path, "same\n") is False
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert atomicfile.write_text_if_changed(path, "other\n") is True
    assert path.read_text(encoding="utf-8") == "other\n"


@pytest.mark.parametrize("failing", ["replace", "fsync", "chmod"])
def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path, monkeypatch, failing: str) -> None:
    path = tmp_path / "f.txt"
    path.write_text("old\n", encoding="utf-8")

    def fail(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(FileWriteError) as info:
        atomicfile.write_text(path, "new\n")
    monkeypatch.undo()
    assert str(info.value) == (
        f"{path}: cannot write (No space left on device); check the folder's permissions and free space"
    )
    assert path.read_text(encoding="utf-8") == "old\n"
    assert os.listdir(tmp_path) == ["f.txt"]


def test_an_interrupted_write_leaves_no_temp(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "f.txt"
    path.write_text("old\n", encoding="utf-8")

    def interrupt(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        atomicfile.write_text(path, "new\n")
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == "old\n"
    assert os.listdir(tmp_path) == ["f.txt"]


def test_a_missing_folder_or_a_folder_in_the_way_is_a_write_error(tmp_path: Path) -> None:
    with pytest.raises(FileWriteError, match=r"absent/f\.txt: cannot write \(No such file or directory\)"):
        atomicfile.write_text(tmp_path / "absent" / "f.txt", "x")
    (tmp_path / "dir").mkdir()
    with pytest.raises(FileWriteError, match=r"dir: cannot write \(Is a directory\)"):
        atomicfile.write_text(tmp_path / "dir", "x")
    assert os.listdir(tmp_path) == ["dir"]


def test_the_cache_manifest_is_written_atomically(tmp_path: Path) -> None:
    repo = tmp_path / "kernels--org--name"
    commit, variant = "a" * 40, "torch-universal"
    files = {"__init__.py": "b" * 40}
    cache.place_variant(repo, commit, variant, files)
    manifest = cache.manifest_path(repo, commit, variant)
    assert json.loads(manifest.read_text(encoding="utf-8")) == {"files": files}
    assert os.listdir(manifest.parent) == [manifest.name]
    # A folder where the manifest goes: the write fails naming the file, and leaves no temp.
    manifest.unlink()
    manifest.mkdir()
    with pytest.raises(FileWriteError, match=rf"^{manifest}: cannot write"):
        cache.place_variant(repo, commit, variant, files)
    assert os.listdir(manifest.parent) == [manifest.name]

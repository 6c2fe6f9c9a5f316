"""`kernels sync` tells what the relock changed before the downloads it causes."""

from __future__ import annotations

from pathlib import Path

from kernel_deps.cache import store as cache
from kernel_deps.commands.sync import sync_project
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project

FLASH = "kernels-test/flash"


def cached_builds() -> list[Path]:
    root = cache.cache_root()
    return sorted(root.glob("kernels--*/snapshots/*/build/*/*.py")) if root.is_dir() else []


def test_the_lock_changes_are_told_before_anything_is_downloaded(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{FLASH}" = 1')
    seen: list[tuple[list[str], list[Path]]] = []
    report = sync_project(project, on_locked=lambda lock: seen.append(([c.repo_id for c in lock.changes],
                                                                       cached_builds())))  # fmt: skip
    assert report.ok
    ((changed, cached_then),) = seen
    assert changed == [FLASH] and cached_then == []  # told once, the cache still empty
    assert cached_builds()  # then downloaded


def test_the_command_prints_each_change_once_then_the_summary(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", f'"{FLASH}" = 1')
    result = run_kernels("sync", str(project))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"+ {FLASH} v1 (")  # the change first, then the download it caused
    assert lines[1].startswith(f"{FLASH} ") and "downloaded" in lines[1]
    assert lines[2].startswith("Synced 1 kernel: wrote kernels.lock") and len(lines) == 3
    assert run_kernels("sync", "-q", str(project)).stdout == ""

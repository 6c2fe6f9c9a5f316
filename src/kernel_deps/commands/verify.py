"""`kernels verify` as a library function: prove that pyproject, kernels.lock and the cache agree.

The verb reads the project once (:mod:`kernel_deps.project.record`) and runs one verification
(:func:`kernel_deps.checks.verification.verify_lock`): the lock against pyproject.toml, the
cache, installed kernel wheels and, ``online``, the Hub; every problem collected, none printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from kernel_deps.checks.verification import (
    CACHE_KINDS,
    FILE_KINDS,
    HUB_KINDS,
    LOCAL_KINDS,
    NOTICE_KINDS,
    SIGNED_KINDS,
    SYNC_KINDS,
    WHEEL_KINDS,
    VerifyReport,
    verify_inputs,
    verify_lock,
)
from kernel_deps.project.record import read_project_record

if TYPE_CHECKING:
    from kernel_deps.core.system import SystemInfo
    from kernel_deps.hub.client import HubClient

__all__ = [
    "CACHE_KINDS", "FILE_KINDS", "HUB_KINDS", "LOCAL_KINDS", "NOTICE_KINDS", "SIGNED_KINDS", "SYNC_KINDS",
    "WHEEL_KINDS", "VerifyReport", "verify_project",
]  # fmt: skip


def verify_project(
    project_dir: Path,
    *,
    online: bool = False,
    require_cached: bool = False,
    hub: HubClient | None = None,
    cache_root: Path | None = None,
    system: SystemInfo | None = None,
    targets: Sequence[str] = (),
    all_targets: bool = False,
) -> VerifyReport:
    """Check pyproject, lock and cache (and, ``online``, the Hub); UsageError on bad input.

    Every target pyproject.toml declares must be served by the lock. With ``targets``
    (exact build names) or ``all_targets``, the build serving each of them must also be
    in the cache, instead of this machine's (which ``require_cached`` adds).
    """
    overrides = verify_inputs(online=online)  # read first: a malformed LOCAL_KERNELS is bad input
    project = read_project_record(Path(project_dir))  # pyproject.toml read and parsed once
    assert project is not None
    return verify_lock(project, overrides=overrides, online=online, require_cached=require_cached, hub=hub,
                       cache_root=cache_root, system=system, targets=targets, all_targets=all_targets)  # fmt: skip

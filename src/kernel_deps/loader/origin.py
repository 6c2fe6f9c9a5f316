"""What a loaded kernel module is: the record every load sets as ``module.__kernel_origin__``.

A locked load names its repo, commit, variant, folder and the lock it enforced; a local
build (``LOCAL_KERNELS``, ``get_local_kernel``) the same record, saying it is local.
"""

from __future__ import annotations

from pathlib import Path

from kernel_deps.core.records import Record

LOCAL = "local"  # the lock_origin of a local build: no lock involved


class KernelOrigin(Record):
    """What a loaded kernel module is: set as ``module.__kernel_origin__``. A local build
    (``LOCAL_KERNELS``, ``get_local_kernel``) has ``lock_origin`` ``"local"`` and no commit."""

    __slots__ = ("repo_id", "commit", "variant", "path", "lock_origin", "lock_path")
    repo_id: str
    commit: str | None
    variant: str | None
    path: Path
    lock_origin: str
    lock_path: str

    def __init__(
        self, repo_id: str, commit: str | None, variant: str | None, path: Path, lock_origin: str, lock_path: str
    ) -> None:
        self._init(repo_id, commit, variant, path, lock_origin, lock_path)


__all__ = ["LOCAL", "KernelOrigin"]

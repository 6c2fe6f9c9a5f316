"""`kernels download` as a library function: exactly the locked bytes, proven, in the HF cache.

The verb reads the project once (:mod:`kernel_deps.project.record`) and runs its download
(:func:`kernel_deps.fetch.project.download_for_project`): the lock judged, the variants
chosen, each missing one fetched and verified through the one gate into the cache
(:mod:`kernel_deps.fetch`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from kernel_deps.fetch.project import VariantChoice, check_choice, download_for_project
from kernel_deps.fetch.tasks import DownloadReport, Progress
from kernel_deps.project.record import read_project_record

if TYPE_CHECKING:
    from kernel_deps.hub.client import HubClient

__all__ = ["DownloadReport", "Progress", "download_project"]


def download_project(
    project_dir: Path,
    *,
    all_variants: bool = False,
    variants: Sequence[str] = (),
    targets: Sequence[str] = (),
    all_targets: bool = False,
    hub: HubClient | None = None,
    progress: Progress | None = None,
    into: Path | None = None,
) -> DownloadReport:
    """Download what ``<project_dir>/kernels.lock`` pins, for this machine unless told otherwise:
    every variant, the named ``variants``, or the builds that serve the named ``targets``
    (or every target pyproject.toml declares, ``all_targets``); with ``into``, then place
    exactly those variants in that folder (:func:`kernel_deps.cache.subset.place_subset`)."""
    check_choice(all_variants, variants, targets, all_targets)
    # pyproject.toml read once: its targets, and what it asks of the lock (none when the lock was copied alone).
    project = read_project_record(Path(project_dir), missing_ok=True)
    choice = VariantChoice(all_variants, variants, targets, all_targets)
    return download_for_project(Path(project_dir) if project is None else project, choice, hub=hub,
                                progress=progress, into=into)  # fmt: skip

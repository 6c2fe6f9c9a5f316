"""A project's download: its lock judged against its record, the variants chosen, fetched, and ``--into``.

``kernels download`` and ``kernels sync`` both run it with the project read once
(:class:`kernel_deps.project.record.Project`; or, for a lock copied alone with no
pyproject.toml beside it, of which nothing is asked, its folder).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from kernel_deps.cache import store as cache
from kernel_deps.core.errors import UsageError
from kernel_deps.core.records import Record
from kernel_deps.core.settings import LOCK_NAME, PYPROJECT_NAME
from kernel_deps.core.system import SystemInfo, detect_system
from kernel_deps.core.targets import Target, targets_from_options, variants_for_targets
from kernel_deps.core.variants import choose_variants
from kernel_deps.fetch.run import download_lock
from kernel_deps.fetch.tasks import DownloadReport, Progress
from kernel_deps.lock.model import LockedKernel

if TYPE_CHECKING:
    from kernel_deps.hub.client import HubClient
    from kernel_deps.project.record import Project


class VariantChoice(Record):
    """Which variants of each locked kernel a run takes, as the command line asks: every one
    (``all_variants``), the named ``variants``, the builds serving the named ``targets`` (or
    every target the project declares, ``all_targets``); none of these: this machine's."""

    __slots__ = ("all_variants", "variants", "targets", "all_targets")
    all_variants: bool
    variants: tuple[str, ...]
    targets: tuple[str, ...]
    all_targets: bool

    def __init__(self, all_variants: bool = False, variants: Sequence[str] = (), targets: Sequence[str] = (),
                 all_targets: bool = False) -> None:  # fmt: skip
        self._init(all_variants, tuple(variants), tuple(targets), all_targets)


def check_choice(
    all_variants: bool, variants: Sequence[str], targets: Sequence[str], all_targets: bool, *,
    does: str = "downloads every variant", options: Sequence[str] = ("--variant", "--target", "--all-targets"),
) -> None:  # fmt: skip
    """UsageError when ``--all-variants`` is given with another choice of variants: what it
    ``does`` and the ``options`` the command offers beside it (``download``'s, unless told)."""
    if all_variants and (variants or targets or all_targets):
        raise UsageError(f"--all-variants {does}; drop {', '.join(options[:-1])} and {options[-1]}")


def variants_chooser(
    *, all_variants: bool = False, variants: Sequence[str] = (), targets: Sequence[Target] = (),
    system: SystemInfo | None = None,
) -> Callable[[LockedKernel], list[str]]:  # fmt: skip
    """The variants to take of each locked kernel: every one, the named ``variants``, the builds
    serving ``targets`` (both together: the union), or ``system``'s (None: this machine's,
    detected once, here)."""
    system = None if (all_variants or variants or targets) else (system or detect_system())

    def variants_for(kernel: LockedKernel) -> list[str]:
        if targets and not variants:
            return served(kernel, targets)
        picked = choose_variants(kernel.repo_id, kernel.variants, all_variants=all_variants, requested=variants,
                                 system=system)  # fmt: skip
        return sorted(set(picked) | set(served(kernel, targets)))

    return variants_for


def served(kernel: LockedKernel, targets: Sequence[Target]) -> list[str]:
    """The variant of ``kernel`` serving each target; TargetNotServedError naming one it lacks."""
    return variants_for_targets(kernel.repo_id, kernel.variants, targets, locked_as=kernel.version or kernel.sha[:12])


def download_for_project(
    project: Project | Path,
    choice: VariantChoice | None = None,
    *,
    hub: HubClient | None = None,
    progress: Progress | None = None,
    into: Path | None = None,
) -> DownloadReport:
    """Download what the project's ``kernels.lock`` pins (``project``: its record, or the folder of
    a lock copied alone, with no pyproject.toml), the variants ``choice`` names (None: this
    machine's); with ``into``, then place exactly those variants in that folder
    (:func:`kernel_deps.cache.subset.place_subset`). What the project asks of the lock is
    judged before a byte is fetched, the same way for every lock format."""
    from kernel_deps.lock.freshness import judge_for_use, rules_of
    from kernel_deps.lock.read import read_lock

    project_dir, record = (project, None) if isinstance(project, Path) else (project.folder, project)
    lock_file = project_dir / LOCK_NAME
    rules = rules_of(record) if record is not None else None
    found = read_lock(lock_file, purpose="fetch")  # ours, kernels <= 0.16's or 0.17's, never rewritten
    warning = judge_for_use(found, rules, str(lock_file), "refusing to download")  # said, not refused
    notes = []
    lock = found.lock
    if lock is None:  # kernels 0.17: its builds hashed from the Hub's listing at each pinned commit
        from kernel_deps.resolve.pinned import lock_of_pins, pins_only_note

        if hub is None:
            from kernel_deps.hub.client import HubClient

            hub = HubClient()
        lock = lock_of_pins(found, hub, rules.policy if rules is not None else None,
                            rules.publishers if rules is not None else ())  # fmt: skip
        notes.append(pins_only_note(found))
    declared = rules.targets if rules is not None else ()
    choice = VariantChoice() if choice is None else choice
    chosen_targets = targets_from_options(choice.targets, choice.all_targets, declared, project_dir / PYPROJECT_NAME)
    variants_for = variants_chooser(all_variants=choice.all_variants, variants=choice.variants, targets=chosen_targets)
    if into is not None:
        from kernel_deps.cache.subset import check_folder, place_subset

        check_folder(Path(into), cache.cache_root(), project=project_dir)  # bad input before anything is fetched
    policy = rules.policy if rules is not None else None
    report = download_lock(lock, variants_for=variants_for, hub=hub, progress=progress, policy=policy)
    placed = (place_subset(report.wanted(), Path(into), root=report.cache_root, project=project_dir)
              if into is not None else None)  # fmt: skip
    return report.of_project(lock_file, placed, [*notes, *([warning] if warning else [])])

"""The default range ``kernels add ORG/NAME`` writes: from the newest version serving every target.

:mod:`kernel_deps.core.versions` decides which refs are versions and what range the newest
gives (``default_requirement``); this asks the Hub for the refs and, newest first, for the
build variants of each commit tried against the declared targets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from kernel_deps.core.errors import TargetNotServedError, UsageError
from kernel_deps.core.targets import Target, missing_targets
from kernel_deps.core.versions import KernelVersion, default_requirement, versions_from_refs

if TYPE_CHECKING:
    from kernel_deps.hub.client import HubClient


def requirement_for_newest(repo_id: str, *, hub: HubClient | None = None, targets: Sequence[Target] = ()) -> str | int:
    """What ``kernels add ORG/NAME`` writes when no range is given (see ``default_requirement``),
    from the newest version with a build for every one of ``targets``.

    UsageError when the repo has no versions: it can then only be added at a revision;
    TargetNotServedError when no version serves every target.
    """
    if hub is None:
        from kernel_deps.hub.client import HubClient

        hub = HubClient()
    found = versions_from_refs(hub.list_refs(repo_id).refs)
    if not found:
        raise UsageError(f"{repo_id} has no versions (no vX.Y.Z tags or vN branches); add it as {repo_id}@REVISION")
    if targets:
        found = _newest_serving(repo_id, found, targets, hub)
        if not found:
            names = ", ".join(t.name for t in targets)
            raise TargetNotServedError(
                f"no version has a build for every target of [tool.kernels] targets ({names})",
                subject=repo_id,
                hint="see 'kernels versions' for what each offers",
            )
    value = default_requirement(found)
    assert value is not None
    return value


def _newest_serving(
    repo_id: str, found: list[KernelVersion], targets: Sequence[Target], hub: HubClient
) -> list[KernelVersion]:
    """The newest final tag whose commit serves every target, else the newest such branch (one
    listing per commit tried, newest first); empty when none does."""
    newest_first = sorted(found, key=lambda v: v.version, reverse=True)
    tags = [v for v in newest_first if not v.is_branch and not v.version.is_prerelease]
    branches = [v for v in newest_first if v.is_branch]
    judged: dict[str, bool] = {}
    for group in (tags, branches):
        for version in group:
            commit = version.ref.commit
            if commit not in judged:
                judged[commit] = not missing_targets(targets, hub.list_variants(repo_id, commit))
            if judged[commit]:
                return [version]
    return []

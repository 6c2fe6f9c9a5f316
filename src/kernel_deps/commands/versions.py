"""`kernels versions` as a library function: the versions a kernel repo offers, newest first.

Also the default range `kernels add` writes, from the newest version serving every target.

:mod:`kernel_deps.core.versions` decides which refs are versions and how they sort; this module
asks the Hub for the refs and, for each distinct commit they point at, how many build
variants it holds. The variant listings run concurrently (``settings.HUB_WORKERS`` at
once). Hub failures propagate as :mod:`kernel_deps.core.errors` types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kernel_deps.cache.pools import worker_pool
from kernel_deps.core.errors import TargetNotServedError, UsageError
from kernel_deps.core.settings import HUB_WORKERS, KERNEL
from kernel_deps.core.targets import Target, missing_targets
from kernel_deps.core.versions import KernelVersion, RefKind, default_requirement, versions_from_refs
from kernel_deps.hub.client import HubClient


SCHEMA_VERSION = 1  # of docs/schemas/versions.schema.json; see docs/ci.md


@dataclass(frozen=True, slots=True)
class ListedVersion:
    """One version of a repo: the ref naming it, the commit it points at, its variant count."""

    ref: str
    kind: RefKind
    version: str
    commit: str
    variants: int


@dataclass(frozen=True, slots=True)
class VersionListing:
    """The versions of one repo, newest first, and the repo type it was found as."""

    repo_id: str
    repo_type: str
    versions: tuple[ListedVersion, ...]

    @property
    def is_legacy(self) -> bool:
        """True when the kernel lives in a ``model`` repo rather than a ``kernel`` repo."""
        return self.repo_type != KERNEL

    def to_json(self) -> dict:
        """The listing as docs/schemas/versions.schema.json describes it."""
        return {
            "schema_version": SCHEMA_VERSION,
            "repo_id": self.repo_id,
            "repo_type": self.repo_type,
            "versions": [
                {"name": v.ref, "kind": v.kind, "version": v.version, "commit": v.commit, "variants": v.variants}
                for v in self.versions
            ],
        }


def list_versions(repo_id: str, *, hub: HubClient | None = None) -> VersionListing:
    """Every version (``vX.Y.Z`` tag or ``vN`` branch) of ``repo_id``, newest first.

    Lists the refs once, then the ``build/`` folder of each distinct commit once.
    """
    hub = hub or HubClient()
    with hub.operation():  # one time budget for the whole listing
        refs = hub.list_refs(repo_id)
        found: list[KernelVersion] = versions_from_refs(refs.refs)
        commits = sorted({v.ref.commit for v in found})
        counts: dict[str, int] = {}
        if commits:
            with worker_pool(min(HUB_WORKERS, len(commits)), "kernel-deps-listing") as pool:
                counts = dict(zip(commits, pool.map(lambda c: len(hub.list_variants(repo_id, c)), commits)))
    listed = tuple(
        ListedVersion(v.ref.name, v.ref.kind, str(v.version), v.ref.commit, counts[v.ref.commit]) for v in found
    )
    return VersionListing(repo_id, refs.repo_type, listed)


def requirement_for_newest(repo_id: str, *, hub: HubClient | None = None, targets: Sequence[Target] = ()) -> str | int:
    """What ``kernels add ORG/NAME`` writes when no range is given (see ``default_requirement``),
    from the newest version with a build for every one of ``targets``.

    UsageError when the repo has no versions: it can then only be added at a revision;
    TargetNotServedError when no version serves every target.
    """
    hub = hub or HubClient()
    found = versions_from_refs(hub.list_refs(repo_id).refs)
    if not found:
        raise UsageError(f"{repo_id} has no versions (no vX.Y.Z tags or vN branches); add it as {repo_id}@REVISION")
    if targets:
        found = _newest_serving(repo_id, found, targets, hub)
        if not found:
            names = ", ".join(t.name for t in targets)
            raise TargetNotServedError(
                f"{repo_id}: no version has a build for every target of [tool.kernels] targets ({names}); "
                "see 'kernels versions' for what each offers"
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

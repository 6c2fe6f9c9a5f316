"""`kernels versions` as a library function: the versions a kernel repo offers, newest first.

:mod:`kernel_deps.core.versions` decides which refs are versions and how they sort; this module
asks the Hub for the refs and, for each distinct commit they point at, how many build
variants it holds. The variant listings run concurrently (``settings.HUB_WORKERS`` at
once). Hub failures propagate as :mod:`kernel_deps.core.errors` types.
"""

from __future__ import annotations

from kernel_deps.cache.pools import worker_pool
from kernel_deps.core.records import Record
from kernel_deps.core.settings import HUB_WORKERS, KERNEL
from kernel_deps.core.versions import KernelVersion, RefKind, versions_from_refs
from kernel_deps.hub.client import HubClient


SCHEMA_VERSION = 2  # of docs/schemas/versions.schema.json; see docs/ci.md


class ListedVersion(Record):
    """One version of a repo: the ref naming it, the commit it points at, its variant count."""

    __slots__ = ("ref", "kind", "version", "commit", "variants")
    ref: str
    kind: RefKind
    version: str
    commit: str
    variants: int

    def __init__(self, ref: str, kind: RefKind, version: str, commit: str, variants: int) -> None:
        self._init(ref, kind, version, commit, variants)


class VersionListing(Record):
    """The versions of one repo, newest first, and the repo type it was found as."""

    __slots__ = ("repo_id", "repo_type", "versions")
    repo_id: str
    repo_type: str
    versions: tuple[ListedVersion, ...]

    def __init__(self, repo_id: str, repo_type: str, versions: tuple[ListedVersion, ...]) -> None:
        self._init(repo_id, repo_type, versions)

    @property
    def is_legacy(self) -> bool:
        """True when the kernel lives in a ``model`` repo rather than a ``kernel`` repo."""
        return self.repo_type != KERNEL

    def to_json(self) -> dict:
        """The listing as docs/schemas/versions.schema.json describes it."""
        return {
            "schema_version": SCHEMA_VERSION,
            "ok": bool(self.versions),
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

"""A repo's branches and tags as the Hub's ``/refs`` answer gives them (:func:`parse_refs`),
and the record of a repo's refs (:class:`RepoRefs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel_deps.core import jsondoc
from kernel_deps.core.errors import HubError
from kernel_deps.core.records import Record
from kernel_deps.core.versions import GitRef

if TYPE_CHECKING:
    import httpx2

class RepoRefs(Record):
    """The branches and tags of one repo, and the repo type it was found as."""

    __slots__ = ("repo_id", "repo_type", "refs")
    repo_id: str
    repo_type: str
    refs: tuple[GitRef, ...]

    def __init__(self, repo_id: str, repo_type: str, refs: tuple[GitRef, ...]) -> None:
        self._init(repo_id, repo_type, refs)


def parse_refs(repo_id: str, resp: httpx2.Response) -> tuple[GitRef, ...]:
    """Branches and tags from a ``/refs`` answer (``{"branches": [...], "tags": [...]}``)."""
    try:
        data = jsondoc.loads(resp.content)
        return tuple(
            GitRef(item["name"], kind, item["targetCommit"])
            for kind, group in (("branch", "branches"), ("tag", "tags"))
            for item in data[group]
        )
    except jsondoc.JSONDocumentError as exc:
        raise HubError(f"the Hub's list of branches and tags is malformed: {exc}", subject=repo_id) from None
    except KeyError as exc:
        raise HubError(f"the Hub's list of branches and tags is malformed (no {exc})", subject=repo_id) from None
    except (ValueError, TypeError) as exc:
        raise HubError(f"the Hub's list of branches and tags is malformed ({exc})", subject=repo_id) from None

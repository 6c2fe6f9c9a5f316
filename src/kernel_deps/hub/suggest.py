"""The nearest existing repos of an organization, for a repo id the Hub does not have.

Asked only after a repo was not found, never on the way to a success: :func:`nearest_repos`
lists the organization's kernel repos, then its model repos (legacy kernels), as
``HfApi.list_models(author=org, limit=...)`` asks the Hub (``GET /api/<kernels|models>?
author=<org>&limit=<n>``, one page, never the next), and picks the closest names with
:func:`difflib.get_close_matches`. The request is huggingface_hub's (its session, headers
and error classification, through the transport), not ``HfApi.list_models`` itself,
which retries on its own terms with no deadline kernel-deps controls.

A suggestion is a courtesy, so the listing can only add one, never fail or delay the
error it belongs to: it goes through a :class:`~kernel_deps.hub.transport.Transport` of
its own without retries, under a budget of :data:`LISTING_BUDGET` seconds (less when
the operation it serves has less left), and any failure (refused, 5xx, not JSON, too
large, too slow) gives no suggestion. The answer is untrusted: at most
:data:`MAX_LISTING_BYTES` are read and :data:`MAX_ENTRIES` entries looked at; an entry
that is not a valid repo id of that same organization, or is the id not found, is never
suggested.
"""

from __future__ import annotations

import difflib

import httpx2

from kernel_deps.core import jsondoc
from kernel_deps.core.boundedread import join_within
from kernel_deps.core.settings import KERNEL, MODEL, REPO_TYPE_PLURALS
from kernel_deps.core.spec import org_of, repo_id_reason
from kernel_deps.hub.transport import RequestSubject, Transport

__all__ = ["LISTING_BUDGET", "MAX_ENTRIES", "MAX_LISTING_BYTES", "MAX_SUGGESTIONS", "nearest_repos"]

# Seconds all listings of one suggestion may take together.
LISTING_BUDGET = 3.0
# The page size asked; an organization's kernels fit in one page.
MAX_ENTRIES = 1000
# An entry of a listing is a few hundred bytes: a larger answer is not read to its end.
MAX_LISTING_BYTES = 2 << 20
MAX_SUGGESTIONS = 3
# How alike two names must be (difflib's ratio): a typo or two in a name of ten letters.
CUTOFF = 0.8


class _TooLarge(Exception):
    """The listing went past :data:`MAX_LISTING_BYTES`."""


def nearest_repos(transport: Transport, repo_id: str) -> tuple[str, ...]:
    """Up to :data:`MAX_SUGGESTIONS` repo ids of ``repo_id``'s organization whose names are
    closest to its name, closest first; none when the Hub cannot list them."""
    org, _, name = repo_id.partition("/")
    budget = min(LISTING_BUDGET, transport.time_left())
    if not name or budget <= 0:
        return ()
    lister = Transport(transport.endpoint, transport.token, retries=0, timeout=budget, budget=budget)
    names: dict[str, str] = {}  # name -> repo id, in the order listed
    with lister.operation():
        for repo_type in (KERNEL, MODEL):
            for found in _listed(lister, org, REPO_TYPE_PLURALS[repo_type]):
                if found != repo_id and repo_id_reason(found) is None and org_of(found) == org:
                    names.setdefault(found.partition("/")[2], found)
    close = difflib.get_close_matches(name, list(names), n=MAX_SUGGESTIONS, cutoff=CUTOFF)
    return tuple(names[match] for match in close)


def _listed(lister: Transport, org: str, plural: str) -> list[str]:
    """The ``id`` of each entry of the first page of ``org``'s repos of one type; none when
    the Hub does not answer that listing with one."""
    url = f"{lister.endpoint}/api/{plural}"
    params = {"author": org, "limit": str(MAX_ENTRIES)}

    def read(resp: httpx2.Response) -> bytes:
        return join_within(lister.chunks(resp), MAX_LISTING_BYTES, _TooLarge)

    if lister.time_left() <= 0:
        return []
    try:
        body = lister.stream(str(httpx2.URL(url, params=params)), RequestSubject(org, what="(its repos)"), read)
        entries = jsondoc.loads(body)
    except Exception:  # whatever went wrong, the not-found error it serves is told as it is
        return []
    if not isinstance(entries, list):
        return []
    return [e["id"] for e in entries[:MAX_ENTRIES] if isinstance(e, dict) and isinstance(e.get("id"), str)]

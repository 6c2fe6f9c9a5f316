"""The Hub API calls kernel-deps makes, on top of :mod:`kernel_deps.hub.transport`.

Kernel repos are ``repo_type="kernel"``; older kernels live in ``model`` repos, which are
used when no kernel repo of that id exists. Refs are always listed first and every later
call names a full commit SHA, so a result never depends on a ref moving mid-run. Every
request goes through one :class:`~kernel_deps.hub.transport.Transport` (offline check,
timeouts, retries, error mapping); this module builds the URLs and reads the answers.
What the files mean (metadata, hashes) is for the modules that use them.

The Hub's answers are untrusted input: every file of a tree listing is checked, once, by
:mod:`kernel_deps.hub.listing`, and a refs listing is read by :mod:`kernel_deps.hub.refs`.
The records its calls return are imported from where they are defined (``TreeFile`` from
:mod:`~kernel_deps.hub.listing`, ``RepoRefs`` from :mod:`~kernel_deps.hub.refs`,
``PublisherTrust`` from :mod:`kernel_deps.trust.publishers`); this module exports its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from kernel_deps.hub.environment import import_huggingface_hub

import_huggingface_hub()  # first: malformed HF_* settings must not fail this import

import httpx2
from huggingface_hub import hf_hub_url

from kernel_deps.core import jsondoc
from kernel_deps.core.boundedread import join_within
from kernel_deps.core.errors import (
    HubAuthError,
    HubError,
    HubUnavailableError,
    OfflineError,
    PathNotFoundError,
    RepoNotFoundError,
    RevisionNotFoundError,
)
from kernel_deps.core.records import Record
from kernel_deps.core.settings import BUILD_DIR, KERNEL, MODEL, REPO_TYPE_PLURALS
from kernel_deps.core.spec import validate_repo_id
from kernel_deps.hub.listing import TreeFile, check_listing
from kernel_deps.hub.refs import RepoRefs, parse_refs
from kernel_deps.hub.transport import RequestSubject, Transport
from kernel_deps.trust.publishers import PublisherTrust

__all__ = ["MAX_SMALL_FILE_BYTES", "CommitListing", "HubClient"]

# metadata.json is a few hundred bytes; anything far larger is not one.
MAX_SMALL_FILE_BYTES = 1 << 20



class CommitListing(Record):
    """One commit of a kernel repo as a recursive listing shows it (:meth:`HubClient.list_commit`)."""

    __slots__ = ("build_files", "top_level")
    build_files: tuple[TreeFile, ...]  # every file under build/, checked as the cache needs
    top_level: frozenset[str]  # the names at the top of the repo, files and folders

    def __init__(self, build_files: tuple[TreeFile, ...], top_level: frozenset[str]) -> None:
        self._init(build_files, top_level)


class HubClient:
    """A Hub session: the Hub API calls over one transport, and a per-run memo of repo types."""

    def __init__(
        self,
        endpoint: str | None = None,
        token: str | None = None,
        *,
        retries: int = 6,
        backoff: float = 0.5,
        timeout: float = 30.0,
        budget: float | None = None,
    ) -> None:
        self.transport = Transport(endpoint, token, retries=retries, backoff=backoff, timeout=timeout, budget=budget)
        self._repo_types: dict[str, str] = {}
        # Whether this Hub refused a listing of a whole commit asked with the trailing
        # slash and answered it without: then the slash is not asked again (_root_listing).
        self._root_without_slash = False
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        """The Hub's base URL, credentials included: for building request URLs, never for messages."""
        return self.transport.endpoint

    @property
    def shown_endpoint(self) -> str:
        """The Hub's base URL as messages name it, its credentials hidden."""
        return self.transport.shown_endpoint

    @contextmanager
    def operation(self) -> Iterator["HubClient"]:
        """One operation (a command) under one time budget: see :meth:`Transport.operation`."""
        with self.transport.operation():
            yield self

    # -- refs -------------------------------------------------------------------------

    def list_refs(self, repo_id: str) -> RepoRefs:
        """Branches and tags of ``repo_id``, from the kernel repo or else the model repo; when
        neither exists, the RepoNotFoundError names the organization's nearest repos, if any
        (:mod:`kernel_deps.hub.suggest`)."""
        validate_repo_id(repo_id)
        for repo_type in (KERNEL, MODEL):
            url = f"{self.endpoint}/api/{REPO_TYPE_PLURALS[repo_type]}/{repo_id}/refs"
            try:
                resp = self.transport.get(url, RequestSubject(repo_id))
            except RepoNotFoundError:
                continue
            found = parse_refs(repo_id, resp)
            with self._lock:
                self._repo_types[repo_id] = repo_type
            return RepoRefs(repo_id, repo_type, found)
        from kernel_deps.hub.suggest import nearest_repos  # only once a repo is not found

        raise RepoNotFoundError(repo_id, self.shown_endpoint, nearest_repos(self.transport, repo_id))

    def repo_type(self, repo_id: str) -> str:
        """``kernel`` or ``model``: where ``repo_id`` was found (lists refs if not yet known)."""
        with self._lock:
            known = self._repo_types.get(repo_id)
        return known or self.list_refs(repo_id).repo_type

    # -- publishers -------------------------------------------------------------------

    def publisher_trust(self, org: str) -> PublisherTrust:
        """Whether the Hub trusts ``org`` as a kernel publisher (``GET /api/organizations/<org>/overview``
        answering ``"trustedKernelPublisher": true``, as the Hugging Face library asks). A Hub
        that cannot answer (404, no such API, 5xx after retries, unreachable, the budget
        spent) does not trust it, and :attr:`PublisherTrust.kind` says why; offline is an
        OfflineError, as for every request."""
        url = f"{self.endpoint}/api/organizations/{org}/overview"
        try:
            resp = self.transport.get(url, RequestSubject(org, what="(its publisher overview)"))
        except OfflineError:
            raise
        except (RepoNotFoundError, RevisionNotFoundError):
            return PublisherTrust(org, False, PublisherTrust.NO_ORGANIZATION, self.shown_endpoint)
        except HubError as exc:
            return PublisherTrust(org, False, PublisherTrust.HUB_ERROR, self.shown_endpoint, exc.message)
        try:
            data = jsondoc.loads(resp.content)
        except jsondoc.JSONDocumentError as exc:
            return PublisherTrust(org, False, PublisherTrust.BAD_ANSWER, self.shown_endpoint, str(exc))
        if isinstance(data, dict) and data.get("trustedKernelPublisher") is True:
            return PublisherTrust(org, True, PublisherTrust.TRUSTED, self.shown_endpoint)
        return PublisherTrust(org, False, PublisherTrust.NOT_TRUSTED, self.shown_endpoint)

    # -- trees ------------------------------------------------------------------------

    def list_variants(self, repo_id: str, commit: str) -> list[str]:
        """Names of the ``build/<variant>`` folders of ``repo_id`` at ``commit``, sorted
        (none when the commit has no ``build/`` folder)."""
        try:
            entries = self._list_tree(repo_id, commit, BUILD_DIR, recursive=False)
        except PathNotFoundError:
            return []
        prefix = BUILD_DIR + "/"
        return sorted(
            e["path"][len(prefix):]
            for e in entries
            if e.get("type") == "directory" and isinstance(e["path"], str) and e["path"].startswith(prefix)
        )

    def list_variant_files(self, repo_id: str, commit: str, variant: str | None = None) -> list[TreeFile]:
        """Every file under ``build/<variant>/`` (or all of ``build/``) at ``commit``.

        A commit without ``build/`` has no files; a named variant folder that does not
        exist at ``commit`` is a :class:`PathNotFoundError`, never an empty listing. (The
        resolver lists whole commits with :meth:`list_commit` instead.)
        """
        folder = f"{BUILD_DIR}/{variant}" if variant else BUILD_DIR
        try:
            entries = self._list_tree(repo_id, commit, folder, recursive=True)
        except PathNotFoundError:
            if variant:
                raise
            return []
        return check_listing(repo_id, commit, folder, entries)

    def list_commit(
        self, repo_id: str, commit: str, *, repo_type: str | None = None, retries: int | None = None
    ) -> CommitListing:
        """Every file under ``build/`` at ``commit``, each checked, and the names at the top
        of the repo, from one recursive listing of the whole commit: an optional file beside
        ``build/`` (``kernel-status.toml``) is found without a request of its own, and
        without asking for a missing file (which some servers answer with retryable 5xx
        errors). Entries outside ``build/`` are never fetched, so only their names count.
        ``repo_type`` asks the repo as that type without listing its refs first (by default
        its type is the one its refs were found as); ``retries`` other than the client's."""
        entries = self._list_tree(repo_id, commit, "", recursive=True, repo_type=repo_type, retries=retries)
        prefix = BUILD_DIR + "/"
        build = [e for e in entries if not isinstance(e["path"], str) or e["path"].startswith(prefix)]
        top = frozenset(e["path"].partition("/")[0] for e in entries if isinstance(e["path"], str))
        return CommitListing(tuple(check_listing(repo_id, commit, BUILD_DIR, build)), top)

    def read_small_file(
        self, repo_id: str, commit: str, path: str, limit: int = MAX_SMALL_FILE_BYTES, *,
        repo_type: str | None = None, retries: int | None = None,
    ) -> bytes:  # fmt: skip
        """The bytes of one small file at ``commit`` (a commit or a branch); refuses files over
        ``limit`` bytes; ``repo_type`` as for :meth:`list_commit`; ``retries`` other than the
        client's (0: one attempt, for a file that may be missing)."""
        kind = repo_type or self.repo_type(repo_id)
        url = hf_hub_url(repo_id, path, repo_type=kind, revision=commit, endpoint=self.endpoint)

        def too_large() -> HubError:
            return HubError(f"{path} is larger than {limit} bytes; refusing to read it", subject=f"{repo_id}@{commit[:12]}")

        read = lambda resp: join_within(self.transport.chunks(resp), limit, too_large)  # noqa: E731
        return self.transport.stream(url, RequestSubject(repo_id, commit), read, retries=retries)

    def commit_history(self, repo_id: str, commit: str) -> set[str]:
        """The commits reachable from ``commit`` (as far back as the Hub lists them)."""
        # Only the commit ids are read: some Hub-compatible servers shape author records differently.
        resp = self.transport.get(self._api_url(repo_id, f"commits/{commit}"), RequestSubject(repo_id, commit))
        try:
            entries = jsondoc.loads(resp.content)
        except jsondoc.JSONDocumentError as exc:
            where = f"{repo_id}@{commit[:12]}: the Hub's commit list"
            raise HubError(f"{where} is not JSON kernel-deps can read ({exc})") from None
        if not isinstance(entries, list):
            raise HubError("the Hub's commit list is malformed", subject=f"{repo_id}@{commit[:12]}")
        return {entry["id"] for entry in entries if isinstance(entry, dict) and "id" in entry}

    def download_to(
        self,
        repo_id: str,
        commit: str,
        path: str,
        dest: Path,
        *,
        size: int | None = None,
        on_bytes: Callable[[int], None] | None = None,
    ) -> int:
        """Stream one file at ``commit`` into ``dest``; returns the bytes received.

        What ``dest`` already holds (a retry after a transient fault, or a partial file an
        earlier run left) is resumed with a Range request where the server allows it,
        else the file starts over.
        """
        url = hf_hub_url(repo_id, path, repo_type=self.repo_type(repo_id), revision=commit, endpoint=self.endpoint)
        have, ranged, received = 0, False, 0

        def range_header() -> dict[str, str]:
            nonlocal have, ranged
            have = dest.stat().st_size if dest.exists() else 0
            ranged = bool(have and size is not None and have < size)
            return {"Range": f"bytes={have}-"} if ranged else {}

        def write(resp: httpx2.Response) -> None:
            nonlocal received
            resumed = resp.status_code == 206 and ranged
            if not resumed and received:
                if on_bytes:
                    on_bytes(-received)  # starting over: take back what was counted
                received = 0
            # Never through a link planted at the partial's name: O_NOFOLLOW refuses it (ELOOP).
            flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if resumed else os.O_TRUNC) | getattr(os, "O_NOFOLLOW", 0)
            with os.fdopen(os.open(dest, flags, 0o666), "ab" if resumed else "wb") as out:
                for chunk in self.transport.chunks(resp):  # as it arrives: a cut or a kill keeps what came
                    out.write(chunk)
                    out.flush()
                    received += len(chunk)
                    if on_bytes:
                        on_bytes(len(chunk))

        self.transport.stream(url, RequestSubject(repo_id, commit, path), write, headers=range_header)
        return received

    def _list_tree(
        self, repo_id: str, commit: str, folder: str, *, recursive: bool, repo_type: str | None = None,
        retries: int | None = None,
    ) -> list[dict]:
        """The tree entries under ``folder`` at ``commit``, following pagination;
        :class:`PathNotFoundError` when the commit exists but ``folder`` does not."""
        url: str | None = self._api_url(repo_id, f"tree/{commit}/{folder}", repo_type).rstrip("/")
        params: dict | None = {"recursive": str(recursive).lower(), "expand": "false"}
        entries: list[dict] = []
        first = True
        try:
            while url:
                if first and not folder:
                    resp = self._root_listing(url, RequestSubject(repo_id, commit), params, retries)
                else:
                    resp = self.transport.get(url, RequestSubject(repo_id, commit), params=params, retries=retries)
                params, first = None, False  # the next-page URL carries its own query
                try:
                    items = jsondoc.loads(resp.content)
                except jsondoc.JSONDocumentError as exc:
                    where = f"{repo_id}@{commit[:12]}: the Hub's tree listing of {folder or '/'}"
                    raise HubError(f"{where} is not JSON kernel-deps can read ({exc})") from None
                if not isinstance(items, list) or not all(isinstance(i, dict) and "path" in i for i in items):
                    raise HubError(
                        f"the Hub's tree listing of {folder or '/'} is malformed",
                        subject=f"{repo_id}@{commit[:12]}",
                    )
                entries += items
                url = resp.links.get("next", {}).get("url")
        except (RevisionNotFoundError, RepoNotFoundError):
            if not folder:
                raise RevisionNotFoundError(repo_id, commit) from None
            # Some servers answer 404 both for a missing folder and a missing commit;
            # only on this error path, ask for the root to tell which it is.
            self._list_tree(repo_id, commit, "", recursive=False)
            raise PathNotFoundError(repo_id, commit, folder) from None
        return entries

    def _root_listing(
        self, url: str, subject: RequestSubject, params: dict | None, retries: int | None = None
    ) -> httpx2.Response:
        """The first page of the listing of a whole commit, ``url`` being ``.../tree/<commit>``.

        Asked as ``tree/<commit>/``, which the Hub answers as it answers ``tree/<commit>``;
        olah answers the form without the slash only with a redirect to this one, a request
        more per commit. A server that refuses the slash (404, or another error that is
        neither a refusal of access nor a fault worth retrying) is asked once without it,
        and once that form has answered, only without it for the rest of the run."""
        if not self._root_without_slash:
            try:
                return self.transport.get(url + "/", subject, params=params, retries=retries)
            except (OfflineError, HubAuthError, HubUnavailableError):
                raise
            except HubError:
                pass  # refused: perhaps only this form; the plain one decides
        resp = self.transport.get(url, subject, params=params, retries=retries)
        self._root_without_slash = True
        return resp

    def _api_url(self, repo_id: str, tail: str, repo_type: str | None = None) -> str:
        """``<endpoint>/api/<kernels|models>/<repo_id>/<tail>`` for ``repo_type``, by default the repo's."""
        plural = REPO_TYPE_PLURALS[repo_type or self.repo_type(repo_id)]
        return f"{self.endpoint}/api/{plural}/{repo_id}/{tail}"

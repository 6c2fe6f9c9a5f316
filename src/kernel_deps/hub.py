"""Every conversation with the Hugging Face Hub, through huggingface_hub.

Kernel repos are ``repo_type="kernel"``; older kernels live in ``model`` repos, which are
used when no kernel repo of that id exists. Refs are always listed first and every later
call names a full commit SHA, so a result never depends on a ref moving mid-run.
Hub failures become :mod:`kernel_deps.errors` types with messages a user can act on.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

import httpx2
from huggingface_hub import HfApi, constants, hf_hub_url
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    RepositoryNotFoundError,
)
from huggingface_hub.errors import RevisionNotFoundError as HfRevisionNotFoundError
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

from kernel_deps.errors import (
    HubAuthError,
    HubError,
    HubUnavailableError,
    OfflineError,
    RepoNotFoundError,
    RevisionNotFoundError,
)
from kernel_deps.settings import (
    BUDGET_ENV,
    BUILD_DIR,
    KERNEL,
    MODEL,
    REPO_TYPE_PLURALS,
    env_seconds,
    is_offline,
)
from kernel_deps.spec import validate_repo_id
from kernel_deps.versions import GitRef

T = TypeVar("T")

# Total time one client (one command) may spend retrying; KERNELS_HUB_BUDGET overrides.
DEFAULT_BUDGET = 600.0
MAX_BACKOFF = 8.0
# metadata.json is a few hundred bytes; anything far larger is not one.
MAX_METADATA_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class RepoRefs:
    """The branches and tags of one repo, and the repo type it was found as."""

    repo_id: str
    repo_type: str
    refs: tuple[GitRef, ...]


@dataclass(frozen=True, slots=True)
class TreeFile:
    """A file of a repo at a commit, as the Hub lists it."""

    path: str
    size: int
    blob_id: str
    lfs_sha256: str | None

    @property
    def content_hash(self) -> str:
        """The hash that names this file's content: LFS SHA-256, else git blob SHA-1."""
        return self.lfs_sha256 or self.blob_id


class HubClient:
    """A Hub session: endpoint, token, retry policy, and per-run memo of repo types."""

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
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")
        self.token = token if token is not None else (os.environ.get("HF_TOKEN") or None)
        self.retries = retries
        self.backoff = backoff
        self.timeout = timeout
        self.budget = budget if budget is not None else env_seconds(BUDGET_ENV, DEFAULT_BUDGET)
        self.deadline = time.monotonic() + self.budget
        self._api = HfApi(endpoint=self.endpoint, token=self.token)
        self._repo_types: dict[str, str] = {}
        self._lock = threading.Lock()

    # -- refs -------------------------------------------------------------------------

    def list_refs(self, repo_id: str) -> RepoRefs:
        """Branches and tags of ``repo_id``, from the kernel repo or else the model repo."""
        validate_repo_id(repo_id)
        self._require_online(repo_id)
        for repo_type in (KERNEL, MODEL):
            try:
                refs = self._call(
                    repo_id, None, lambda: self._api.list_repo_refs(repo_id, repo_type=repo_type)
                )
            except RepoNotFoundError:
                continue
            with self._lock:
                self._repo_types[repo_id] = repo_type
            found = [GitRef(b.name, "branch", b.target_commit) for b in refs.branches]
            found += [GitRef(t.name, "tag", t.target_commit) for t in refs.tags]
            return RepoRefs(repo_id, repo_type, tuple(found))
        raise RepoNotFoundError(repo_id, self.endpoint)

    def repo_type(self, repo_id: str) -> str:
        """``kernel`` or ``model``: where ``repo_id`` was found (lists refs if not yet known)."""
        with self._lock:
            known = self._repo_types.get(repo_id)
        return known or self.list_refs(repo_id).repo_type

    # -- trees ------------------------------------------------------------------------

    def list_variants(self, repo_id: str, commit: str) -> list[str]:
        """Names of the ``build/<variant>`` folders of ``repo_id`` at ``commit``, sorted."""
        entries = self._list_tree(repo_id, commit, BUILD_DIR, recursive=False)
        prefix = BUILD_DIR + "/"
        return sorted(
            e["path"][len(prefix):] for e in entries if e.get("type") == "directory" and e["path"].startswith(prefix)
        )

    def list_variant_files(self, repo_id: str, commit: str, variant: str | None = None) -> list[TreeFile]:
        """Every file under ``build/<variant>/`` (or all of ``build/``) at ``commit``."""
        folder = f"{BUILD_DIR}/{variant}" if variant else BUILD_DIR
        entries = self._list_tree(repo_id, commit, folder, recursive=True)
        try:
            return [
                TreeFile(
                    path=e["path"],
                    size=int(e["lfs"]["size"] if e.get("lfs") else e["size"]),
                    blob_id=e["oid"],
                    lfs_sha256=e["lfs"]["oid"] if e.get("lfs") else None,
                )
                for e in entries
                if e.get("type") == "file"
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise HubError(f"{repo_id}@{commit[:12]}: the Hub's tree listing of {folder} is malformed ({exc!r})") from None

    def read_metadata(self, repo_id: str, commit: str, variant: str) -> dict:
        """The parsed ``build/<variant>/metadata.json`` at ``commit`` (not cached on disk)."""
        data = self.read_small_file(repo_id, commit, f"{BUILD_DIR}/{variant}/metadata.json")
        try:
            parsed = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise HubError(f"{repo_id}@{commit[:12]}: build/{variant}/metadata.json is not valid JSON ({exc})") from None
        if not isinstance(parsed, dict):
            raise HubError(f"{repo_id}@{commit[:12]}: build/{variant}/metadata.json is not a JSON object")
        return parsed

    def read_small_file(self, repo_id: str, commit: str, path: str, limit: int = MAX_METADATA_BYTES) -> bytes:
        """The bytes of one small file at ``commit``; refuses files over ``limit`` bytes."""
        repo_type = self.repo_type(repo_id)
        url = hf_hub_url(repo_id, path, repo_type=repo_type, revision=commit, endpoint=self.endpoint)
        headers = build_hf_headers(token=self.token)

        def fetch() -> bytes:
            chunks, total = [], 0
            with get_session().stream("GET", url, headers=headers, timeout=self.timeout, follow_redirects=True) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    resp.raise_for_status()
                for chunk in resp.iter_bytes():
                    total += len(chunk)
                    if total > limit:
                        raise HubError(f"{repo_id}@{commit[:12]}: {path} is larger than {limit} bytes; refusing to read it")
                    chunks.append(chunk)
            return b"".join(chunks)

        return self._call(repo_id, commit, fetch)

    def commit_history(self, repo_id: str, commit: str) -> set[str]:
        """The commits reachable from ``commit`` (as far back as the Hub lists them)."""
        # Read only the commit ids: HfApi.list_repo_commits also parses author records,
        # which some Hub-compatible servers shape differently.
        url = self._api_url(repo_id, f"commits/{commit}")

        def fetch() -> set[str]:
            resp = get_session().get(url, headers=build_hf_headers(token=self.token), timeout=self.timeout)
            resp.raise_for_status()
            return {entry["id"] for entry in resp.json() if isinstance(entry, dict) and "id" in entry}

        return self._call(repo_id, commit, fetch)

    def download_to(
        self,
        repo_id: str,
        commit: str,
        path: str,
        dest: Path,
        *,
        size: int | None = None,
        on_bytes: Callable[[int], None] | None = None,
    ) -> None:
        """Stream one file at ``commit`` into ``dest``; a retry after a transient fault
        resumes with a Range request where the server allows it."""
        repo_type = self.repo_type(repo_id)
        url = hf_hub_url(repo_id, path, repo_type=repo_type, revision=commit, endpoint=self.endpoint)

        def fetch() -> None:
            have = dest.stat().st_size if dest.exists() else 0
            headers = build_hf_headers(token=self.token)
            if have and size is not None and have < size:
                headers["Range"] = f"bytes={have}-"
            with get_session().stream("GET", url, headers=headers, timeout=self.timeout, follow_redirects=True) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    resp.raise_for_status()
                resumed = resp.status_code == 206 and "Range" in headers
                if on_bytes and have and not resumed:
                    on_bytes(-have)  # starting over: take back what was counted
                with open(dest, "ab" if resumed else "wb") as out:
                    for chunk in resp.iter_bytes():  # as it arrives: a cut keeps what came
                        out.write(chunk)
                        if on_bytes:
                            on_bytes(len(chunk))

        self._call(repo_id, commit, fetch, what=path)

    def _list_tree(self, repo_id: str, commit: str, folder: str, *, recursive: bool) -> list[dict]:
        """The tree entries under ``folder`` at ``commit``, following pagination.

        Read with huggingface_hub's session rather than ``HfApi.list_repo_tree``, whose
        own retries would multiply with ours and escape the time budget.
        """
        url: str | None = self._api_url(repo_id, f"tree/{commit}/{folder}").rstrip("/")
        params: dict | None = {"recursive": str(recursive).lower(), "expand": "false"}
        headers = build_hf_headers(token=self.token)
        entries: list[dict] = []

        def page(page_url: str, page_params: dict | None):
            resp = get_session().get(page_url, params=page_params, headers=headers, timeout=self.timeout)
            hf_raise_for_status(resp)
            try:
                return resp.json(), resp.links.get("next", {}).get("url")
            except ValueError:
                raise HubError(f"{repo_id}@{commit[:12]}: the Hub's tree listing of {folder or '/'} is not JSON") from None

        try:
            while url:
                items, url = self._call(repo_id, commit, lambda u=url, p=params: page(u, p))
                params = None  # the next-page URL carries its own query
                if not isinstance(items, list) or not all(isinstance(i, dict) and "path" in i for i in items):
                    raise HubError(f"{repo_id}@{commit[:12]}: the Hub's tree listing of {folder or '/'} is malformed")
                entries += items
        except (RevisionNotFoundError, RepoNotFoundError):
            if not folder:
                raise RevisionNotFoundError(repo_id, commit) from None
            # Some servers answer 404 both for a missing folder and a missing commit;
            # only on this error path, ask for the root to tell which it is.
            self._list_tree(repo_id, commit, "", recursive=False)
            return []
        return entries

    # -- plumbing ---------------------------------------------------------------------

    def _api_url(self, repo_id: str, tail: str) -> str:
        """``<endpoint>/api/<kernels|models|...>/<repo_id>/<tail>`` for the repo's type."""
        plural = REPO_TYPE_PLURALS[self.repo_type(repo_id)]
        return f"{self.endpoint}/api/{plural}/{repo_id}/{tail}"

    def _require_online(self, repo_id: str) -> None:
        if is_offline():
            raise OfflineError(f"{repo_id}: HF_HUB_OFFLINE is set, but this needs the Hub; unset it to go online")

    def _call(self, repo_id: str, revision: str | None, fn: Callable[[], T], *, what: str | None = None) -> T:
        """Run one Hub call, retrying transient faults (5xx, resets, timeouts, cut bodies)
        with jittered exponential backoff, within ``retries`` and the client's time budget."""
        self._require_online(repo_id)
        attempt = 0
        while True:
            try:
                return fn()
            except (HfHubHTTPError, httpx2.HTTPError) as exc:
                attempt += 1
                delay = min(MAX_BACKOFF, self.backoff * (2 ** (attempt - 1))) * (0.5 + random.random())
                out_of_time = time.monotonic() + delay > self.deadline
                # A refused connection means no server at all: retry briefly, then say so.
                limit = min(self.retries, 2) if isinstance(exc, httpx2.ConnectError) else self.retries
                if not _is_transient(exc) or attempt > limit or out_of_time:
                    mapped = self._map_error(exc, repo_id, revision, attempt, what)
                    if out_of_time and _is_transient(exc):
                        mapped = HubUnavailableError(
                            f"{mapped.message} (gave up: the {self.budget:g} s budget is spent; "
                            "raise KERNELS_HUB_BUDGET to wait longer)"
                        )
                    raise mapped from None
                time.sleep(delay)

    def _map_error(
        self, exc: Exception, repo_id: str, revision: str | None, attempts: int, what: str | None = None
    ) -> HubError:
        status = _status(exc)
        if what:
            repo_id = f"{repo_id} {what}"
        if isinstance(exc, HfRevisionNotFoundError) and revision:
            return RevisionNotFoundError(repo_id, revision)
        if isinstance(exc, RepositoryNotFoundError) or (
            status in (401, 404) and revision is None and not self.token
        ):
            return RepoNotFoundError(repo_id, self.endpoint)
        if status == 404 or isinstance(exc, EntryNotFoundError):
            # Missing commits and missing files both come back as 404 from some servers.
            return RevisionNotFoundError(repo_id, revision) if revision else RepoNotFoundError(repo_id, self.endpoint)
        if status in (401, 403):
            return HubAuthError(
                f"{repo_id}: the Hub at {self.endpoint} refused access (HTTP {status}); "
                "check HF_TOKEN and that it can read this repo"
            )
        if status is not None and status >= 500:
            return HubUnavailableError(
                f"{repo_id}: the Hub at {self.endpoint} kept failing (HTTP {status} after {attempts} attempts); "
                "try again later"
            )
        if isinstance(exc, httpx2.TimeoutException):
            return HubUnavailableError(
                f"{repo_id}: the Hub at {self.endpoint} timed out after {attempts} attempts; "
                "check the network or HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use the cache only"
            )
        if isinstance(exc, httpx2.TransportError):
            return HubUnavailableError(
                f"{repo_id}: cannot reach the Hub at {self.endpoint} ({_first_line(exc)}); "
                "check the network or HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use the cache only"
            )
        return HubError(f"{repo_id}: the Hub at {self.endpoint} answered an error: {_first_line(exc)}")


def _status(exc: Exception) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _is_transient(exc: Exception) -> bool:
    status = _status(exc)
    if status is not None:
        return status >= 500 or status == 429
    return isinstance(exc, httpx2.TransportError)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]

"""The one road to the Hub: every HTTP request kernel-deps sends goes through a Transport.

A :class:`Transport` refuses to send anything while ``HF_HUB_OFFLINE`` is set, gives every
attempt connect and read timeouts, retries transient faults (5xx, 429, resets, timeouts,
cut bodies) with jittered exponential backoff within the retry count, waits out a rate
limit (HTTP 429: after ``Retry-After``, else backing off) for as long as the time budget
allows (:mod:`kernel_deps.hub.backoff`), and turns every
HTTP error, and every OS error of the file a download writes, into a
:mod:`kernel_deps.core.errors` type whose message is one line a user can act on.

The time budget (``KERNELS_HUB_BUDGET``) belongs to one operation, not to the client:
:meth:`Transport.operation` starts a deadline that every request inside it shares (a
command's library function opens one), and a request made outside any operation gets a
deadline of its own. The deadline bounds everything: no attempt starts after it, no
backoff sleeps past it, every wait for a connection or for the next bytes is cut to the
time left, and a body that keeps trickling in is abandoned when the clock runs out.

Requests are plain GETs over huggingface_hub's shared HTTP session, with its headers
(token, user agent) and its error classification (``hf_raise_for_status``). No ``HfApi``
method is used: those carry retries of their own and no timeout this module controls.

Credentials in the endpoint (``https://user:pass@host``) stay in the URLs requests go to
(the HTTP client sends them as Basic authentication) and never in a message: messages name
the Hub by :attr:`Transport.shown_endpoint`, and a lower layer's text (an exception, a
Hub's error message that echoes what it was sent) is redacted of the endpoint's
credentials and of the token before it is quoted (:mod:`kernel_deps.core.redaction`).
The same goes for huggingface_hub's own log records (``HF_DEBUG=1`` logs every request's
URL and a curl command for it): a filter on its loggers and handlers redacts each record
before any handler writes it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Callable, TypeVar

from kernel_deps.hub.environment import import_huggingface_hub

import_huggingface_hub()  # first: malformed HF_* settings must not fail this import

import httpx2
from huggingface_hub import constants
from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, OfflineModeIsEnabled, RepositoryNotFoundError
from huggingface_hub.errors import RevisionNotFoundError as HfRevisionNotFoundError
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

from kernel_deps.core.errors import (
    FileWriteError,
    HubAuthError,
    HubError,
    HubUnavailableError,
    OfflineError,
    RepoNotFoundError,
    RevisionNotFoundError,
    UsageError,
)
from kernel_deps.core.redaction import ENDPOINT_ENV, redact, shown_url, url_secrets
from kernel_deps.core.records import Record
from kernel_deps.core.settings import (
    BUDGET_ENV, DEFAULT_BUDGET, OFFLINE_ENV, TRANSFORMERS_OFFLINE_ENV, env_seconds, is_offline, offline_env,
)
from kernel_deps.hub.backoff import RATE_LIMITED, is_transient, next_delay, retry_after_of, retry_after_seconds, status_of
from kernel_deps.hub.environment import check_hub_settings, endpoint_problem

T = TypeVar("T")

# Connecting takes milliseconds when the Hub is up; waiting longer only delays the retry.
CONNECT_TIMEOUT = 10.0
# An attempt gets at least this long to connect and to receive each chunk.
MIN_ATTEMPT_TIMEOUT = 0.05
# A refused connection means no server at all: retry it only this often.
REFUSED_RETRIES = 2


class RequestSubject(Record):
    """What a Hub request is about, for its error messages: a repo, a revision, a file.

    (Not a deployment target: that is :class:`kernel_deps.core.targets.Target`.)
    """

    __slots__ = ("repo_id", "revision", "what")
    repo_id: str
    revision: str | None
    what: str | None

    def __init__(self, repo_id: str, revision: str | None = None, what: str | None = None) -> None:
        self._init(repo_id, revision, what)

    @property
    def label(self) -> str:
        return f"{self.repo_id} {self.what}" if self.what else self.repo_id


class _RedactedLogs(logging.Filter):
    """Rewrites each huggingface_hub log record without the credentials of any Transport made."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        shown = redact(text, self.secrets)
        if shown != text:
            record.msg, record.args = shown, None
        return True


_LOG_FILTER = _RedactedLogs()


def _redact_hub_logs(secrets: set[str]) -> None:
    """Add ``secrets`` to what huggingface_hub's log records are redacted of, and put the
    filter on every huggingface_hub logger there is now and on their handlers (a logger's
    filter sees only records logged to it, a handler's those that reach it)."""
    _LOG_FILTER.secrets |= {secret for secret in secrets if secret}
    manager = logging.Logger.manager
    names = [name for name in list(manager.loggerDict) if name.split(".")[0] == "huggingface_hub"]
    for name in names:
        logger = logging.getLogger(name)
        for target in (logger, *logger.handlers):
            if _LOG_FILTER not in target.filters:
                target.addFilter(_LOG_FILTER)


class BudgetSpent(Exception):
    """The operation's deadline passed while a request was under way."""


class Transport:
    """Endpoint, token, timeouts, retry policy and time budget shared by every request of one client."""

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
        if endpoint is None:
            check_hub_settings()
        elif problem := endpoint_problem(endpoint):
            raise UsageError(f"endpoint {shown_url(endpoint)!r}: {problem}")
        # With its credentials, if any: for the URLs of requests only.
        self.endpoint = (endpoint or os.environ.get(ENDPOINT_ENV) or constants.ENDPOINT).strip().rstrip("/")
        # The endpoint as every message names it: its user-info replaced by ***.
        self.shown_endpoint = shown_url(self.endpoint)
        self.token = token if token is not None else (os.environ.get("HF_TOKEN") or None)
        self.retries = retries
        self.backoff = backoff
        self.timeout = timeout
        self.budget = budget if budget is not None else env_seconds(BUDGET_ENV, DEFAULT_BUDGET)
        self._deadline: float | None = None
        self._hf_headers: dict[str, str] | None = None
        self._depth = 0
        self._guard = threading.Lock()
        _redact_hub_logs({self.token or "", *url_secrets(self.endpoint)})

    # -- the time budget --------------------------------------------------------------

    @contextmanager
    def operation(self) -> Iterator["Transport"]:
        """Run one operation (a command) under one deadline, ``budget`` seconds from now.

        Requests inside it, from any thread, share the deadline; an operation opened
        inside another (or while another runs on this client) keeps the outer deadline.
        """
        with self._guard:
            if self._depth == 0:
                self._deadline = time.monotonic() + self.budget
            self._depth += 1
        try:
            yield self
        finally:
            with self._guard:
                self._depth -= 1
                if self._depth == 0:
                    self._deadline = None

    def time_left(self) -> float:
        """Seconds left in the current operation (the whole budget outside one)."""
        deadline = self._deadline
        return self.budget if deadline is None else deadline - time.monotonic()

    def budget_spent(self, subject: str | None, reason: str | None, hint: str | None = None) -> HubUnavailableError:
        """The error for an operation whose budget ran out, ``reason`` saying where it was; the
        note of the spent budget ends the line."""
        spent = f"(gave up: the {self.budget:g} s budget is spent; raise {BUDGET_ENV} to wait longer)"
        if hint is None:
            return HubUnavailableError(f"{reason} {spent}", subject=subject)
        return HubUnavailableError(reason, subject=subject, hint=f"{hint} {spent}")

    # -- requests ---------------------------------------------------------------------

    def get(
        self, url: str, subject: RequestSubject, *, params: dict | None = None, retries: int | None = None
    ) -> httpx2.Response:
        """GET ``url`` and read the whole answer; a 2xx response or a mapped error (retries: see stream)."""

        def attempt() -> httpx2.Response:
            resp = get_session().get(
                url, params=params, headers=self.headers(), timeout=self.attempt_timeout(), follow_redirects=True
            )
            hf_raise_for_status(resp)
            return resp

        return self.call(subject, attempt, retries=retries)

    def stream(
        self,
        url: str,
        subject: RequestSubject,
        consume: Callable[[httpx2.Response], T],
        *,
        headers: Callable[[], dict[str, str]] | None = None,
        retries: int | None = None,
    ) -> T:
        """GET ``url`` and hand the streaming 2xx response to ``consume``; an attempt cut
        short is retried from the start: ``headers`` is asked again (e.g. for a Range).
        ``retries`` other than the client's: 0 for a read that may well fail (asked early)."""

        def attempt() -> T:
            extra = headers() if headers else {}
            with get_session().stream(
                "GET", url, headers=self.headers(extra), timeout=self.attempt_timeout(), follow_redirects=True
            ) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    hf_raise_for_status(resp)
                return consume(resp)

        return self.call(subject, attempt, retries=retries)

    def chunks(self, resp: httpx2.Response) -> Iterator[bytes]:
        """The body of a streaming response as it arrives, within the deadline: before each
        read the read timeout is cut to the time left, and once none is left the download
        stops (a body trickling in a byte at a time never times out on its own)."""
        timeouts = resp.request.extensions.get("timeout")
        pieces = resp.iter_bytes()
        while True:
            left = self.time_left()
            if left <= 0:
                raise BudgetSpent()
            if isinstance(timeouts, dict):  # the HTTP client reads it again before every read
                timeouts["read"] = max(min(self.timeout, left), MIN_ATTEMPT_TIMEOUT)
            try:
                piece = next(pieces)
            except StopIteration:
                return
            yield piece

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """huggingface_hub's headers for this client's token, plus ``extra``."""
        if self._hf_headers is None:
            # Built once per client: the token is fixed, and building them (the user
            # agent) costs about a millisecond, paid on every request of a lock otherwise.
            self._hf_headers = build_hf_headers(token=self.token)
        return {**self._hf_headers, **(extra or {})}

    def attempt_timeout(self) -> httpx2.Timeout:
        """Timeouts for one attempt: the client's, cut to the time left in the budget."""
        left = max(self.time_left(), MIN_ATTEMPT_TIMEOUT)
        read = min(self.timeout, left)
        return httpx2.Timeout(read, connect=min(CONNECT_TIMEOUT, read))

    # -- the retry loop ---------------------------------------------------------------

    def call(self, subject: RequestSubject, attempt: Callable[[], T], *, retries: int | None = None) -> T:
        """Run ``attempt`` (one request), retrying transient faults with jittered
        exponential backoff within ``retries`` (by default the client's) and the
        operation's deadline (a request outside any operation is one); errors are mapped."""
        if is_offline():
            raise self.offline(subject)
        with self.operation():
            return self._retry(subject, attempt, self.retries if retries is None else retries)

    def offline(self, subject: RequestSubject) -> OfflineError:
        """The error for a request offline mode forbids, naming the variable that set it."""
        return OfflineError(
            f"{offline_env()} is set, but this needs the Hub",
            subject=subject.repo_id,
            hint="unset it to go online",
        )

    def secrets(self) -> set[str]:
        """The credentials this client sends: its token, the one in its headers, the endpoint's user-info."""
        sent = (self._hf_headers or {}).get("authorization", "")
        return {self.token or "", sent.removeprefix("Bearer ").strip(), *url_secrets(self.endpoint)}

    def quoted(self, exc: Exception) -> str:
        """The first line of a lower layer's error text, without this client's credentials."""
        return redact(first_line(exc), self.secrets())

    def _retry(self, subject: RequestSubject, attempt: Callable[[], T], retries: int) -> T:
        tries = 0
        while True:
            if self.time_left() <= 0:
                raise self.budget_spent(subject.label, f"no time left to ask the Hub at {self.shown_endpoint}")
            try:
                return attempt()
            except BudgetSpent:
                raise self.budget_spent(subject.label, f"the Hub at {self.shown_endpoint} sends too slowly") from None
            except OfflineModeIsEnabled:
                # huggingface_hub reads offline mode once, when imported; it was on then.
                raise OfflineError(
                    f"huggingface_hub was imported in offline mode ({OFFLINE_ENV} or "
                    f"{TRANSFORMERS_OFFLINE_ENV} was set then), but this needs the Hub",
                    subject=subject.repo_id,
                    hint="start again without it",
                ) from None
            except (HfHubHTTPError, httpx2.HTTPError, OSError) as exc:
                if isinstance(exc, OSError) and not isinstance(exc, (HfHubHTTPError, httpx2.HTTPError)):
                    # The HTTP client wraps socket errors; a bare OSError is local file I/O.
                    where = f" {exc.filename}" if exc.filename else ""
                    raise FileWriteError(
                        f"cannot write the download{where} ({exc.strerror or self.quoted(exc)})",
                        subject=subject.label,
                        hint="check free space and permissions of the cache folder",
                    ) from None
                tries += 1
                rate_limited = status_of(exc) == RATE_LIMITED
                asked = retry_after_seconds(retry_after_of(exc)) if rate_limited else None
                delay = next_delay(tries, self.backoff, rate_limited=rate_limited, asked=asked)
                if asked is not None and asked < self.time_left():  # its spread never costs the wait asked
                    delay = min(delay, max(asked, self.time_left() - MIN_ATTEMPT_TIMEOUT))
                out_of_time = delay >= self.time_left()
                if rate_limited:  # a rate limit is waited out for as long as the budget lasts
                    if out_of_time or not retries:
                        raise self.rate_limited(subject, tries, asked) from None
                    time.sleep(delay)
                    continue
                limit = min(retries, REFUSED_RETRIES) if isinstance(exc, httpx2.ConnectError) else retries
                if not is_transient(exc) or tries > limit or out_of_time:
                    mapped = self.map_error(exc, subject, tries)
                    if out_of_time and is_transient(exc):
                        mapped = self.budget_spent(mapped.subject, mapped.reason, mapped.hint)
                    raise mapped from None
                time.sleep(delay)

    def rate_limited(self, subject: RequestSubject, attempts: int, asked: float | None) -> HubUnavailableError:
        """The error for a request the Hub kept refusing with HTTP 429 until the budget could not cover the wait."""
        waited = f"it asked to wait {asked:.0f} s more, " if asked is not None else ""
        return HubUnavailableError(
            f"{subject.label}: the Hub at {self.shown_endpoint} is rate-limiting requests (HTTP 429 after "
            f"{attempts} attempts; {waited}past the {self.budget:g} s budget of {BUDGET_ENV}); try again later, "
            f"or raise {BUDGET_ENV} to wait longer"
        )

    def map_error(self, exc: Exception, subject: RequestSubject, attempts: int) -> HubError:
        """The kernel-deps error for a failed request, naming the repo (and file)."""
        status = status_of(exc)
        where, revision = subject.label, subject.revision
        if isinstance(exc, HfRevisionNotFoundError) and revision:
            return RevisionNotFoundError(where, revision)
        if isinstance(exc, RepositoryNotFoundError) or (status in (401, 404) and revision is None and not self.token):
            return RepoNotFoundError(where, self.shown_endpoint)
        if status == 404 or isinstance(exc, EntryNotFoundError):
            # Missing commits and missing files both come back as 404 from some servers.
            return RevisionNotFoundError(where, revision) if revision else RepoNotFoundError(where, self.shown_endpoint)
        if status in (401, 403):
            return HubAuthError(
                f"the Hub at {self.shown_endpoint} refused access (HTTP {status})",
                subject=where,
                hint="check HF_TOKEN and that it can read this repo",
            )
        if status is not None and status >= 500:
            return HubUnavailableError(
                f"the Hub at {self.shown_endpoint} kept failing (HTTP {status} after {attempts} "
                "attempts)",
                subject=where,
                hint="try again later",
            )
        if isinstance(exc, httpx2.TimeoutException):
            return HubUnavailableError(
                f"the Hub at {self.shown_endpoint} timed out after {attempts} attempts",
                subject=where,
                hint="check the network or HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use the cache only",
            )
        if isinstance(exc, httpx2.TransportError):
            return HubUnavailableError(
                f"cannot reach the Hub at {self.shown_endpoint} ({self.quoted(exc)})",
                subject=where,
                hint="check the network or HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use the cache only",
            )
        return HubError(f"the Hub at {self.shown_endpoint} answered an error: {self.quoted(exc)}", subject=where)


def first_line(exc: Exception) -> str:
    """The first line of ``exc``'s text (its type's name when it has none), unredacted."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]

"""Whether a failed Hub request is worth another attempt, and how long to wait before it.

A Hub that rate-limits answers HTTP 429, often with ``Retry-After``: a number of seconds or
an HTTP date (RFC 9110). That wait is honoured, never shortened, and lengthened by a little
jitter so that many processes told the same wait do not all come back in the same instant.
Without it (or for any other transient fault) the wait grows exponentially with the attempt
and is jittered. The header is input from outside: a value that is neither form, or a date
in the past, counts as absent or as no wait.
"""

from __future__ import annotations

import math
import random
import time
from email.utils import parsedate_to_datetime

import httpx2

# Exponential backoff stops growing here for faults; a rate limit may ask for longer.
MAX_BACKOFF = 8.0
# A rate limit without Retry-After backs off further than a fault does before the cap.
MAX_RATE_LIMIT_BACKOFF = 30.0
# A Retry-After wait is lengthened by up to this fraction (and at least a few milliseconds'
# worth of spread), so that the processes it was sent to do not all retry together.
RETRY_AFTER_SPREAD = 0.2
RATE_LIMITED = 429


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """The wait ``Retry-After`` asks for, in seconds (0 for a date already past); None when
    the header is absent or is neither a number of seconds nor an HTTP date."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if text.isascii() and text.isdigit():
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None or when.tzinfo is None:  # RFC 9110 dates are in GMT; one without a zone is not one
        return None
    seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def next_delay(attempt: int, base: float, *, rate_limited: bool, asked: float | None) -> float:
    """The wait before attempt ``attempt + 1``: what ``Retry-After`` asked (``asked``), spread a
    little, else ``base`` doubled per attempt up to the cap, jittered between half and one and
    a half times that."""
    if asked is not None:
        return asked * (1 + RETRY_AFTER_SPREAD * random.random()) + 0.05 * random.random()
    cap = MAX_RATE_LIMIT_BACKOFF if rate_limited else MAX_BACKOFF
    return min(cap, base * (2 ** (attempt - 1))) * (0.5 + random.random())


def status_of(exc: Exception) -> int | None:
    """The HTTP status of a failed request, if it got an answer."""
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def retry_after_of(exc: Exception) -> str | None:
    """The ``Retry-After`` header of a failed request's answer, if it had one."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    return headers.get("retry-after") if headers is not None else None


def is_transient(exc: Exception) -> bool:
    """Whether waiting may help: 5xx, 429, or no complete answer at all."""
    status = status_of(exc)
    if status is not None:
        return status >= 500 or status == 429
    return isinstance(exc, httpx2.TransportError)

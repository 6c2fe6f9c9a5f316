"""The Hub's own environment, as huggingface_hub reads it: its import guard and the endpoint's check.

huggingface_hub parses some variables when it is imported (``HF_ENDPOINT``, whole numbers
of seconds) and raises a traceback on a malformed one. :func:`import_huggingface_hub`
imports it with those set aside, so a command that never uses the Hub still runs, and
:func:`check_hub_settings` turns them into bad input for the commands that do. An endpoint
is judged by :func:`endpoint_problem`, whose reason never quotes the URL's credentials.

Imports ``errors``, ``redaction``.
"""

from __future__ import annotations

import os
import re
import sys
from urllib.parse import urlsplit

from kernel_deps.core.errors import UsageError
from kernel_deps.core.redaction import ENDPOINT_ENV, redact, shown_url, url_secrets

# Whole numbers huggingface_hub parses when it is imported (a traceback when malformed).
HUB_INT_ENVS = ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT")


def _bad_hub_settings() -> dict[str, str]:
    """The Hub-related variables huggingface_hub would fail on at import: name -> value."""
    bad = {name: os.environ[name] for name in HUB_INT_ENVS if name in os.environ and not _is_int(os.environ[name])}
    endpoint = os.environ.get(ENDPOINT_ENV)
    if endpoint and endpoint_problem(endpoint):
        bad[ENDPOINT_ENV] = endpoint
    return bad


def import_huggingface_hub() -> None:
    """Import huggingface_hub with malformed settings it reads at import set aside.

    huggingface_hub parses some variables when it is imported and raises a traceback on a
    malformed one, which would break even commands that never use the Hub (``--version``,
    an offline ``verify``). The variables are restored at once; :func:`check_hub_settings`
    turns them into bad input for the commands that do need the Hub.
    """
    if "huggingface_hub.constants" in sys.modules:
        return
    aside = _bad_hub_settings()
    for name in aside:
        del os.environ[name]
    try:
        import huggingface_hub.constants  # noqa: F401
    finally:
        os.environ.update(aside)


def check_hub_settings() -> None:
    """UsageError naming the first Hub-related variable that is malformed."""
    for name, raw in _bad_hub_settings().items():
        if name == ENDPOINT_ENV:
            raise UsageError(
                endpoint_problem(raw),
                subject=f"{name}={shown_url(raw)!r}",
                hint="set it to the Hub's URL, e.g. https://huggingface.co",
            )
        raise UsageError("expected a whole number of seconds", subject=f"{name}={raw!r}")


def endpoint_problem(url: str) -> str | None:
    """Why ``url`` cannot be a Hub endpoint, or None when it can; never quoting the URL's
    credentials (an unescaped '/' in a password makes part of it read as the port)."""
    if _CONTROL.search(url.strip()):  # the HTTP client would refuse it with a traceback
        return "not a valid URL (it contains a control character)"
    try:
        parts = urlsplit(url.strip())
        if parts.port == 0:  # reading the port raises for one out of range or not a number
            return "port 0 is not a port a Hub listens on"
    except ValueError as exc:
        if "port" in str(exc).lower():  # quoting the "port" would quote what follows an unescaped '/'
            hint = "; a '/', '?', '#' or '@' in a user name or password must be percent-encoded"
            hint = hint if url_secrets(url) else ""
            return f"not a valid URL (the port after the host is not a number from 1 to 65535{hint})"
        return f"not a valid URL ({redact(str(exc), url_secrets(url))})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http:// or https:// URL with a host"
    return None


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _is_int(raw: str) -> bool:
    try:
        int(raw)
    except ValueError:
        return False
    return True

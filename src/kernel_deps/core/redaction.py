"""Keeping credentials out of everything kernel-deps shows.

A Hub address may carry credentials (``HF_ENDPOINT=https://user:pass@hub.internal``), and
requests carry a token. Both must keep working for requests and never be shown: the
endpoint is always rendered through :func:`shown_url`, and every error message passes
:func:`redact` when the error is made (:class:`kernel_deps.core.errors.KernelDepsError`), so
texts from lower layers (huggingface_hub, httpx, a Hub's own error message echoing what
it was sent) lose them too.

What counts as a credential: the user-info of any URL in the text, and each secret known
to the process, in every spelling a request sends it in: ``HF_TOKEN`` (or
``HUGGING_FACE_HUB_TOKEN``), and the user-info of ``HF_ENDPOINT`` as written, decoded,
and as the base64 of an HTTP Basic ``Authorization`` header. Callers holding other
secrets (a token passed to a client) pass them as ``secrets``.

This module imports nothing of kernel-deps: errors and settings use it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from urllib.parse import quote, unquote

HIDDEN = "***"
TOKEN_ENVS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
ENDPOINT_ENV = "HF_ENDPOINT"
# A secret this short would match ordinary words of a message; the user-info of a URL is
# still removed whatever its length.
MIN_SECRET_CHARS = 4

# ``scheme://user-info@`` inside any text: the user-info ends at the first '@' before the
# host part (a '/', '?', '#' or blank ends the authority without one). Compiled (through
# re's cache) by the first message redacted, not by every command that imports the errors.
_URL_USERINFO = r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#@]*@"


def _userinfo(url: str) -> str:
    """Everything a client could take for the user-info of ``url``: the text before its
    last '@' (after ``scheme://``). Wider than the URL grammar on purpose: a password
    with an unescaped '/' or '#' must not escape into a message either."""
    _scheme, sep, rest = url.strip().partition("://")
    if not sep:
        rest = url.strip()
    userinfo, at, _host = rest.rpartition("@")
    return userinfo if at else ""


def shown_url(url: str) -> str:
    """``url`` as messages show it: its user-info, if any, replaced by ``***``."""
    text = url.strip()
    userinfo = _userinfo(text)
    if not userinfo:
        return text
    start = text.find("://") + 3 if "://" in text else 0  # the user-info starts there
    return f"{text[:start]}{HIDDEN}{text[start + len(userinfo):]}"


def url_secrets(url: str) -> set[str]:
    """The credentials ``url`` carries, in each spelling a request or a message may use."""
    userinfo = _userinfo(url)
    if not userinfo:
        return set()
    import base64  # only for a URL with credentials, not at every start-up

    user, _, password = userinfo.partition(":")
    basic = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
    # The Basic header's base64 also without its '=' padding: a URL quoting it escapes '='.
    return {userinfo, unquote(userinfo), password, unquote(password), quote(unquote(password), safe=""),
            basic, basic.rstrip("=")}


def env_secrets() -> set[str]:
    """The credentials the environment holds: Hub tokens and ``HF_ENDPOINT``'s user-info (read now)."""
    found = {os.environ.get(name, "").strip() for name in TOKEN_ENVS}
    return found | url_secrets(os.environ.get(ENDPOINT_ENV, ""))


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with the user-info of every URL in it, and every known secret (the
    environment's and ``secrets``), replaced by ``***``."""
    text = re.sub(_URL_USERINFO, lambda m: f"{m['scheme']}{HIDDEN}@", text)
    # Longest first: a secret that contains another is replaced whole.
    for secret in sorted({*env_secrets(), *secrets}, key=len, reverse=True):
        if secret and len(secret) >= MIN_SECRET_CHARS and secret in text:
            text = text.replace(secret, HIDDEN)
    return text

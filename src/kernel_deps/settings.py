"""The names and settings every module shares: one definition each.

File and folder names (the lock, the build folder), the Hub repo types kernel-deps uses
and how the Hub and its cache spell them, how many Hub requests run at once, and the
environment variables kernel-deps reads. Variables are read when asked, not at import,
and parsed strictly: a value that is neither on nor off is bad input naming the variable.

This module imports nothing heavy: the CLI's start-up and the build hooks read it.
"""

from __future__ import annotations

import math
import os
import sys
from urllib.parse import urlsplit

from kernel_deps.errors import UsageError

LOCK_NAME = "kernels.lock"
PYPROJECT_NAME = "pyproject.toml"
# Written beside them while `kernels add` / `remove` replace pyproject.toml and the lock
# as one change; its presence means that change is committed but not yet fully applied.
EDIT_JOURNAL_NAME = ".kernels-edit.json"
# Held (an empty file, there only meanwhile) by every command that writes pyproject.toml or the lock.
EDIT_LOCK_NAME = ".kernels-edit.lock"
BUILD_DIR = "build"
# At the top of a kernel repo's main branch: its status, e.g. a redirect to another repo.
KERNEL_STATUS_NAME = "kernel-status.toml"

KERNEL = "kernel"
MODEL = "model"
# Kernel repos first: older kernels live in model repos, used when no kernel repo exists.
# The plural names both the Hub API path (/api/kernels/...) and the cache folder
# (kernels--org--name), as huggingface_hub spells them.
REPO_TYPE_PLURALS = {KERNEL: "kernels", MODEL: "models"}

# Hub requests one command runs at once (listings, metadata reads, file downloads).
HUB_WORKERS = 8
# Small Hub requests (refs, tree listings, metadata.json) one resolution keeps in flight
# at once: each mostly waits on its round trip, so on a slow link they all go together.
HUB_RESOLVE_WORKERS = 32

# Files hashed at once (verify, download's re-check, the loader): one thread per usable
# core, at most MAX_HASH_THREADS; KERNELS_HASH_THREADS sets it (1: hash in the caller).
HASH_THREADS_ENV = "KERNELS_HASH_THREADS"
MAX_HASH_THREADS = 8


def hash_threads() -> int:
    """How many files to hash at once: ``KERNELS_HASH_THREADS``, else the usable cores (capped)."""
    value = os.environ.get(HASH_THREADS_ENV, "").strip()
    if value:
        try:
            count = int(value)
        except ValueError:
            raise UsageError(f"{HASH_THREADS_ENV}={value!r} is not a whole number of threads") from None
        if count < 1:
            raise UsageError(f"{HASH_THREADS_ENV}={value!r}: set it to 1 or more")
        return count
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, MAX_HASH_THREADS))

OFFLINE_ENV = "HF_HUB_OFFLINE"
BUDGET_ENV = "KERNELS_HUB_BUDGET"
ALLOW_STALE_ENV = "KERNELS_ALLOW_STALE_LOCK"
ENDPOINT_ENV = "HF_ENDPOINT"
# Whole numbers huggingface_hub parses when it is imported (a traceback when malformed).
HUB_INT_ENVS = ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT")

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


def env_flag(name: str) -> bool:
    """The on/off environment variable ``name`` (unset: off); UsageError for any other value."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise UsageError(f"{name}={raw!r}: expected 1 or 0 (also true/false, yes/no, on/off)")


def env_seconds(name: str, default: float) -> float:
    """A finite, non-negative number of seconds from the environment (unset or empty:
    ``default``); UsageError for anything else (``nan``, ``inf``, ``-1``, ``soon``)."""
    raw = os.environ.get(name, "")
    if not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{name}={raw!r}: expected a number of seconds (0 or more, finite)")
    return value


def is_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` asks for no network (read now, not at import)."""
    return env_flag(OFFLINE_ENV)


# -- the Hub's own settings -------------------------------------------------------------


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
            raise UsageError(f"{name}={raw!r}: {endpoint_problem(raw)}; set it to the Hub's URL, e.g. https://huggingface.co")
        raise UsageError(f"{name}={raw!r}: expected a whole number of seconds")


def endpoint_problem(url: str) -> str | None:
    """Why ``url`` cannot be a Hub endpoint, or None when it can."""
    try:
        parts = urlsplit(url.strip())
        if parts.port == 0:  # reading the port raises for one out of range or not a number
            return "port 0 is not a port a Hub listens on"
    except ValueError as exc:
        return f"not a valid URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http:// or https:// URL with a host"
    return None


def _is_int(raw: str) -> bool:
    try:
        int(raw)
    except ValueError:
        return False
    return True

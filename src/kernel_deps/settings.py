"""The names and settings every module shares: one definition each.

File and folder names (the lock, the build folder), the Hub repo types kernel-deps uses
and how the Hub and its cache spell them, how many Hub requests run at once, and the
environment variables kernel-deps reads. Variables are read when asked, not at import,
and parsed strictly: a value that is neither on nor off is bad input naming the variable.

This module imports nothing heavy: the CLI's start-up and the build hooks read it.
"""

from __future__ import annotations

import os

from kernel_deps.errors import UsageError

LOCK_NAME = "kernels.lock"
PYPROJECT_NAME = "pyproject.toml"
# Written beside them while `kernels add` / `remove` replace pyproject.toml and the lock
# as one change; its presence means that change is committed but not yet fully applied.
EDIT_JOURNAL_NAME = ".kernels-edit.json"
BUILD_DIR = "build"

KERNEL = "kernel"
MODEL = "model"
# Kernel repos first: older kernels live in model repos, used when no kernel repo exists.
# The plural names both the Hub API path (/api/kernels/...) and the cache folder
# (kernels--org--name), as huggingface_hub spells them.
REPO_TYPE_PLURALS = {KERNEL: "kernels", MODEL: "models"}

# Hub requests one command runs at once (listings, metadata reads, file downloads).
HUB_WORKERS = 8

OFFLINE_ENV = "HF_HUB_OFFLINE"
BUDGET_ENV = "KERNELS_HUB_BUDGET"
ALLOW_STALE_ENV = "KERNELS_ALLOW_STALE_LOCK"

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
    """A number of seconds from the environment (unset or empty: ``default``); UsageError otherwise."""
    raw = os.environ.get(name, "")
    if not raw.strip():
        return default
    try:
        return float(raw)
    except ValueError:
        raise UsageError(f"{name}={raw!r}: expected a number of seconds") from None


def is_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` asks for no network (read now, not at import)."""
    return env_flag(OFFLINE_ENV)

"""The names and settings every module shares: one definition each.

File and folder names (the lock, the build folder), the Hub repo types kernel-deps uses
and how the Hub and its cache spell them, how many Hub requests run at once, and the
environment variables kernel-deps reads. Variables are read when asked, not at import,
and parsed strictly: an on/off variable is read by huggingface_hub's rule, and a value
that is neither exactly on nor exactly off is bad input naming the variable. The variables
huggingface_hub itself parses at import, and the endpoint's check, are in
:mod:`kernel_deps.hub.environment`.

This module imports nothing heavy: the CLI's start-up and the build hooks read it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from kernel_deps.core.errors import InvalidRepoIdError, UsageError

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
# Threads one resolution prefetches with (refs, tree listings, metadata.json: small
# requests that mostly wait on their round trip, so on a slow link they all go together);
# hub.index.KernelIndex gives the Hub calls they make CALLS_PER_PREFETCH times as many.
HUB_RESOLVE_WORKERS = 32

# Waiting this long for another process's lock (a download's, a project edit's) is worth
# telling the user about.
LOCK_NOTICE_SECONDS = 2.0

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
            raise UsageError("set it to 1 or more", subject=f"{HASH_THREADS_ENV}={value!r}")
        return count
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, MAX_HASH_THREADS))

# Caches kernel-deps reads before the writable one and never writes to (a folder shared by
# the nodes of a cluster, an image layer): absolute paths joined by os.pathsep.
CACHE_SHARED_ENV = "KERNELS_CACHE_SHARED"


def shared_cache_roots() -> list[Path]:
    """The folders of ``KERNELS_CACHE_SHARED``, in order (unset or empty: none); an entry that
    is not an absolute path is bad input naming the variable and the entry."""
    raw = os.environ.get(CACHE_SHARED_ENV, "")
    roots: list[Path] = []
    for entry in raw.split(os.pathsep):
        if not entry.strip():
            continue
        path = Path(os.path.expanduser(entry))
        if not path.is_absolute():
            raise UsageError(
                f"{CACHE_SHARED_ENV}: {entry!r} is not an absolute path; set it to folders such as /mnt/kernels, "
                f"several joined by {os.pathsep!r} (or unset it)"
            )
        if path not in roots:
            roots.append(path)
    return roots


OFFLINE_ENV = "HF_HUB_OFFLINE"
# huggingface_hub reads it when HF_HUB_OFFLINE is unset or empty.
TRANSFORMERS_OFFLINE_ENV = "TRANSFORMERS_OFFLINE"
BUDGET_ENV = "KERNELS_HUB_BUDGET"
# Total time one operation (one command) may spend on the Hub; KERNELS_HUB_BUDGET overrides.
DEFAULT_BUDGET = 600.0
ALLOW_STALE_ENV = "KERNELS_ALLOW_STALE_LOCK"
# ENDPOINT_ENV (HF_ENDPOINT) is defined in kernel_deps.core.redaction, which hides its credentials,
# and checked, with the variables huggingface_hub parses at import, by kernel_deps.hub.environment.

# huggingface_hub's rule (constants._is_true): on is exactly one of these, in any case, and
# anything else is off. A value it reads as off that is not plainly off (" 1 ", "maybe") is
# refused here, so kernel-deps and huggingface_hub never disagree about a flag.
_TRUE = frozenset({"1", "ON", "YES", "TRUE"})
_FALSE = frozenset({"", "0", "OFF", "NO", "FALSE"})


def env_flag(name: str) -> bool:
    """The on/off environment variable ``name`` (unset: off), read as huggingface_hub reads
    its flags; UsageError for a value that is neither exactly on nor exactly off."""
    raw = os.environ.get(name, "")
    value = raw.upper()  # as huggingface_hub compares: no spaces stripped
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise UsageError("expected 1 or 0 (also true/false, yes/no, on/off)", subject=f"{name}={raw!r}")


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
        raise UsageError("expected a number of seconds (0 or more, finite)", subject=f"{name}={raw!r}")
    return value


def offline_env() -> str:
    """The variable that decides offline mode, picked as huggingface_hub picks it:
    ``HF_HUB_OFFLINE``, or ``TRANSFORMERS_OFFLINE`` when that one is unset or empty."""
    if os.environ.get(OFFLINE_ENV) or not os.environ.get(TRANSFORMERS_OFFLINE_ENV):
        return OFFLINE_ENV
    return TRANSFORMERS_OFFLINE_ENV


def is_offline() -> bool:
    """True when offline mode asks for no network (:func:`offline_env`, read now, not at import)."""
    return env_flag(offline_env())


# Local builds for development, as the Hugging Face kernels library reads them: the loader
# uses them instead of the lock, and `kernels verify` fails while the variable is set.
LOCAL_KERNELS_ENV = "LOCAL_KERNELS"


def local_overrides() -> dict[str, Path]:
    """Repo id -> local folder, from ``LOCAL_KERNELS``; empty when unset or empty.

    Entries are ``org/name=/path`` joined by ``:``, as the Hugging Face library reads
    them; an entry without ``=``, with an invalid repo id or an empty path, or a repo id
    given twice, is bad input naming the variable and the entry.
    """
    from kernel_deps.core.spec import validate_repo_id  # packaging: only when the variable is set

    raw = os.environ.get(LOCAL_KERNELS_ENV, "").strip()
    overrides: dict[str, Path] = {}
    if not raw:
        return overrides
    for entry in raw.split(":"):
        repo_id, sep, path = entry.partition("=")
        problem = None
        if not sep:
            problem = "expected org/name=/path/to/build"
        elif not path:
            problem = "the path after '=' is empty"
        else:
            try:
                validate_repo_id(repo_id)
            except InvalidRepoIdError:
                problem = f"{repo_id!r} is not a repo id of the form org/name"
        if problem is not None:
            raise UsageError(
                f"invalid entry {entry!r}: {problem}",
                subject=LOCAL_KERNELS_ENV,
                hint="set it to org/name=/path/to/build, several joined by ':' (or unset it)",
            )
        if repo_id in overrides:
            raise UsageError(
                f"{repo_id} is listed twice (={overrides[repo_id]} and ={path})",
                subject=LOCAL_KERNELS_ENV,
                hint="keep one entry for it",
            )
        overrides[repo_id] = Path(path)
    return overrides


def describe_overrides(overrides: dict[str, Path]) -> str:
    """``org/name -> /path, ...`` for messages."""
    return ", ".join(f"{repo_id} -> {path}" for repo_id, path in sorted(overrides.items()))

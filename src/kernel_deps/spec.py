"""Kernel requirements: repo ids as written by users."""

from __future__ import annotations

import re

from kernel_deps.errors import InvalidRepoIdError

# The Hub's own rule for a namespaced repo id: org and name of letters, digits, '-', '_'
# and '.', not starting or ending with '-' or '.', no '--' or '..'.
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_REPO_ID = re.compile(rf"^{_PART}/{_PART}$")


def validate_repo_id(repo_id: str) -> str:
    """Return ``repo_id`` if it is a valid ``org/name``, else raise InvalidRepoIdError."""
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id) or "--" in repo_id or ".." in repo_id:
        raise InvalidRepoIdError(
            f"invalid kernel repo id {repo_id!r}: expected 'org/name' "
            "(letters, digits, '-', '_', '.'), e.g. 'kernels-community/activation'"
        )
    if len(repo_id) > 96:
        raise InvalidRepoIdError(f"invalid kernel repo id {repo_id!r}: longer than 96 characters")
    return repo_id

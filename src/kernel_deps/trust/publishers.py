"""Publisher trust at lock time: which kernels the project's ``[tool.kernels.trust]`` allows,
and the refusal naming each kernel that neither it nor the Hub trusts.

The Hub's own answer (``trustedKernelPublisher`` of an organization) is asked by the
caller (:meth:`kernel_deps.hub.index.KernelIndex.publisher`), so this module stays pure; the
lock is copied (``dataclasses.replace``), so it imports nothing of the lock.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Sequence

from kernel_deps.core.errors import UntrustedPublisherError
from kernel_deps.core.records import Record
from kernel_deps.core.settings import PYPROJECT_NAME
from kernel_deps.core.spec import org_of, publisher_allowance

if TYPE_CHECKING:
    from kernel_deps.lock.model import Lockfile

# Why a kernel's publisher is trusted, as a lock records it (``trusted_by``): the Hub's flag,
# or the [tool.kernels.trust] entry allowing it.
TRUSTED_BY_HUB = "hub"
TRUSTED_BY_PROJECT = "pyproject:"


class Untrusted(Record):
    """A kernel of the lock that neither the project nor the Hub trusts."""

    __slots__ = ("repo_id", "asked_by", "hub_reason")
    repo_id: str
    asked_by: tuple[str, ...]  # "pyproject.toml" and/or the kernels depending on it
    hub_reason: str  # what the Hub said (or that it could not say)

    def __init__(self, repo_id: str, asked_by: tuple[str, ...], hub_reason: str) -> None:
        self._init(repo_id, asked_by, hub_reason)


def judge_publishers(
    lock: Lockfile, publishers: Sequence[str], hub_trusts: Callable[[str], tuple[bool, str]]
) -> tuple[Lockfile, list[Untrusted]]:
    """``lock`` with each entry's ``trusted_by`` recorded (unchanged when one is refused), and
    every kernel of it that no ``publishers`` entry allows and whose organization
    ``hub_trusts`` (org -> trusted, reason) does not trust; the Hub is asked only about
    what the project does not allow."""
    entries, found = [], []
    for entry in lock.kernels:
        allowance = publisher_allowance(entry.repo_id, publishers)
        if allowance is not None:
            entries.append(replace(entry, trusted_by=TRUSTED_BY_PROJECT + allowance))
            continue
        trusted, reason = hub_trusts(org_of(entry.repo_id))
        if trusted:
            entries.append(replace(entry, trusted_by=TRUSTED_BY_HUB))
            continue
        asked = [PYPROJECT_NAME] if entry.requirement is not None or entry.redirected_from else []
        asked += [parent.repo_id for parent in lock.kernels if entry.repo_id in parent.dependencies]
        found.append(Untrusted(entry.repo_id, tuple(asked), reason))
    # With a kernel refused, nothing is written: the lock is returned as it came.
    return (lock if found else replace(lock, kernels=tuple(entries))), found


def refusal(untrusted: Sequence[Untrusted]) -> UntrustedPublisherError:
    """One line naming each untrusted kernel, who asked for it, and the line to add."""
    parts = [
        f"{u.repo_id} (asked for by {', '.join(u.asked_by) or PYPROJECT_NAME}): {u.hub_reason}" for u in untrusted
    ]
    orgs = sorted({org_of(u.repo_id) for u in untrusted})
    line = "publishers = [" + ", ".join(f'"{org}"' for org in orgs) + "]"
    return UntrustedPublisherError(
        f"kernels.lock not written: {'; '.join(parts)}; if you trust "
        f"{'this publisher' if len(orgs) == 1 else 'these publishers'}, add to {PYPROJECT_NAME}: "
        f"[tool.kernels.trust] {line} (or the repo ids alone)"
    )

"""Publisher trust at lock time: which kernels the project's ``[tool.kernels.trust]`` allows,
and the refusal naming each kernel that neither it nor the Hub trusts.

The Hub's own answer (``trustedKernelPublisher`` of an organization) is asked by the
caller (:meth:`kernel_deps.hub.index.KernelIndex.publisher`), so this module stays pure; the
lock is copied (``dataclasses.replace``), so it imports nothing of the lock.
"""

from __future__ import annotations

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


class PublisherTrust(Record):
    """The Hub's answer about one organization as a kernel publisher, and why: a kind, the
    Hub's address as shown, and (for a Hub error or an unreadable answer) that error's own
    text. :func:`publisher_trust_text` says it in words."""

    TRUSTED = "trusted"  # the overview answers "trustedKernelPublisher": true
    NOT_TRUSTED = "not-trusted"  # it answers, without that flag
    NO_ORGANIZATION = "no-organization"  # HTTP 404: no such organization, or no organizations API
    HUB_ERROR = "hub-error"  # any other Hub error, after retries (``detail``: its message)
    BAD_ANSWER = "bad-answer"  # an answer that is not JSON (``detail``: what is wrong with it)

    __slots__ = ("org", "trusted", "kind", "endpoint", "detail")
    org: str
    trusted: bool
    kind: str
    endpoint: str  # the Hub asked, as messages show it
    detail: str | None

    def __init__(self, org: str, trusted: bool, kind: str, endpoint: str, detail: str | None = None) -> None:
        self._init(org, trusted, kind, endpoint, detail)


def publisher_trust_text(answer: PublisherTrust) -> str:
    """What the Hub said about ``answer.org``, in words (as refusals quote it)."""
    hub = f"the Hub at {answer.endpoint}"
    if answer.kind == PublisherTrust.TRUSTED:
        return f"{hub} trusts {answer.org}"
    if answer.kind == PublisherTrust.NOT_TRUSTED:
        return f"{hub} does not trust {answer.org} as a kernel publisher"
    if answer.kind == PublisherTrust.NO_ORGANIZATION:
        return f"{hub} could not say (HTTP 404: no such organization, or no organizations API)"
    if answer.kind == PublisherTrust.BAD_ANSWER:
        return f"{hub} could not say (its answer: {answer.detail})"
    return f"{hub} could not say ({answer.detail})"


class Untrusted(Record):
    """A kernel of the lock that neither the project nor the Hub trusts."""

    __slots__ = ("repo_id", "asked_by", "hub_answer")
    repo_id: str
    asked_by: tuple[str, ...]  # "pyproject.toml" and/or the kernels depending on it
    hub_answer: PublisherTrust  # what the Hub said (or that it could not say)

    def __init__(self, repo_id: str, asked_by: tuple[str, ...], hub_answer: PublisherTrust) -> None:
        self._init(repo_id, asked_by, hub_answer)


def judge_publishers(
    lock: Lockfile, publishers: Sequence[str], hub_trusts: Callable[[str], PublisherTrust]
) -> tuple[Lockfile, list[Untrusted]]:
    """``lock`` with each entry's ``trusted_by`` recorded (unchanged when one is refused), and
    every kernel of it that no ``publishers`` entry allows and whose organization
    ``hub_trusts`` (org -> the Hub's answer) does not trust; the Hub is asked only about
    what the project does not allow."""
    from dataclasses import replace  # at lock time only

    entries, found = [], []
    for entry in lock.kernels:
        allowance = publisher_allowance(entry.repo_id, publishers)
        if allowance is not None:
            entries.append(replace(entry, trusted_by=TRUSTED_BY_PROJECT + allowance))
            continue
        answer = hub_trusts(org_of(entry.repo_id))
        if answer.trusted:
            entries.append(replace(entry, trusted_by=TRUSTED_BY_HUB))
            continue
        asked = [PYPROJECT_NAME] if entry.requirement is not None or entry.redirected_from else []
        asked += [parent.repo_id for parent in lock.kernels if entry.repo_id in parent.dependencies]
        found.append(Untrusted(entry.repo_id, tuple(asked), answer))
    # With a kernel refused, nothing is written: the lock is returned as it came.
    return (lock if found else replace(lock, kernels=tuple(entries))), found


def refusal(untrusted: Sequence[Untrusted], outcome: str = "kernels.lock not written") -> UntrustedPublisherError:
    """One line naming each untrusted kernel, who asked for it, and the line to add; ``outcome``
    is what the caller did not do."""
    parts = [
        f"{u.repo_id} (asked for by {', '.join(u.asked_by) or PYPROJECT_NAME}): {publisher_trust_text(u.hub_answer)}"
        for u in untrusted
    ]
    orgs = sorted({org_of(u.repo_id) for u in untrusted})
    line = "publishers = [" + ", ".join(f'"{org}"' for org in orgs) + "]"
    return UntrustedPublisherError(
        f"{outcome}: {'; '.join(parts)}; if you trust "
        f"{'this publisher' if len(orgs) == 1 else 'these publishers'}, add to {PYPROJECT_NAME}: "
        f"[tool.kernels.trust] {line} (or the repo ids alone)"
    )

"""The one error hierarchy of kernel-deps.

Errors carry data and a message; they never print. The CLI renders each one once, as a
single line, and exits with the error's ``exit_code`` (1: a problem found, 2: bad input).
Every message is redacted when the error is made (:func:`kernel_deps.core.redaction.redact`):
no error, whatever text from a lower layer it quotes, holds a URL's user-info or a token.
"""

from __future__ import annotations

from typing import Sequence

from kernel_deps.core.records import Record
from kernel_deps.core.redaction import redact, shown_url


class KernelDepsError(Exception):
    """Base of every foreseeable kernel-deps failure."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message


class UsageError(KernelDepsError, ValueError):
    """The user's input (arguments, pyproject, lock) is invalid."""

    exit_code = 2


class InvalidRepoIdError(UsageError):
    """A kernel repo id is not of the form ``org/name``."""


class HubError(KernelDepsError):
    """The Hub could not answer a question kernel-deps asked."""


class RepoNotFoundError(HubError):
    """No kernel (or legacy model) repo of that id exists, or it is private."""

    def __init__(self, repo_id: str, endpoint: str) -> None:
        endpoint = shown_url(endpoint)  # the Hub's address as messages show it, credentials hidden
        super().__init__(
            f"kernel repo {repo_id!r} not found on {endpoint}; check the name, "
            "or set HF_TOKEN if the repo is private"
        )
        self.repo_id = repo_id
        self.endpoint = endpoint


class RevisionNotFoundError(HubError):
    """A revision (branch, tag or commit) does not exist in a repo."""

    def __init__(self, repo_id: str, revision: str) -> None:
        super().__init__(f"{repo_id}: revision {revision!r} not found on the Hub")
        self.repo_id = repo_id
        self.revision = revision


class PathNotFoundError(HubError):
    """A commit exists, but a file or folder is not in it."""

    def __init__(self, repo_id: str, revision: str, path: str) -> None:
        super().__init__(f"{repo_id}: the Hub has no {path} at {revision[:12]}")
        self.repo_id = repo_id
        self.revision = revision
        self.path = path


class HubAuthError(HubError):
    """The Hub refused the request for lack of (valid) credentials."""


class HubUnavailableError(HubError):
    """The Hub could not be reached or kept failing after retries."""


class OfflineError(HubError):
    """The operation needs the Hub but offline mode is on."""


class PyprojectError(UsageError):
    """``pyproject.toml`` is missing, unreadable, or has an invalid kernels table."""


class LockfileError(UsageError):
    """``kernels.lock`` is unreadable or malformed; the message names the bad entry and key."""


class ConflictCause(Record):
    """One requirement in a conflict, and who asked for it (resolvelib's ``(requirement, parent)``)."""

    __slots__ = ("repo_id", "requirement", "shown", "required_by", "required_by_version")
    repo_id: str
    requirement: str  # as written: a range, a major, or revision=...
    shown: str  # the requirement for people, e.g. ``org/x 1 (branch v1)``
    required_by: str | None  # the kernel that asks; None for the project (or the call) itself
    required_by_version: str | None  # that kernel's version (or short commit)

    def __init__(self, repo_id: str, requirement: str, shown: str, required_by: str | None,
                 required_by_version: str | None = None) -> None:  # fmt: skip
        self._init(repo_id, requirement, shown, required_by, required_by_version)

    def to_json(self) -> dict:
        parent = None
        if self.required_by is not None:
            parent = {"repo_id": self.required_by, "version": self.required_by_version}
        return {"repo_id": self.repo_id, "requirement": self.requirement, "required_by": parent}


class OfferedVersions(Record):
    """The versions a repo in a conflict offers: its ``vX.Y.Z`` tags and ``vN`` branches, newest first."""

    __slots__ = ("repo_id", "tags", "branches")
    repo_id: str
    tags: tuple[str, ...]
    branches: tuple[str, ...]

    def __init__(self, repo_id: str, tags: tuple[str, ...], branches: tuple[str, ...]) -> None:
        self._init(repo_id, tags, branches)

    def to_json(self) -> dict:
        return {"repo_id": self.repo_id, "tags": list(self.tags), "branches": list(self.branches)}


class UnservedCandidate(Record):
    """A version in range that misses a declared deployment target, and the builds it has."""

    __slots__ = ("version", "commit", "missing_targets", "offers")
    version: str  # its tag or branch (or short commit)
    commit: str
    missing_targets: tuple[str, ...]
    offers: tuple[str, ...]  # its build variants

    def __init__(self, version: str, commit: str, missing_targets: tuple[str, ...], offers: tuple[str, ...]) -> None:
        self._init(version, commit, missing_targets, offers)

    def to_json(self) -> dict:
        return {"version": self.version, "commit": self.commit, "missing_targets": list(self.missing_targets),
                "offers": list(self.offers)}  # fmt: skip


# How many of the newest versions in range an unservable target's message describes.
UNSERVED_SHOWN = 3


def _asker(cause: ConflictCause, requester: str) -> str:
    """Who asked, for a message: the parent kernel and its version, or the requester."""
    return requester if cause.required_by is None else f"{cause.required_by} {cause.required_by_version}"


class ResolutionError(KernelDepsError, ValueError):
    """The requirements cannot all be satisfied; the message says who asked for what.

    A version conflict also carries it as records: ``causes`` (each requirement and who
    asked), ``offered`` (the versions each repo has), ``requester`` (who asked for the
    top-level requirements) and ``hint`` (what to change); see :meth:`conflict`.
    """

    def __init__(
        self,
        message: str,
        *,
        causes: tuple[ConflictCause, ...] = (),
        offered: tuple[OfferedVersions, ...] = (),
        requester: str = "project",
        hint: str | None = None,
        unserved: tuple[UnservedCandidate, ...] = (),
    ) -> None:
        super().__init__(message)
        self.causes = causes
        self.offered = offered
        self.requester = requester
        self.hint = hint
        self.unserved = unserved

    @classmethod
    def conflict(
        cls, causes: Sequence[ConflictCause], offered: Sequence[OfferedVersions], *, requester: str, hint: str
    ) -> ResolutionError:
        """A version conflict, its message told from its records as ``pdm`` tells resolvelib's causes:
        one line per cause (``<requirement> (from <parent or the requester>)``), the versions each
        repo offers, then the hint."""
        lines = ["cannot find versions that satisfy every requirement:"]
        lines += [f"  {cause.shown} (from {_asker(cause, requester)})" for cause in causes]
        for found in offered:
            branches = f" (branches {', '.join(found.branches)})" if found.branches else ""
            lines.append(f"  versions of {found.repo_id}: {', '.join(found.tags) or 'none'}{branches}")
        lines.append(f"hint: {hint}")
        return cls("\n".join(lines), causes=tuple(causes), offered=tuple(offered), requester=requester, hint=hint)

    @classmethod
    def targets_unserved(
        cls, repo_id: str, causes: Sequence[ConflictCause], candidates: Sequence[UnservedCandidate], *, hint: str
    ) -> ResolutionError:
        """No version of ``repo_id`` that ``causes`` allow serves every deployment target: the
        causes on one line, then the newest of those versions with what each misses and offers."""
        asked = "; ".join(f"{c.shown} (from {_asker(c, 'project')})" for c in causes)
        lines = [f"no version of {repo_id} allowed by {asked} has a build for every deployment target:"]
        for c in candidates[:UNSERVED_SHOWN]:
            offers = ", ".join(c.offers) or "no builds"
            missed = ", ".join(c.missing_targets)
            lines.append(f"  {c.version} ({c.commit[:12]}): no build for {missed}; offers {offers}")
        if len(candidates) > UNSERVED_SHOWN:
            older = len(candidates) - UNSERVED_SHOWN
            lines.append(f"  ... and {older} older versions in range, none serving every target")
        lines.append(f"hint: {hint}")
        return cls("\n".join(lines), causes=tuple(causes), hint=hint, unserved=tuple(candidates))

    def to_json(self) -> dict | None:
        """The conflict's records for an error's JSON document (docs/schemas/error.schema.json); None when
        the error is not a conflict told by its causes."""
        if not self.causes:
            return None
        return {
            "causes": [cause.to_json() for cause in self.causes],
            "versions": [found.to_json() for found in self.offered],
            "requester": self.requester,
            "hint": self.hint,
            "unserved": [candidate.to_json() for candidate in self.unserved],
        }


class InvalidKernelMetadataError(KernelDepsError):
    """A kernel's ``metadata.json`` on the Hub is malformed or declares unreadable dependencies."""


class FileWriteError(KernelDepsError):
    """A file could not be written (permissions, full disk); nothing was half-written."""


class LinkedPathError(UsageError):
    """A symbolic link where a command would write or delete: refused, never followed
    (``core.ownedfs``); ``path`` is the link."""

    def __init__(self, message: str, *, path: object = None) -> None:
        super().__init__(message)
        self.path = path


class PendingEditError(KernelDepsError):
    """An edit journal lies beside pyproject.toml and kernels.lock: a command that only reads
    neither applies it nor trusts the files it would change."""


class EditJournalError(UsageError):
    """An edit journal that does not prove to be an interrupted edit of the project's own
    files (unreadable, naming another file, or not matching them): refused and left."""


class ProjectBusyError(KernelDepsError):
    """Another command held the project's edit lock for the whole time budget."""


class CacheBusyError(KernelDepsError):
    """Another process held a download lock of the cache for the whole time budget."""


class DownloadVerificationError(KernelDepsError):
    """What the Hub served does not match what kernels.lock pins."""


class UnsafeRepoContentError(KernelDepsError):
    """A repo's tree names a path kernel-deps refuses to write."""


class KernelNotLockedError(KernelDepsError, ValueError):
    """The lock in use does not list the requested kernel."""


class LockNotFoundError(KernelDepsError, ValueError):
    """No kernels.lock could be found for the caller."""


class KernelNotCachedError(KernelDepsError, FileNotFoundError):
    """The locked variant is not in the cache and the network may not be used."""


class KernelIntegrityError(KernelDepsError):
    """The cached variant's files differ from what the lock pins."""


class KernelCacheReadError(KernelDepsError):
    """A cached kernel file could not be read (permissions, a folder where a file belongs)."""


class KernelImportError(KernelDepsError):
    """The verified variant failed to import."""


class TargetNotServedError(KernelDepsError):
    """The lock has no build for a deployment target asked for."""


class UntrustedPublisherError(KernelDepsError, ValueError):
    """A kernel to be locked comes from a publisher neither the Hub nor the project trusts."""


class LockPolicyError(KernelDepsError):
    """The lock does not show what the project's policy asks (a signer, an allowed publisher);
    ``problems`` holds each finding."""

    def __init__(self, message: str, problems: tuple = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


class SignatureError(KernelDepsError):
    """A variant's Sigstore signature is invalid, its signer is not one the project allows, or
    it is unsigned while the project requires signatures; names kernel, variant, expected and found.
    ``refused`` holds the refusal records the message was made from (``trust.signatures.VariantRefusal``)."""

    def __init__(self, message: str, refused: Sequence[object] = ()) -> None:
        super().__init__(message)
        self.refused = tuple(refused)


class DigestMismatchError(KernelDepsError):
    """Files of a variant do not match the digest its ``metadata.json`` declares; ``refused`` as
    for :class:`SignatureError`."""

    def __init__(self, message: str, refused: Sequence[object] = ()) -> None:
        super().__init__(message)
        self.refused = tuple(refused)

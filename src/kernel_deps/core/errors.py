"""The one error hierarchy of kernel-deps.

Errors carry data; they never print. Each holds what it is about (``subject``: a file, key,
kernel or flag), what is wrong (``reason``) and what to do (``hint``, or None), and a stable
``kind`` code (docs/schemas/error.schema.json lists them). :attr:`KernelDepsError.message`
is those fields told in one rule (:func:`render`); the CLI renders each error once, as a
single line, and exits with the error's ``exit_code`` (1: a problem found, 2: bad input).
Every field is redacted when the error is made (:func:`kernel_deps.core.redaction.redact`):
no error, whatever text from a lower layer it quotes, holds a URL's user-info or a token.
A lower error re-raised as another takes its fields (``reason=exc.reason``), never its text.
"""

from __future__ import annotations

from typing import Sequence

from kernel_deps.core.records import Record
from kernel_deps.core.redaction import redact, shown_url


def render(subject: str | None, reason: str | None, hint: str | None) -> str:
    """An error's line: ``subject: reason; hint``, each part left out when None; a reason of
    several lines gets its hint on a line of its own (``hint: ...``)."""
    text = reason or ""
    if subject:
        text = f"{subject}: {text}" if text else subject
    if hint:
        text = (f"{text}\nhint: {hint}" if "\n" in text else f"{text}; {hint}") if text else hint
    return text


class KernelDepsError(Exception):
    """Base of every foreseeable kernel-deps failure. A single positional text is the reason."""

    exit_code = 1
    kind = "error"

    def __init__(self, reason: object = None, *, subject: object = None, hint: object = None) -> None:
        # Each field as text (a path, a lower exception's text), redacted.
        self.subject = None if subject is None else redact(str(subject))
        self.reason = None if reason is None else redact(str(reason))
        self.hint = None if hint is None else redact(str(hint))
        self.message = render(self.subject, self.reason, self.hint)
        super().__init__(self.message)


class UsageError(KernelDepsError, ValueError):
    """The user's input (arguments, pyproject, lock) is invalid."""
    kind = "usage"
    exit_code = 2


class InvalidRepoIdError(UsageError):
    """A kernel repo id is not of the form ``org/name``."""
    kind = "repo-id-invalid"


class HubError(KernelDepsError):
    """The Hub could not answer a question kernel-deps asked."""
    kind = "hub-error"


class RepoNotFoundError(HubError):
    """No kernel (or legacy model) repo of that id exists, or it is private."""
    kind = "repo-not-found"

    def __init__(self, repo_id: str, endpoint: str, nearest: Sequence[str] = ()) -> None:
        endpoint = shown_url(endpoint)  # the Hub's address as messages show it, credentials hidden
        hint = "check the name, or set HF_TOKEN if the repo is private"
        if nearest:  # existing repos of the same organization with a name close to it
            shown = [f"'{found}'" for found in nearest]
            names = f"{', '.join(shown[:-1])} or {shown[-1]}" if len(shown) > 1 else shown[0]
            hint = f"did you mean {names}? (a private repo needs HF_TOKEN)"
        super().__init__(f"kernel repo not found on {endpoint}", subject=repo_id, hint=hint)
        self.repo_id = repo_id
        self.endpoint = endpoint
        self.nearest = tuple(nearest)


class RevisionNotFoundError(HubError):
    """A revision (branch, tag or commit) does not exist in a repo."""
    kind = "revision-not-found"

    def __init__(self, repo_id: str, revision: str) -> None:
        super().__init__(f"revision {revision!r} not found on the Hub", subject=repo_id)
        self.repo_id = repo_id
        self.revision = revision


class PathNotFoundError(HubError):
    """A commit exists, but a file or folder is not in it."""
    kind = "path-not-found"

    def __init__(self, repo_id: str, revision: str, path: str) -> None:
        super().__init__(f"the Hub has no {path} at {revision[:12]}", subject=repo_id)
        self.repo_id = repo_id
        self.revision = revision
        self.path = path


class HubAuthError(HubError):
    """The Hub refused the request for lack of (valid) credentials."""
    kind = "hub-auth"


class HubUnavailableError(HubError):
    """The Hub could not be reached or kept failing after retries."""
    kind = "hub-unavailable"


class OfflineError(HubError):
    """The operation needs the Hub but offline mode is on."""
    kind = "offline"


class PyprojectError(UsageError):
    """``pyproject.toml`` is missing, unreadable, or has an invalid kernels table."""
    kind = "pyproject-invalid"


class LockfileError(UsageError):
    """``kernels.lock`` is unreadable or malformed; the message names the bad entry and key."""
    kind = "lockfile-invalid"


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
    kind = "resolution-impossible"

    def __init__(
        self,
        reason: str | None = None,
        *,
        subject: object = None,
        causes: tuple[ConflictCause, ...] = (),
        offered: tuple[OfferedVersions, ...] = (),
        requester: str = "project",
        hint: str | None = None,
        unserved: tuple[UnservedCandidate, ...] = (),
    ) -> None:
        super().__init__(reason, subject=subject, hint=hint)
        self.causes = causes
        self.offered = offered
        self.requester = requester
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
    kind = "kernel-metadata-invalid"


class FileWriteError(KernelDepsError):
    """A file could not be written (permissions, full disk); nothing was half-written."""
    kind = "write-failed"


class LinkedPathError(UsageError):
    """A symbolic link where a command would write or delete: refused, never followed
    (``core.ownedfs``); ``path`` is the link."""
    kind = "linked-path"

    def __init__(self, reason: str | None = None, *, subject: object = None, hint: str | None = None,
                 path: object = None) -> None:  # fmt: skip
        super().__init__(reason, subject=subject, hint=hint)
        self.path = path


class PendingEditError(KernelDepsError):
    """An edit journal lies beside pyproject.toml and kernels.lock: a command that only reads
    neither applies it nor trusts the files it would change."""
    kind = "edit-pending"


class EditJournalError(UsageError):
    """An edit journal that does not prove to be an interrupted edit of the project's own
    files (unreadable, naming another file, or not matching them): refused and left."""
    kind = "edit-journal-invalid"


class ProjectBusyError(KernelDepsError):
    """Another command held the project's edit lock for the whole time budget."""
    kind = "project-busy"


class CacheBusyError(KernelDepsError):
    """Another process held a download lock of the cache for the whole time budget."""
    kind = "cache-busy"


class DownloadVerificationError(KernelDepsError):
    """What the Hub served does not match what kernels.lock pins."""
    kind = "download-mismatch"


class UnsafeRepoContentError(KernelDepsError):
    """A repo's tree names a path kernel-deps refuses to write."""
    kind = "repo-content-unsafe"


class KernelNotLockedError(KernelDepsError, ValueError):
    """The lock in use does not list the requested kernel."""
    kind = "kernel-not-locked"


class LockNotFoundError(KernelDepsError, ValueError):
    """No kernels.lock could be found for the caller."""
    kind = "lock-not-found"


class KernelNotCachedError(KernelDepsError, FileNotFoundError):
    """The locked variant is not in the cache and the network may not be used."""
    kind = "kernel-not-cached"


class KernelIntegrityError(KernelDepsError):
    """The cached variant's files differ from what the lock pins."""
    kind = "kernel-integrity"


class KernelCacheReadError(KernelDepsError):
    """A cached kernel file could not be read (permissions, a folder where a file belongs)."""
    kind = "cache-read-failed"


class KernelImportError(KernelDepsError):
    """The verified variant failed to import."""
    kind = "kernel-import-failed"


class TargetNotServedError(KernelDepsError):
    """The lock has no build for a deployment target asked for."""
    kind = "target-not-served"


class UntrustedPublisherError(KernelDepsError, ValueError):
    """A kernel to be locked comes from a publisher neither the Hub nor the project trusts."""
    kind = "publisher-untrusted"


class LockPolicyError(KernelDepsError):
    """The lock does not show what the project's policy asks (a signer, an allowed publisher);
    ``problems`` holds each finding."""
    kind = "lock-policy"

    def __init__(self, reason: str | None = None, problems: tuple = (), *, subject: object = None,
                 hint: str | None = None) -> None:  # fmt: skip
        super().__init__(reason, subject=subject, hint=hint)
        self.problems = tuple(problems)


class SignatureError(KernelDepsError):
    """A variant's Sigstore signature is invalid, its signer is not one the project allows, or
    it is unsigned while the project requires signatures; names kernel, variant, expected and found.
    ``refused`` holds the refusal records the message was made from (``trust.signatures.VariantRefusal``)."""
    kind = "signature-refused"

    def __init__(self, reason: str | None = None, refused: Sequence[object] = (), *, subject: object = None,
                 hint: str | None = None) -> None:  # fmt: skip
        super().__init__(reason, subject=subject, hint=hint)
        self.refused = tuple(refused)


class DigestMismatchError(KernelDepsError):
    """Files of a variant do not match the digest its ``metadata.json`` declares; ``refused`` as
    for :class:`SignatureError`."""
    kind = "digest-mismatch"

    def __init__(self, reason: str | None = None, refused: Sequence[object] = (), *, subject: object = None,
                 hint: str | None = None) -> None:  # fmt: skip
        super().__init__(reason, subject=subject, hint=hint)
        self.refused = tuple(refused)

"""Who may sign a kernel (the signature policy ``[tool.kernels.trust]`` declares, and its
judgement) and who signed one (the signer a lock records).

An :class:`Identity` is a GitHub Actions workflow as Fulcio records it in a signing
certificate: the OIDC issuer, the Source Repository URI (``https://github.com/<repository>``)
and the Build Signer URI (``https://github.com/<repository>/<workflow>@<ref>``). A
:class:`SignaturePolicy` holds the project's identities, a kernel's own narrower list, the
trust root to verify under and whether every variant must be signed. A
:class:`VariantSigner` is what a lock records of a verified signature (``signatures``).
Pure: the signer is passed in as the strings its certificate (or the lock) records.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernel_deps.core.errors import UsageError
from kernel_deps.core.fields import check_object, invalid, optional
from kernel_deps.core.records import Record

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
GITHUB = "https://github.com/"
_SIGNER_KEYS = ("issuer", "identity", "repository", "workflow", "ref", "metadata_sha256")
_SIGNER_REQUIRED = ("issuer", "identity", "metadata_sha256")
# Compiled (by re's cache) on first use: a signer's metadata hash.
_SHA256_HEX = r"[0-9a-f]{64}"


class Identity(Record):
    """One signer the project allows: a workflow of a repository at a ref, under an issuer."""

    __slots__ = ("repository", "workflow", "ref", "issuer")
    repository: str
    workflow: str
    ref: str
    issuer: str

    def __init__(self, repository: str, workflow: str, ref: str, issuer: str = GITHUB_ISSUER) -> None:
        self._init(repository, workflow, ref, issuer)

    @property
    def build_signer_uri(self) -> str:
        """The certificate's Build Signer URI (and SAN) for this workflow."""
        return f"{GITHUB}{self.repository}/{self.workflow}@{self.ref}"

    @property
    def source_repository_uri(self) -> str:
        return f"{GITHUB}{self.repository}"

    def allows(self, issuer: str, repository: str | None, workflow: str | None, ref: str | None) -> bool:
        """Whether a certificate with these facts is this identity."""
        return (issuer, repository, workflow, ref) == (self.issuer, self.repository, self.workflow, self.ref)

    def describe(self) -> str:
        issuer = "" if self.issuer == GITHUB_ISSUER else f" (issuer {self.issuer})"
        return f"{self.repository} {self.workflow}@{self.ref}{issuer}"

    def to_json(self) -> dict:
        return {"repository": self.repository, "workflow": self.workflow, "ref": self.ref, "issuer": self.issuer}


class VariantSigner(Record):
    """Who signed a variant's ``metadata.json`` (its Sigstore certificate, verified when locked)
    and the SHA-256 of the bytes signed. ``repository``, ``workflow`` and ``ref`` are None for a
    certificate that names no GitHub workflow."""

    __slots__ = ("issuer", "identity", "repository", "workflow", "ref", "metadata_sha256")
    issuer: str  # the OIDC issuer
    identity: str  # the certificate's identity (its SAN URI)
    repository: str | None  # org/name of its Source Repository URI
    workflow: str | None  # the workflow path of its Build Signer URI
    ref: str | None  # the git ref of its Build Signer URI
    metadata_sha256: str

    def __init__(self, *, issuer: str, identity: str, repository: str | None = None, workflow: str | None = None,
                 ref: str | None = None, metadata_sha256: str = "") -> None:  # fmt: skip
        self._init(issuer, identity, repository, workflow, ref, metadata_sha256)
        for key in ("issuer", "identity", "repository", "workflow", "ref"):
            value = getattr(self, key)
            if value is None and key not in _SIGNER_REQUIRED:
                continue
            if not isinstance(value, str) or not value or len(value) > 1000:
                raise invalid(f".{key}", key, value, "expected a non-empty string")
        if not isinstance(self.metadata_sha256, str) or not re.fullmatch(_SHA256_HEX, self.metadata_sha256):
            expected = "expected 64 lowercase hex characters"
            raise invalid(".metadata_sha256", "metadata_sha256", self.metadata_sha256, expected)

    @classmethod
    def from_dict(cls, raw: Any) -> VariantSigner:
        """Build from a lock's JSON object; FieldError naming the bad key."""
        obj = check_object(raw, "", _SIGNER_KEYS, _SIGNER_REQUIRED)
        return cls(
            issuer=obj["issuer"], identity=obj["identity"], repository=optional(obj, "repository"),
            workflow=optional(obj, "workflow"), ref=optional(obj, "ref"),
            metadata_sha256=obj["metadata_sha256"],
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        data = {"issuer": self.issuer, "identity": self.identity}
        data |= {key: getattr(self, key) for key in ("repository", "workflow", "ref") if getattr(self, key) is not None}
        return data | {"metadata_sha256": self.metadata_sha256}


class SignaturePolicy(Record):
    """What ``[tool.kernels.trust]`` asks of signatures; the default verifies and records what is signed."""

    __slots__ = ("trusted_root", "require", "identities", "kernel_identities")
    # The Sigstore trusted root file to verify under; None: Sigstore's public-good root.
    trusted_root: Path | None
    require: bool
    identities: tuple[Identity, ...]
    # A kernel's own entry in [tool.kernels.dependencies] narrowing the project's identities.
    kernel_identities: Mapping[str, tuple[Identity, ...]]

    def __init__(self, trusted_root: str | os.PathLike[str] | None = None, require: bool = False,
                 identities: Sequence[Identity] = (),
                 kernel_identities: Mapping[str, Sequence[Identity]] | None = None) -> None:  # fmt: skip
        # A library caller's policy (get_kernel(signature_policy=...)): a str path as well as a Path,
        # a list of identities as well as a tuple; anything else is one UsageError naming the argument.
        if trusted_root is not None:
            if not isinstance(trusted_root, (str, os.PathLike)) or not os.fspath(trusted_root):
                raise UsageError(f"SignaturePolicy(trusted_root={trusted_root!r}): expected the path of a Sigstore "
                                 "trusted root JSON file (a str or a pathlib.Path), or None for Sigstore's own")
            trusted_root = Path(trusted_root)
        if not isinstance(require, bool):
            raise UsageError(f"SignaturePolicy(require={require!r}): expected True or False")
        identities = _identities(identities, "identities")
        narrowed = {repo_id: _identities(allowed, f"kernel_identities[{repo_id!r}]")
                    for repo_id, allowed in (kernel_identities or {}).items()}  # fmt: skip
        self._init(trusted_root, require, identities, narrowed)

    def refused_by(self, repo_id: str, issuer: str, repository: str | None, workflow: str | None,
                   ref: str | None) -> tuple[str, tuple[Identity, ...]] | None:  # fmt: skip
        """The list a signer with these facts is not on, as (``"identities"``: the project's, or
        ``"kernel-identities"``: ``repo_id``'s own) and its identities; None when it may sign."""
        lists = (("identities", self.identities), ("kernel-identities", self.kernel_identities.get(repo_id, ())))
        for rule, allowed in lists:
            if allowed and not any(i.allows(issuer, repository, workflow, ref) for i in allowed):
                return rule, allowed
        return None

    def problem(self, repo_id: str, issuer: str, repository: str | None, workflow: str | None,
                ref: str | None) -> str | None:  # fmt: skip
        """Why a signer with these facts may not sign ``repo_id`` (expected ..., found ...), or None."""
        refused = self.refused_by(repo_id, issuer, repository, workflow, ref)
        if refused is None:
            return None
        rule, allowed = refused
        where = "[tool.kernels.trust] identities" if rule == "identities" else f"{repo_id}'s identities"
        expected = " or ".join(i.describe() for i in allowed)
        return f"expected a signer of {where}: {expected}; found {describe_signer(issuer, repository, workflow, ref)}"


def _identities(value: object, argument: str) -> tuple[Identity, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or \
            not all(isinstance(i, Identity) for i in value):
        raise UsageError(f"SignaturePolicy({argument}={value!r}): expected a list of kernel_deps.trust.signers.Identity")
    return tuple(value)


def describe_signer(issuer: str, repository: str | None, workflow: str | None, ref: str | None) -> str:
    """A signer for messages: ``org/repo .github/workflows/build.yml@refs/heads/main``, issuer when not GitHub's."""
    if repository is None or workflow is None or ref is None:
        return f"a certificate of issuer {issuer} naming no GitHub workflow"
    return Identity(repository, workflow, ref, issuer).describe()


def github_facts(
    source_repository_uri: str | None, build_signer_uri: str | None
) -> tuple[str | None, str | None, str | None]:
    """(repository, workflow, ref) from a certificate's Source Repository URI and Build Signer
    URI; None for each that they do not tell (another issuer's certificate)."""
    repository = None
    if source_repository_uri and source_repository_uri.startswith(GITHUB):
        repository = source_repository_uri[len(GITHUB):] or None
    workflow = ref = None
    if repository and build_signer_uri and build_signer_uri.startswith(f"{GITHUB}{repository}/"):
        path, sep, ref_part = build_signer_uri[len(GITHUB) + len(repository) + 1:].rpartition("@")
        if sep and path and ref_part:
            workflow, ref = path, ref_part
    return repository, workflow, ref

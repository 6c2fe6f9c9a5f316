"""Sigstore bundles verified offline with sigstore-python: who signed a ``metadata.json``.

:func:`verify_bundle` parses a bundle (v0.3 JSON) with sigstore's bundle model and checks it
with sigstore's real ``Verifier`` built from a trusted root file
(read once, at most 16 MiB, never a TUF refresh, so no request is ever made): the
certificate chain to the root's Fulcio CA, the embedded SCT, the transparency log entry
(its signed timestamp, inclusion proof and checkpoint) and the signature over the exact
bytes. The signer's allowed identities are then checked on the verified certificate with
sigstore's own OIDC policies. ``sigstore`` is imported only inside these functions, so a
lock or load of unsigned kernels never imports it.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any, Sequence

from kernel_deps.core import jsondoc
from kernel_deps.core.boundedread import PROJECT_FILE_LIMIT, read_bounded
from kernel_deps.core.records import Record
from kernel_deps.trust.signers import Identity, github_facts

# What sigstore-python ships of Sigstore's public-good instance, read offline: the trusted
# root its TUF client starts from (sigstore/_store/<tuf url>/trusted_root.json).
_PUBLIC_GOOD = ("_store", "https%3A%2F%2Ftuf-repo-cdn.sigstore.dev", "trusted_root.json")
MAX_BUNDLE_BYTES = 1 << 20

_verifiers: dict[tuple[str, bytes], Any] = {}
_verifiers_lock = threading.Lock()


class BundleError(Exception):
    """A bundle that does not prove its signer: ``reason`` says why (not JSON, not valid under the root, ...)."""

    def __init__(self, reason: str, *, not_allowed: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.not_allowed = reason, not_allowed


class TrustedRootError(Exception):
    """The trusted root file cannot be read or is not a Sigstore trusted root."""


class CertifiedSigner(Record):
    """The identity a verified signing certificate states."""

    __slots__ = ("issuer", "identity", "repository", "workflow", "ref")
    issuer: str
    identity: str  # the SAN URI (or email)
    repository: str | None
    workflow: str | None
    ref: str | None

    def __init__(self, issuer: str, identity: str, repository: str | None, workflow: str | None,
                 ref: str | None) -> None:  # fmt: skip
        self._init(issuer, identity, repository, workflow, ref)


def public_good_root() -> Path:
    """The path of Sigstore's public-good trusted root as sigstore-python ships it (found without importing it)."""
    spec = importlib.util.find_spec("sigstore")
    if spec is None or not spec.submodule_search_locations:
        raise TrustedRootError("sigstore is not installed, so Sigstore's public-good trusted root is not there")
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*_PUBLIC_GOOD)


def verify_bundle(
    data: bytes, bundle: bytes, trusted_root: Path | None, allowed: Sequence[Sequence[Identity]] = (),
    root_content: bytes | None = None,
) -> CertifiedSigner:
    """The signer of ``data``, proven by ``bundle`` under ``trusted_root`` (None: the public-good
    root); BundleError when it does not prove it, with ``not_allowed`` when the signature is
    valid but its certificate is none of an ``allowed`` list's identities (each non-empty list must hold one).
    ``root_content``: the root's bytes as the caller read them (a receipt names exactly those), not read again."""
    from sigstore.errors import Error as SigstoreError
    from sigstore.errors import VerificationError
    from sigstore.models import Bundle, InvalidBundle
    from sigstore.verify import policy

    if len(bundle) > MAX_BUNDLE_BYTES:
        raise BundleError(f"a bundle larger than {MAX_BUNDLE_BYTES} bytes")
    try:
        jsondoc.loads(bundle)  # hostile input meets the one guarded JSON parse first
    except jsondoc.JSONDocumentError as exc:
        raise BundleError(f"a bundle that is not JSON ({exc})") from None
    try:
        parsed = Bundle.from_json(bundle)
    except (InvalidBundle, ValueError) as exc:
        raise BundleError(f"a file that is not a Sigstore bundle ({_short(exc)})") from None
    verifier = _verifier(trusted_root, root_content)
    try:
        verifier.verify_artifact(data, parsed, _AnyCertificate())
    except (VerificationError, SigstoreError, ValueError) as exc:
        raise BundleError(f"a bundle that does not verify under the trusted root ({_short(exc)})") from None
    certificate = parsed.signing_certificate
    signer = _signer_of(certificate)
    for identities in (group for group in allowed if group):
        choices = [
            policy.AllOf([
                policy.OIDCIssuerV2(i.issuer), policy.OIDCSourceRepositoryURI(i.source_repository_uri),
                policy.OIDCBuildSignerURI(i.build_signer_uri),
            ])
            for i in identities
        ]  # fmt: skip
        try:
            policy.AnyOf(choices).verify(certificate)
        except VerificationError as exc:
            raise BundleError(_short(exc), not_allowed=True) from None
    return signer


def prepare(trusted_root: Path | None) -> None:
    """Import sigstore and build the verifier for ``trusted_root`` ahead of the first bundle
    (in the background while a lock's requests are under way); a problem is left for
    :func:`verify_bundle` to report."""
    try:
        _verifier(trusted_root)
    except TrustedRootError:
        pass


def check_trusted_root(trusted_root: Path | None) -> None:
    """TrustedRootError when ``trusted_root`` cannot be read or is not a Sigstore trusted root."""
    _verifier(trusted_root)


class _AnyCertificate:
    """A sigstore verification policy that asks nothing of the certificate's identity: the
    identity is checked after verification, so an invalid signature and a signer not allowed
    are told apart (sigstore's own ``UnsafeNoOp`` logs a warning on every use)."""

    def verify(self, cert: object) -> None:
        return None


def _verifier(trusted_root: Path | None, content: bytes | None = None) -> Any:
    """sigstore's Verifier for a trusted root file (its ``content`` when already read), built once per content."""
    from sigstore.errors import Error as SigstoreError
    from sigstore.verify import Verifier

    path = trusted_root or public_good_root()
    try:
        # Named by a checkout's pyproject.toml: a regular file of at most the limit, never a FIFO's wait.
        content = read_bounded(path, PROJECT_FILE_LIMIT) if content is None else content
    except OSError as exc:
        raise TrustedRootError(f"{path}: cannot read the trusted root: {exc.strerror or exc}") from None
    key = (str(path), content)
    with _verifiers_lock:
        if key not in _verifiers:
            try:
                jsondoc.loads(content)
                _verifiers[key] = Verifier(trusted_root=_trusted_root_of(content))
            except (jsondoc.JSONDocumentError, SigstoreError, ValueError) as exc:
                raise TrustedRootError(f"{path}: not a Sigstore trusted root ({_short(exc)})") from None
        return _verifiers[key]


def _trusted_root_of(content: bytes) -> Any:
    """sigstore's TrustedRoot of exactly the bytes read above, built as ``TrustedRoot.from_file``
    builds it (sigstore 4, which pyproject.toml pins) but without reading the path again: the
    project's file could have changed since, or become a FIFO or a link to /dev/zero."""
    from sigstore.models import TrustedRoot
    from sigstore_models.trustroot import v1 as trustroot_v1

    return TrustedRoot(trustroot_v1.TrustedRoot.from_json(content))


def _signer_of(certificate: Any) -> CertifiedSigner:
    """The identity facts of a verified Fulcio certificate (1.3.6.1.4.1.57264.1.x extensions)."""
    from cryptography import x509

    def v2(dotted: str) -> str | None:
        from cryptography.hazmat import asn1

        try:
            ext = certificate.extensions.get_extension_for_oid(x509.ObjectIdentifier(dotted)).value
            return asn1.decode_der(str, ext.value)
        except (x509.ExtensionNotFound, ValueError, TypeError):
            return None

    issuer = v2("1.3.6.1.4.1.57264.1.8")
    if issuer is None:
        try:
            raw = certificate.extensions.get_extension_for_oid(x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1"))
            issuer = raw.value.value.decode()
        except (x509.ExtensionNotFound, UnicodeDecodeError):
            issuer = "(no issuer)"
    try:
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = san.get_values_for_type(x509.UniformResourceIdentifier) or san.get_values_for_type(x509.RFC822Name)
        identity = names[0] if names else "(no identity)"
    except x509.ExtensionNotFound:
        identity = "(no identity)"
    repository, workflow, ref = github_facts(v2("1.3.6.1.4.1.57264.1.12"), v2("1.3.6.1.4.1.57264.1.9"))
    return CertifiedSigner(issuer, identity, repository, workflow, ref)


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."

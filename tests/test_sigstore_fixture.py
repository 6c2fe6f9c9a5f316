"""The self-made Sigstore of tests/fixtures/sigstore_ca.py against sigstore-python's real verifier.

Every check here runs sigstore-python as kernel-deps does, unmodified and offline:
``Verifier(trusted_root=TrustedRoot.from_file(path))`` and ``verify_artifact``. What is
accepted proves the fixture builds what the verifier checks; what is refused proves the
verifier really checks it against the fixture (a fixture accepted whatever it held would
prove nothing for the tests built on it).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from sigstore.models import Bundle, TrustedRoot
from sigstore.verify import Verifier, policy

from tests.fixtures.sigstore_ca import GITHUB_ISSUER, Identity, LocalSigstore

DATA = b'{"name": "activation", "digest": {"algorithm": "sha256", "files": {}}}\n'
SIGNER = Identity("kernels-test/activation")


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every connection attempt, refused and recorded: verification must need none."""
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError(f"no network in these tests (tried {address!r})")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    yield attempts
    assert attempts == [], f"sigstore tried to reach {attempts}"


@pytest.fixture
def verifier(local_sigstore: LocalSigstore, tmp_path: Path) -> Verifier:
    """sigstore-python's verifier trusting the session's local Sigstore, read from a file."""
    root = local_sigstore.write_trusted_root(tmp_path / "trusted_root.json")
    return Verifier(trusted_root=TrustedRoot.from_file(str(root)))


def identity_policy(identity: Identity) -> policy.Identity:
    return policy.Identity(identity=identity.uri, issuer=identity.issuer)


def workflow_policy(repository: str, signer_uris: list[str]) -> policy.AllOf:
    """What Hugging Face kernels 0.17.2's GitHubWorkflowPolicy checks, from sigstore's own policies."""
    return policy.AllOf(
        [
            policy.OIDCIssuer(GITHUB_ISSUER),
            policy.OIDCIssuerV2(GITHUB_ISSUER),
            policy.OIDCSourceRepositoryURI(f"https://github.com/{repository}"),
            policy.AnyOf([policy.OIDCBuildSignerURI(uri) for uri in signer_uris]),
        ]
    )


def test_a_bundle_verifies_for_its_signer_identity_and_issuer(local_sigstore: LocalSigstore, verifier: Verifier) -> None:
    bundle = Bundle.from_json(local_sigstore.sign(DATA, SIGNER))
    verifier.verify_artifact(DATA, bundle, identity_policy(SIGNER))
    assert bundle.signing_certificate.subject.rfc4514_string() == ""


def test_a_bundle_satisfies_the_source_repository_build_signer_and_issuer_v2_policy(
    local_sigstore: LocalSigstore, verifier: Verifier
) -> None:
    bundle = Bundle.from_json(local_sigstore.sign(DATA, SIGNER))
    verifier.verify_artifact(DATA, bundle, workflow_policy(SIGNER.repository, [SIGNER.uri]))

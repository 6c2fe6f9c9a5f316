"""The self-made Sigstore of tests/fixtures/sigstore_ca.py against sigstore-python's real verifier.

Every check here runs sigstore-python as kernel-deps does, unmodified and offline:
``Verifier(trusted_root=TrustedRoot.from_file(path))`` and ``verify_artifact``. What is
accepted proves the fixture builds what the verifier checks; what is refused proves the
verifier really checks it against the fixture (a fixture accepted whatever it held would
prove nothing for the tests built on it).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sigstore.errors import VerificationError
from sigstore.models import Bundle, InvalidBundle, TrustedRoot
from sigstore.verify import Verifier, policy
from sigstore.verify.policy import VerificationPolicy

from tests.fixtures.peers import run_peer
from tests.fixtures.sigstore_ca import GITHUB_ISSUER, Identity, LocalSigstore

DATA = b'{"name": "activation", "digest": {"algorithm": "sha256", "files": {}}}\n'
SIGNER = Identity("kernels-test/activation")


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Every connection attempt, refused and recorded: verification must need none."""
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError(f"no network in these tests (tried {address!r})")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    yield attempts
    assert attempts == [], f"sigstore tried to reach {attempts}"


def verifier_for(sigstore: LocalSigstore | dict, folder: Path) -> Verifier:
    """sigstore-python's verifier trusting ``sigstore`` (or a trust root as a dict), read from a file."""
    path = folder / "trusted_root.json"
    if isinstance(sigstore, LocalSigstore):
        sigstore.write_trusted_root(path)
    else:
        path.write_text(json.dumps(sigstore), encoding="utf-8")
    return Verifier(trusted_root=TrustedRoot.from_file(str(path)))


@pytest.fixture
def verifier(local_sigstore: LocalSigstore, tmp_path: Path) -> Verifier:
    """The verifier trusting the session's local Sigstore."""
    return verifier_for(local_sigstore, tmp_path)


def identity_policy(identity: Identity) -> policy.Identity:
    return policy.Identity(identity=identity.uri, issuer=identity.issuer)


def workflow_policy(identity: Identity) -> policy.AllOf:
    """What Hugging Face kernels 0.17.2's GitHubWorkflowPolicy checks, from sigstore's own policies."""
    return policy.AllOf(
        [
            policy.OIDCIssuer(GITHUB_ISSUER),
            policy.OIDCIssuerV2(GITHUB_ISSUER),
            policy.OIDCSourceRepositoryURI(f"https://github.com/{identity.repository}"),
            policy.AnyOf([policy.OIDCBuildSignerURI(identity.uri)]),
        ]
    )


POLICIES: dict[str, Callable[[Identity], VerificationPolicy]] = {
    "identity": identity_policy,
    "workflow": workflow_policy,
}


def test_a_bundle_verifies_for_its_signer_identity_and_issuer(
    local_sigstore: LocalSigstore, verifier: Verifier
) -> None:
    text = local_sigstore.sign(DATA, SIGNER)
    bundle = Bundle.from_json(text)
    verifier.verify_artifact(DATA, bundle, identity_policy(SIGNER))
    assert json.loads(text)["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
    assert bundle.signing_certificate.subject.rfc4514_string() == ""


def test_a_bundle_satisfies_the_source_repository_build_signer_and_issuer_v2_policy(
    local_sigstore: LocalSigstore, verifier: Verifier
) -> None:
    verifier.verify_artifact(DATA, Bundle.from_json(local_sigstore.sign(DATA, SIGNER)), workflow_policy(SIGNER))


def test_hf_kernels_own_github_workflow_policy_accepts_the_bundle_and_refuses_another_repository(
    local_sigstore: LocalSigstore, tmp_path: Path
) -> None:
    # kernels 0.17.2's verify_variant takes its root online (Verifier.production()); its
    # policy class is what decides, and it runs here against our root.
    root = local_sigstore.write_trusted_root(tmp_path / "trusted_root.json")
    (tmp_path / "metadata.json").write_bytes(DATA)
    assert local_sigstore.sign_file(tmp_path / "metadata.json", SIGNER) == tmp_path / "metadata.json.sigstore"
    code = (
        "import json, pathlib, socket, sys\n"
        "socket.socket.connect = socket.socket.connect_ex = lambda *a: sys.exit('tried the network')\n"
        "from kernels.verify import GitHubWorkflowPolicy\n"
        "from sigstore.errors import VerificationError\n"
        "from sigstore.models import Bundle, TrustedRoot\n"
        "from sigstore.verify import Verifier\n"
        "folder = pathlib.Path(sys.argv[2])\n"
        "verifier = Verifier(trusted_root=TrustedRoot.from_file(sys.argv[1]))\n"
        "bundle = Bundle.from_json((folder / 'metadata.json.sigstore').read_bytes())\n"
        "results = {}\n"
        "for repo in (sys.argv[3], 'kernels-test/other'):\n"
        "    try:\n"
        "        verifier.verify_artifact((folder / 'metadata.json').read_bytes(), bundle,\n"
        "                                 GitHubWorkflowPolicy(repo_id=repo, signer_uris=[sys.argv[4]]))\n"
        "        results[repo] = 'verified'\n"
        "    except VerificationError as e:\n"
        "        results[repo] = str(e)\n"
        "print(json.dumps(results))\n"
    )
    results = run_peer("0.17", code, str(root), str(tmp_path), SIGNER.repository, SIGNER.uri)
    assert results[SIGNER.repository] == "verified"
    assert "kernels-test/other" in results["kernels-test/other"]


def test_the_leaf_carries_the_workflow_identity_in_each_extension_sigstores_policies_read(
    local_sigstore: LocalSigstore, verifier: Verifier
) -> None:
    signer = Identity("kernels-test/layer-norm", workflow=".github/workflows/release.yaml", ref="refs/tags/v1.2.0")
    every_extension = policy.AllOf(
        [
            policy.OIDCIssuer(GITHUB_ISSUER),  # legacy .1.1, the raw string
            policy.GitHubWorkflowTrigger("push"),
            policy.GitHubWorkflowSHA(signer.commit),
            policy.GitHubWorkflowName("release"),
            policy.GitHubWorkflowRepository("kernels-test/layer-norm"),
            policy.GitHubWorkflowRef("refs/tags/v1.2.0"),
            policy.OIDCIssuerV2(GITHUB_ISSUER),  # .1.8 onwards, DER UTF8Strings
            policy.OIDCBuildSignerURI(
                "https://github.com/kernels-test/layer-norm/.github/workflows/release.yaml@refs/tags/v1.2.0"
            ),
            policy.OIDCBuildSignerDigest(signer.commit),
            policy.OIDCRunnerEnvironment("github-hosted"),
            policy.OIDCSourceRepositoryURI("https://github.com/kernels-test/layer-norm"),
            policy.OIDCSourceRepositoryDigest(signer.commit),
            policy.OIDCSourceRepositoryRef("refs/tags/v1.2.0"),
            policy.OIDCSourceRepositoryOwnerURI("https://github.com/kernels-test"),
            policy.OIDCBuildConfigURI(signer.uri),
            policy.OIDCBuildTrigger("push"),
            policy.OIDCSourceRepositoryVisibility("public"),
            policy.Identity(identity=signer.uri),
        ]
    )
    verifier.verify_artifact(DATA, Bundle.from_json(local_sigstore.sign(DATA, signer)), every_extension)


def test_data_changed_after_signing_is_refused(local_sigstore: LocalSigstore, verifier: Verifier) -> None:
    bundle = Bundle.from_json(local_sigstore.sign(DATA, SIGNER))
    with pytest.raises(VerificationError, match="digest mismatch"):
        verifier.verify_artifact(DATA.replace(b"activation", b"activatiom"), bundle, identity_policy(SIGNER))


@pytest.mark.parametrize("policy_kind", sorted(POLICIES))
@pytest.mark.parametrize(
    "signed_by",
    [
        Identity("kernels-test/other"),
        Identity(SIGNER.repository, workflow=".github/workflows/release.yml"),
        Identity(SIGNER.repository, ref="refs/heads/dev"),
    ],
    ids=["repository", "workflow", "ref"],
)
def test_another_repository_workflow_or_ref_fails_the_policy(
    local_sigstore: LocalSigstore, verifier: Verifier, signed_by: Identity, policy_kind: str
) -> None:
    bundle = Bundle.from_json(local_sigstore.sign(DATA, signed_by))
    verifier.verify_artifact(DATA, bundle, POLICIES[policy_kind](signed_by))  # valid for its own signer
    with pytest.raises(VerificationError, match="does not match|do not match|0 of 1 policies"):
        verifier.verify_artifact(DATA, bundle, POLICIES[policy_kind](SIGNER))


def test_a_bundle_under_another_root_is_refused(local_sigstore: LocalSigstore, verifier: Verifier) -> None:
    elsewhere = LocalSigstore("elsewhere")
    with pytest.raises(VerificationError, match="certificate chain"):
        verifier.verify_artifact(DATA, Bundle.from_json(elsewhere.sign(DATA, SIGNER)), identity_policy(SIGNER))


def test_a_leaf_expired_now_verifies_when_it_was_valid_at_its_logged_time(
    local_sigstore: LocalSigstore, verifier: Verifier
) -> None:
    signed_at = datetime.now(timezone.utc) - timedelta(days=30)
    bundle = Bundle.from_json(local_sigstore.sign(DATA, SIGNER, signed_at=signed_at))
    assert bundle.signing_certificate.not_valid_after_utc < datetime.now(timezone.utc)
    verifier.verify_artifact(DATA, bundle, identity_policy(SIGNER))


def test_a_leaf_logged_after_it_expired_is_refused(local_sigstore: LocalSigstore, verifier: Verifier) -> None:
    signed_at = datetime.now(timezone.utc) - timedelta(days=30)
    text = local_sigstore.sign(DATA, SIGNER, signed_at=signed_at, logged_at=signed_at + timedelta(hours=1))
    with pytest.raises(VerificationError, match="certificate chain"):
        verifier.verify_artifact(DATA, Bundle.from_json(text), identity_policy(SIGNER))


@pytest.mark.parametrize("text", ["not json {", "", '{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}'])
def test_a_bundle_that_is_not_a_bundle_fails_to_parse_with_sigstores_error(text: str) -> None:
    with pytest.raises(InvalidBundle, match="failed to load bundle"):
        Bundle.from_json(text)


def test_every_entry_of_a_growing_log_has_an_inclusion_proof_that_verifies(tmp_path: Path) -> None:
    # Entries 0, 3, 6, ... of trees of 3, 6, 9, ... leaves: proofs with left and right
    # siblings, balanced and unbalanced, all checked against each one's signed checkpoint.
    sigstore = LocalSigstore("growing")
    bundles = [(b"%d" % i, sigstore.sign(b"%d" % i, SIGNER)) for i in range(9)]
    verifier = verifier_for(sigstore, tmp_path)
    for data, text in bundles:
        verifier.verify_artifact(data, Bundle.from_json(text), identity_policy(SIGNER))
    proofs = [_entry(json.loads(text))["inclusionProof"] for _, text in bundles]
    assert [(p["logIndex"], p["treeSize"]) for p in proofs[:3]] == [("0", "3"), ("3", "6"), ("6", "9")]
    assert len({len(p["hashes"]) for p in proofs}) > 2


def _entry(bundle: dict) -> dict:
    return bundle["verificationMaterial"]["tlogEntries"][0]


def _swap_promise(bundle: dict, other: dict) -> None:
    _entry(bundle)["inclusionPromise"] = _entry(other)["inclusionPromise"]


def _swap_checkpoint(bundle: dict, other: dict) -> None:
    _entry(bundle)["inclusionProof"]["checkpoint"] = _entry(other)["inclusionProof"]["checkpoint"]


def _shift_integrated_time(bundle: dict, other: dict) -> None:
    _entry(bundle)["integratedTime"] = str(int(_entry(bundle)["integratedTime"]) + 1)


def _swap_certificate(bundle: dict, other: dict) -> None:
    bundle["verificationMaterial"]["certificate"] = other["verificationMaterial"]["certificate"]


def _swap_signature(bundle: dict, other: dict) -> None:
    bundle["messageSignature"]["signature"] = other["messageSignature"]["signature"]


@pytest.mark.parametrize(
    ("tamper", "refusal"),
    [
        (_swap_promise, "SET: invalid inclusion promise"),
        (_swap_checkpoint, "invalid root hash"),
        (_shift_integrated_time, "SET: invalid inclusion promise"),
        (_swap_certificate, "Signature is invalid"),
        (_swap_signature, "Signature is invalid"),
    ],
    ids=["signed-entry-timestamp", "checkpoint", "integrated-time", "certificate", "signature"],
)
def test_the_verifier_refuses_a_bundle_whose_parts_come_from_another_signing(
    local_sigstore: LocalSigstore, verifier: Verifier, tamper: Callable[[dict, dict], None], refusal: str
) -> None:
    bundle = json.loads(local_sigstore.sign(DATA, SIGNER))
    tamper(bundle, json.loads(local_sigstore.sign(DATA, SIGNER)))
    with pytest.raises(VerificationError, match=refusal):
        verifier.verify_artifact(DATA, Bundle.from_json(json.dumps(bundle)), identity_policy(SIGNER))


@pytest.mark.parametrize(
    ("key", "refusal"), [("ctlogs", "failed to verify SCT"), ("tlogs", "invalid log entry")], ids=["ct-log", "rekor"]
)
def test_a_root_with_another_log_key_refuses_the_bundle(
    local_sigstore: LocalSigstore, tmp_path: Path, key: str, refusal: str
) -> None:
    # The SCT, the SET and the checkpoint are each checked against the root's own log keys.
    root = local_sigstore.trusted_root()
    root[key] = LocalSigstore("other-logs").trusted_root()[key]
    verifier = verifier_for(root, tmp_path)
    with pytest.raises(VerificationError, match=refusal):
        verifier.verify_artifact(DATA, Bundle.from_json(local_sigstore.sign(DATA, SIGNER)), identity_policy(SIGNER))


def test_verifying_touches_neither_the_network_nor_the_tuf_cache(
    local_sigstore: LocalSigstore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: list[object]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for name, sub in (("HOME", ""), ("XDG_CACHE_HOME", "cache"), ("XDG_DATA_HOME", "data")):
        monkeypatch.setenv(name, str(home / sub))
    verifier = verifier_for(local_sigstore, tmp_path)
    verifier.verify_artifact(DATA, Bundle.from_json(local_sigstore.sign(DATA, SIGNER)), workflow_policy(SIGNER))
    assert no_network == []
    assert list(home.iterdir()) == []


def test_the_trusted_root_is_sigstores_format_with_the_ca_chain_and_both_logs(local_sigstore: LocalSigstore) -> None:
    root = json.loads(local_sigstore.trusted_root_json())
    assert root == local_sigstore.trusted_root()
    assert root["mediaType"] == "application/vnd.dev.sigstore.trustedroot+json;version=0.1"
    assert len(root["certificateAuthorities"][0]["certChain"]["certificates"]) == 2  # intermediate, root
    assert [len(root[key]) for key in ("tlogs", "ctlogs")] == [1, 1]

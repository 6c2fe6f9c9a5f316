"""``get_kernel(signature_policy=...)`` refuses in its own words: what it did (refused to
load the kernel; nothing is written, there is no lock) and where the policy came from (the
``signature_policy`` argument), never ``kernels.lock not written`` or a setting in
``pyproject.toml``, for every way a build can fail the policy: a signer the policy does not
allow, no signature where it requires one, a signature under another Sigstore, a library
that differs from its digest (found from the listing) and a plain file that differs from it
(found only once its bytes are fetched).
"""

from __future__ import annotations

import pytest

from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, KernelRepo, Release, RepoFileContent
from tests.fixtures.sigstore_ca import Identity, LocalSigstore

WORKFLOW = ".github/workflows/build.yml"
MAIN = "refs/heads/main"


def add_signed(hub_env, name: str, sigstore: LocalSigstore | None, **release) -> str:
    """Serve ``kernels-test/<name>``, its builds with a digest and (with ``sigstore``) signed by its own workflow."""
    repo_id = f"kernels-test/{name}"
    if sigstore is not None:
        release["sign"] = lambda data, variant: sigstore.sign(data, Identity(repo_id))
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CPU_VARIANT, CUDA_VARIANT), digest="sha256",
                                                  **release),)))  # fmt: skip
    return repo_id


def swap_library(variant: str, files: dict) -> dict:
    name = next(p for p in files if p.endswith(".so"))
    return {**files, name: RepoFileContent(b"not the built library", lfs=True)}


def swap_plain_file(variant: str, files: dict) -> dict:
    return {**files, "_ops.py": RepoFileContent(b"OPS_NAMESPACE = 'planted'\n", lfs=False)}


def test_every_refusal_of_get_kernel_names_the_call_and_its_argument(hub_env, tmp_path) -> None:
    from kernel_deps import Identity as Allowed
    from kernel_deps import SignaturePolicy, get_kernel
    from kernel_deps.core.errors import DigestMismatchError, SignatureError

    ours, other = LocalSigstore("policy-words"), LocalSigstore("policy-words-other")
    root = ours.write_trusted_root(tmp_path / "trusted_root.json")
    cases = {
        "not-allowed": (add_signed(hub_env, "words-not-allowed", ours), "add it to signature_policy's identities"),
        "unsigned": (add_signed(hub_env, "words-unsigned", None), "drop signature_policy's require=True"),
        "foreign-root": (add_signed(hub_env, "words-foreign-root", other), "signature_policy's trusted_root"),
        "digest-lfs": (add_signed(hub_env, "words-digest-lfs", ours, tamper=swap_library), "match its metadata.json digest"),
        "digest-plain": (add_signed(hub_env, "words-digest-plain", ours, tamper=swap_plain_file),
                         "match its metadata.json digest"),
    }  # fmt: skip
    for case, (repo_id, hint) in cases.items():
        allowed = Allowed(repo_id, ".github/workflows/other.yml" if case == "not-allowed" else WORKFLOW, MAIN)
        policy = SignaturePolicy(trusted_root=root, require=True, identities=[allowed])
        with pytest.raises((SignatureError, DigestMismatchError)) as refused:
            get_kernel(repo_id, version=1, backend="cpu", trust_remote_code=True, signature_policy=policy)
        message = str(refused.value)
        assert message.startswith(f"get_kernel('{repo_id}') refused to load {repo_id}"), (case, message)
        assert "under its signature_policy argument" in message.split(": ")[0], (case, message)
        assert (case == "digest-plain") == ("not placed in the cache" in message.split(": ")[0]), (case, message)
        assert f"{repo_id} build {CPU_VARIANT}" in message and hint in message, (case, message)
        assert "kernels.lock" not in message and "pyproject.toml" not in message, (case, message)
        assert "[tool.kernels" not in message and "the project" not in message, (case, message)

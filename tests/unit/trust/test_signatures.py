"""Sigstore signatures and metadata.json digests: verified at lock time, offline ever after.

Every kernel here is a real repo on the local Hub whose variants carry kernel-builder's
``digest`` and a ``metadata.json.sigstore`` bundle made by a Sigstore of the tests' own
(tests/fixtures/sigstore_ca.py); sigstore-python's real verifier checks each bundle
offline under that Sigstore's trusted root, which the project names in
``[tool.kernels.trust] trusted-root``.
"""

from __future__ import annotations

import json
import os
import subprocess
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, KernelRepo, Release, RepoFileContent
from tests.fixtures.cli import run_kernels
from tests.fixtures.peers import READ_WITH_016, READ_WITH_017, run_peer
from tests.fixtures.projects import write_project
from tests.fixtures.sigstore_ca import Identity, LocalSigstore

ORG = "kernels-test"
VARIANTS = (CPU_VARIANT, CUDA_VARIANT)
WORKFLOW = ".github/workflows/build.yml"
MAIN = "refs/heads/main"


@pytest.fixture(scope="module")
def sigstore() -> LocalSigstore:
    return LocalSigstore("tests")


def signed(sigstore: LocalSigstore, identity: Identity, **kwargs):
    """A Release.sign that signs each metadata.json as ``identity``."""
    return lambda data, variant: sigstore.sign(data, identity, **kwargs)


def add_signed(hub_env, name: str, sigstore: LocalSigstore | None, *, identity: Identity | None = None,
               releases: tuple[str, ...] = ("1.0.0",), **release) -> str:  # fmt: skip
    """Serve ``kernels-test/<name>``, each release with a digest and (with ``sigstore``) signed
    as ``identity`` (default: the repo's own build workflow on main); returns the repo id."""
    repo_id = f"{ORG}/{name}"
    if sigstore is not None:
        release.setdefault("sign", signed(sigstore, identity or Identity(repo_id)))
    release.setdefault("digest", "sha256")
    hub_env.add_repo(KernelRepo(repo_id, tuple(Release(v, variants=VARIANTS, **release) for v in releases)))
    return repo_id


def policy(root: Path | None, *, require: bool = False, identities: list[dict] | None = None) -> str:
    """A [tool.kernels.trust] table allowing the test org, with a signature policy."""
    lines = ["[tool.kernels.trust]", f'publishers = ["{ORG}"]']
    if root is not None:
        lines.append(f'trusted-root = "{root.name}"')
    if require:
        lines.append("require-signatures = true")
    if identities is not None:
        items = ", ".join("{ " + ", ".join(f'{k} = "{v}"' for k, v in i.items()) + " }" for i in identities)
        lines.append(f"identities = [{items}]")
    return "\n".join(lines) + "\n\n"


def project_for(tmp_path: Path, sigstore: LocalSigstore | None, deps: str, **kwargs) -> Path:
    folder = tmp_path / "app"
    folder.mkdir(parents=True, exist_ok=True)
    root = sigstore.write_trusted_root(folder / "trusted_root.json") if sigstore is not None else None
    return write_project(folder, deps, extra=policy(root, **kwargs), trusted=())


def files_of(project: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(project.iterdir()) if p.is_file()}


def refused(project: Path, *args: str) -> str:
    """``kernels lock`` refusing: exit 1, one line, nothing written; the line."""
    before = files_of(project)
    result = run_kernels("lock", *args, str(project))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert files_of(project) == before
    return line


def test_a_signed_kernel_is_locked_with_its_signer_per_variant_and_downloaded_and_verified(
    hub_env, sigstore, tmp_path
) -> None:
    repo_id = add_signed(hub_env, "sig-valid", sigstore)
    allowed = {"repository": repo_id, "workflow": WORKFLOW, "ref": MAIN}
    project = project_for(tmp_path, sigstore, f'"{repo_id}" = ">=1"\n', require=True, identities=[allowed])
    result = run_kernels("lock", str(project))
    assert result.returncode == 0, result.stderr
    entry = json.loads((project / "kernels.lock").read_text())[0]
    assert set(entry["signatures"]) == set(VARIANTS)
    uri = f"https://github.com/{repo_id}/{WORKFLOW}@{MAIN}"
    for variant, signer in entry["signatures"].items():
        metadata = hub_env.repos[repo_id].files["1.0.0"][f"build/{variant}/metadata.json"].data
        assert signer == {
            "issuer": "https://token.actions.githubusercontent.com", "identity": uri, "repository": repo_id,
            "workflow": WORKFLOW, "ref": MAIN, "metadata_sha256": __import__("hashlib").sha256(metadata).hexdigest(),
        }  # fmt: skip
        assert set(entry["variants"][variant]) == {"hash", "hash_type"}  # what kernels 0.16 accepts there
    assert run_kernels("lock", "--check", str(project), env={"HF_HUB_OFFLINE": "1"}).returncode == 0

    assert run_kernels("download", "--all-variants", str(project)).returncode == 0
    warm = run_kernels("download", "--all-variants", str(project), env={"HF_HUB_OFFLINE": "1"})
    assert warm.returncode == 0, warm.stderr  # the cached bundles verified again, offline
    verified = run_kernels("verify", "--json", str(project), env={"HF_HUB_OFFLINE": "1"})
    assert verified.returncode == 0, verified.stdout
    report = json.loads(verified.stdout)
    assert {v["variant"]: v["signer"]["identity"] for v in report["verified"]} == {v: uri for v in VARIANTS}


def test_metadata_changed_after_signing_is_refused_naming_kernel_and_variant(hub_env, sigstore, tmp_path) -> None:
    def change_metadata(variant: str, files: dict) -> dict:
        if variant != CPU_VARIANT:
            return files
        data = json.loads(files["metadata.json"].data)
        data["kernel-depends"] = [{"repo-id": f"{ORG}/rotary", "version": ">=1"}]  # what an attacker would add
        return {**files, "metadata.json": RepoFileContent(json.dumps(data).encode(), lfs=False)}

    repo_id = add_signed(hub_env, "sig-tampered", sigstore, tamper=change_metadata)
    project = project_for(tmp_path, sigstore, f'"{repo_id}" = ">=1"\n')
    line = refused(project)
    assert line.startswith("error: kernels.lock not written: 1 build is not signed as the project requires: ")
    assert f"{repo_id} build {CPU_VARIANT}: expected a valid signature under {project / 'trusted_root.json'}" in line
    assert "found a bundle that does not verify" in line and "digest mismatch" in line.lower()
    assert CUDA_VARIANT not in line


def test_an_lfs_file_not_matching_the_digest_is_refused_at_lock_time(hub_env, sigstore, tmp_path) -> None:
    def swap_library(variant: str, files: dict) -> dict:
        name = next(p for p in files if p.endswith(".so"))
        return {**files, name: RepoFileContent(b"not the signed build", lfs=True)}

    repo_id = add_signed(hub_env, "sig-lfs-digest", sigstore, tamper=swap_library)
    built = hub_env.repos[repo_id].files["1.0.0"]
    so = next(p for p in built if p.endswith(".so") and CPU_VARIANT in p).split("/", 2)[2]
    project = project_for(tmp_path, sigstore, f'"{repo_id}" = ">=1"\n')
    line = refused(project)
    assert line.startswith("error: kernels.lock not written: 2 builds do not match their digest: ")
    declared = json.loads(built[f"build/{CPU_VARIANT}/metadata.json"].data)["digest"]["files"][so]
    import base64
    import hashlib

    got = base64.b64encode(hashlib.sha256(b"not the signed build").digest()).decode()
    assert f"{repo_id} build {CPU_VARIANT}: expected {so} = {declared}; found {got}" in line


def loads_refused(repo_id: str, project: Path, error: type[Exception], says: str) -> None:
    """``load_kernel`` and ``get_locked_kernel``, twice each in this process, refusing with ``says``."""
    from kernel_deps import get_locked_kernel, load_kernel

    for load in (load_kernel, get_locked_kernel, load_kernel, get_locked_kernel):
        with pytest.raises(error) as refused_:
            load(repo_id, lockfile=project / "kernels.lock", backend="cpu")
        assert says in str(refused_.value), (load.__name__, str(refused_.value))


def placed_variant(repo_id: str, project: Path, variant: str = CPU_VARIANT) -> Path:
    from kernel_deps.cache import store as cache

    sha = read_lock(project / "kernels.lock", purpose="use").lock.get(repo_id).sha
    return cache.variant_dir(cache.repo_dir(repo_id), sha, variant)


def test_a_build_not_matching_its_digest_is_never_loadable_however_it_reaches_the_cache(
    hub_env, sigstore, tmp_path
) -> None:
    from kernel_deps.cache import store as cache
    from kernel_deps.core.errors import DigestMismatchError, KernelNotCachedError
    from tests.fixtures.cached_project import place_by_hand

    def change_python(variant: str, files: dict) -> dict:
        return {**files, "_ops.py": RepoFileContent(b"import os; os.system('true')\n", lfs=False)}

    repo_id = add_signed(hub_env, "sig-plain-digest", sigstore, tamper=change_python)
    project = project_for(tmp_path, sigstore, f'"{repo_id}" = ">=1"\n')
    # The listing gives a plain file's git blob SHA-1 only: the lock can prove its presence, not its bytes.
    assert run_kernels("lock", str(project)).returncode == 0
    download = run_kernels("download", "--variant", CPU_VARIANT, str(project))
    assert download.returncode == 1
    (line,) = download.stderr.splitlines()
    assert line.startswith("error: not placed in the cache: 1 build does not match its digest: "), line
    assert f"{repo_id} build {CPU_VARIANT}: expected _ops.py = " in line and "; found " in line
    assert line.endswith("; ask the kernel's owners to publish a build whose files match its metadata.json digest")
    folder = placed_variant(repo_id, project)
    repo = cache.repo_dir(repo_id)
    sha = folder.parents[1].name
    assert not folder.parent.exists() and not cache.manifest_path(repo, sha, CPU_VARIANT).exists()
    assert any((repo / "blobs").iterdir())  # the verified blobs stay: content-addressed, never loaded alone
    assert run_kernels("verify", "--require-cached", "--json", str(project), env={"HF_HUB_OFFLINE": "1"}).returncode == 1

    # The loader never finds it loadable: not in the cache for load_kernel, refused by
    # get_locked_kernel's own download, the second time as the first.
    from kernel_deps import get_locked_kernel, load_kernel

    from kernel_deps import get_kernel

    for _ in range(2):
        with pytest.raises(KernelNotCachedError):
            load_kernel(repo_id, lockfile=project / "kernels.lock", backend="cpu")
        with pytest.raises(DigestMismatchError, match="not placed in the cache: 1 build does not match its digest"):
            get_locked_kernel(repo_id, lockfile=project / "kernels.lock", backend="cpu")
        with pytest.raises(DigestMismatchError, match="not placed in the cache: 1 build does not match its digest"):
            get_kernel(repo_id, version=1, backend="cpu", trust_remote_code=True)  # no lock, no policy: still held
    assert not folder.exists()

    # Placed by anyone else, with the locked bytes, a manifest and all: refused by the loader every time.
    place_by_hand(hub_env.repos[repo_id], "1.0.0", CPU_VARIANT)
    loads_refused(repo_id, project, DigestMismatchError,
                  f"refusing to load {repo_id} {CPU_VARIANT}: 1 build does not match its digest: {repo_id} build "
                  f"{CPU_VARIANT}: expected _ops.py = ")  # fmt: skip
    verify = run_kernels("verify", "--json", str(project), env={"HF_HUB_OFFLINE": "1"})
    assert verify.returncode == 1
    problems = json.loads(verify.stdout)["problems"]
    assert [(p["kind"], p["variant"], p["path"]) for p in problems] == [("digest-mismatch", CPU_VARIANT, "_ops.py")]
    # download removes a copy in kernel-deps' layout whose bytes fail their own digest (its blobs stay).
    again = run_kernels("download", "--variant", CPU_VARIANT, str(project), env={"HF_HUB_OFFLINE": "1"})
    assert again.returncode == 1
    assert again.stderr.startswith("error: removed from the cache: 1 build does not match its digest: ")
    assert not folder.exists() and any((repo / "blobs").iterdir())


def test_a_forged_signer_record_or_a_swapped_trusted_root_is_never_loadable(hub_env, sigstore, tmp_path) -> None:
    from kernel_deps.core.errors import SignatureError, KernelNotCachedError
    from tests.fixtures.cached_project import place_by_hand

    repo_id = add_signed(hub_env, "sig-forged-record", sigstore)
    forged = project_for(tmp_path / "forged", sigstore, f'"{repo_id}" = ">=1"\n')
    assert run_kernels("lock", str(forged)).returncode == 0
    lock_file = forged / "kernels.lock"
    entry = json.loads(lock_file.read_text())
    for signer in entry[0]["signatures"].values():  # the record names a workflow that did not sign the build
        signer["workflow"] = ".github/workflows/release.yml"
        signer["identity"] = signer["identity"].replace("build.yml", "release.yml")
    lock_file.write_text(json.dumps(entry, indent=2) + "\n")
    download = run_kernels("download", "--variant", CPU_VARIANT, str(forged))
    assert download.returncode == 1
    (line,) = download.stderr.splitlines()
    assert line.startswith("error: not placed in the cache: 1 build is not signed as kernels.lock records: "
                           f"{repo_id} build {CPU_VARIANT}: expected the signer kernels.lock records ({repo_id} "
                           f".github/workflows/release.yml@{MAIN}); found a bundle signed by {repo_id} {WORKFLOW}@{MAIN}"), line
    assert line.endswith(f"restore kernels.lock from version control, or run 'kernels lock --upgrade-package {repo_id}' "
                         "and review the signer it records")  # fmt: skip
    assert not placed_variant(repo_id, forged).exists()
    from kernel_deps import load_kernel

    with pytest.raises(KernelNotCachedError):
        load_kernel(repo_id, lockfile=lock_file, backend="cpu")
    from kernel_deps import get_locked_kernel

    for _ in range(2):
        with pytest.raises(SignatureError, match="not placed in the cache: 1 build is not signed as kernels.lock"):
            get_locked_kernel(repo_id, lockfile=lock_file, backend="cpu")

    # The same bytes placed by hand: the loader refuses them under the forged record; download
    # reports them and leaves them (the bytes are what the lock pins; its record is what lies).
    place_by_hand(hub_env.repos[repo_id], "1.0.0", CPU_VARIANT)
    loads_refused(repo_id, forged, SignatureError, f"refusing to load {repo_id} {CPU_VARIANT}: 1 build is not signed "
                  f"as kernels.lock records: {repo_id} build {CPU_VARIANT}: expected the signer kernels.lock records")
    kept = run_kernels("download", "--variant", CPU_VARIANT, str(forged), env={"HF_HUB_OFFLINE": "1"})
    assert kept.returncode == 1
    assert kept.stderr.startswith("error: left in the cache, where loading it with kernels.lock is refused: 1 build ")
    assert placed_variant(repo_id, forged).is_dir()

    # A trusted root swapped after locking (the project's file now another Sigstore's): the
    # cached build is refused by download and the loader, and a fresh fetch is never placed.
    swapped = project_for(tmp_path / "swapped", sigstore, f'"{repo_id}" = ">=1"\n')
    assert run_kernels("lock", str(swapped)).returncode == 0
    LocalSigstore("elsewhere").write_trusted_root(swapped / "trusted_root.json")
    says = (f"1 build is not signed as the project requires: {repo_id} build {CPU_VARIANT}: expected a valid signature "
            f"under {swapped / 'trusted_root.json'}; found a bundle that does not verify under the trusted root")
    loads_refused(repo_id, swapped, SignatureError, f"refusing to load {repo_id} {CPU_VARIANT}: {says}")
    refused_ = run_kernels("download", "--variant", CPU_VARIANT, str(swapped), env={"HF_HUB_OFFLINE": "1"})
    assert refused_.returncode == 1 and says in refused_.stderr
    assert "name its trusted root in [tool.kernels.trust] trusted-root in pyproject.toml" in refused_.stderr
    import shutil

    shutil.rmtree(placed_variant(repo_id, swapped).parent)
    fetched = run_kernels("download", "--variant", CPU_VARIANT, str(swapped))
    assert fetched.returncode == 1 and fetched.stderr.startswith(f"error: not placed in the cache: {says}")
    assert not placed_variant(repo_id, swapped).exists()

    # A lock with no pyproject.toml beside it (here a copy; an embedded one alike) is judged
    # under Sigstore's public-good root, which this test Sigstore's bundles do not verify under.
    elsewhere = tmp_path / "bare"
    elsewhere.mkdir()
    shutil.copy(swapped / "kernels.lock", elsewhere / "kernels.lock")
    place_by_hand(hub_env.repos[repo_id], "1.0.0", CPU_VARIANT)
    loads_refused(repo_id, elsewhere, SignatureError, "expected a valid signature under Sigstore's public-good root")


@pytest.mark.parametrize(
    ("identity", "what"),
    [
        (Identity(f"{ORG}/someone-else"), "another repository"),
        (Identity(f"{ORG}/sig-who", workflow=".github/workflows/release.yml"), "another workflow"),
        (Identity(f"{ORG}/sig-who", ref="refs/heads/feature"), "another ref"),
    ],
)
def test_a_signer_the_project_does_not_allow_is_refused_saying_expected_and_found(
    hub_env, sigstore, tmp_path, identity: Identity, what: str
) -> None:
    name = f"sig-who-{what.split()[1]}"
    repo_id = add_signed(hub_env, name, sigstore, identity=identity)
    allowed = {"repository": f"{ORG}/sig-who", "workflow": WORKFLOW, "ref": MAIN}
    project = project_for(tmp_path, sigstore, f'"{repo_id}" = ">=1"\n', identities=[allowed])
    line = refused(project)
    assert f"{repo_id} build {CPU_VARIANT}: expected a signer of [tool.kernels.trust] identities: " in line
    assert f"{ORG}/sig-who {WORKFLOW}@{MAIN}; found a signature by {identity.repository} {identity.workflow}@{identity.ref}" in line
    assert "add it to [tool.kernels.trust] identities" in line


def test_a_kernels_own_identities_narrow_the_projects(hub_env, sigstore, tmp_path) -> None:
    repo_id = add_signed(hub_env, "sig-narrow", sigstore)
    other = {"repository": f"{ORG}/sig-narrow", "workflow": ".github/workflows/nightly.yml", "ref": MAIN}
    deps = f'"{repo_id}" = {{ version = ">=1", identities = [{{ repository = "{repo_id}", workflow = "{other["workflow"]}", ref = "{MAIN}" }}] }}\n'
    project = project_for(tmp_path, sigstore, deps)  # the project allows any signer, the kernel only nightly.yml
    line = refused(project)
    assert f"expected a signer of {repo_id}'s identities: {repo_id} .github/workflows/nightly.yml@{MAIN}" in line


def test_a_bundle_under_another_root_is_refused(hub_env, sigstore, tmp_path) -> None:
    repo_id = add_signed(hub_env, "sig-other-root", LocalSigstore("elsewhere"))
    project = project_for(tmp_path, sigstore, f'"{repo_id}" = ">=1"\n')
    line = refused(project)
    assert f"{repo_id} build {CPU_VARIANT}: expected a valid signature under" in line
    assert "found a bundle that does not verify under the trusted root" in line


def test_unsigned_while_required_is_refused_and_allowed_otherwise(hub_env, sigstore, tmp_path) -> None:
    repo_id = add_signed(hub_env, "sig-unsigned", None)
    project = project_for(tmp_path / "required", sigstore, f'"{repo_id}" = ">=1"\n', require=True)
    line = refused(project)
    assert f"{repo_id} build {CPU_VARIANT}: expected a signed metadata.json ([tool.kernels.trust] require-signatures" in line
    assert "found no metadata.json.sigstore" in line
    # There is no signer to trust: the hint says what would do.
    assert line.endswith("; choose a version whose builds are signed, or drop [tool.kernels.trust] "
                         "require-signatures = true in pyproject.toml")  # fmt: skip
    assert "this signer" not in line
    relaxed = project_for(tmp_path / "relaxed", sigstore, f'"{repo_id}" = ">=1"\n')
    assert run_kernels("lock", str(relaxed)).returncode == 0
    assert "signatures" not in json.loads((relaxed / "kernels.lock").read_text())[0]


def test_a_bundle_that_is_not_json_is_refused(hub_env, sigstore, tmp_path) -> None:
    repo_id = add_signed(hub_env, "sig-not-json", sigstore, sign=lambda data, variant: "not json {")
    project = project_for(tmp_path, sigstore, f'"{repo_id}" = ">=1"\n')
    line = refused(project)
    assert f"{repo_id} build {CPU_VARIANT}: expected a valid signature" in line and "found a bundle that is not JSON" in line


def test_an_expired_leaf_valid_when_it_was_logged_is_accepted(hub_env, sigstore, tmp_path) -> None:
    long_ago = datetime.now(timezone.utc) - timedelta(days=200)
    repo_id = f"{ORG}/sig-expired"
    add_signed(hub_env, "sig-expired", sigstore, sign=signed(sigstore, Identity(repo_id), signed_at=long_ago))
    project = project_for(tmp_path, sigstore, f'"{repo_id}" = ">=1"\n')
    result = run_kernels("lock", str(project))
    assert result.returncode == 0, result.stderr
    assert set(json.loads((project / "kernels.lock").read_text())[0]["signatures"]) == set(VARIANTS)


def test_a_policy_changed_after_locking_fails_lock_check_and_verify_offline(hub_env, sigstore, tmp_path) -> None:
    repo_id = add_signed(hub_env, "sig-policy", sigstore)
    project = project_for(tmp_path, sigstore, f'"{repo_id}" = ">=1"\n')
    assert run_kernels("lock", str(project)).returncode == 0
    offline = {"HF_HUB_OFFLINE": "1"}
    assert run_kernels("lock", "--check", str(project), env=offline).returncode == 0
    pyproject = project / "pyproject.toml"
    allowed = {"repository": repo_id, "workflow": ".github/workflows/release.yml", "ref": MAIN}
    text = pyproject.read_text().replace('trusted-root = "trusted_root.json"\n', 'trusted-root = "trusted_root.json"\n'
                                         + policy(None, identities=[allowed]).splitlines()[2] + "\n")
    pyproject.write_text(text)
    check = run_kernels("lock", "--check", str(project), env=offline)
    assert check.returncode == 1
    assert f"{repo_id} build {CPU_VARIANT}: the signer kernels.lock records is not allowed" in check.stdout + check.stderr
    verify = run_kernels("verify", "--json", str(project), env=offline)
    assert verify.returncode == 1
    kinds = {(p["kind"], p["variant"]) for p in json.loads(verify.stdout)["problems"]}
    assert kinds == {("signer-not-allowed", v) for v in VARIANTS}


def test_kernels_016_and_017_read_a_lock_with_signatures(hub_env, sigstore, tmp_path) -> None:
    repo_id = add_signed(hub_env, "sig-peers", sigstore)
    project = project_for(tmp_path, sigstore, f'"{repo_id}" = ">=1"\n')
    assert run_kernels("lock", str(project)).returncode == 0
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    assert lock.get(repo_id).signatures
    read = run_peer("0.16", READ_WITH_016, str(project / "kernels.lock"), repo_id)
    assert read == {repo_id: lock.get(repo_id).sha, "entries": 1}
    out = tmp_path / "exported.lock"
    assert run_kernels("export", "--format", "kernels-0.17", "-o", str(out), str(project)).returncode == 0
    read17 = run_peer("0.17", READ_WITH_017, str(out), repo_id, "[]")
    assert read17["top_level"] == {repo_id: lock.get(repo_id).sha}


def test_with_targets_an_older_version_signed_by_an_allowed_signer_is_taken_with_a_note(
    hub_env, sigstore, tmp_path
) -> None:
    repo_id = f"{ORG}/sig-held-back"
    good, other = Identity(repo_id), Identity(repo_id, workflow=".github/workflows/nightly.yml")
    releases = (
        Release("1.0.0", variants=VARIANTS, digest="sha256", sign=signed(sigstore, good)),
        Release("1.1.0", variants=VARIANTS, digest="sha256", sign=signed(sigstore, other)),
    )
    built = hub_env.add_repo(KernelRepo(repo_id, releases))
    allowed = {"repository": repo_id, "workflow": WORKFLOW, "ref": MAIN}
    folder = tmp_path / "app"
    folder.mkdir()
    root = sigstore.write_trusted_root(folder / "trusted_root.json")
    extra = f'[tool.kernels]\ntargets = ["{CPU_VARIANT}"]\n\n' + policy(root, identities=[allowed])
    project = write_project(folder, f'"{repo_id}" = ">=1"\n', extra=extra, trusted=())
    result = run_kernels("lock", "--json", str(project))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert read_lock(project / "kernels.lock", purpose="use").lock.get(repo_id).sha == built.commits["1.0.0"]
    (note,) = [n for n in report["notes"] if n["kind"] == "held-back-unsigned"]
    (passed,) = note["passed_over"]
    assert (passed["version"], passed["commit"]) == ("v1.1.0", built.commits["1.1.0"])
    assert "expected a signer of [tool.kernels.trust] identities" in passed["signature"]
    assert ".github/workflows/nightly.yml" in passed["signature"]
    text = run_kernels("lock", "--dry-run", "--upgrade", str(project))
    assert f"note: {repo_id} v1.0.0, the newest version signed as required (v1.1.0: {repo_id} build" in text.stdout

    # Without targets there is no older version to prefer: the newest is refused.
    plain = project_for(tmp_path / "plain", sigstore, f'"{repo_id}" = ">=1"\n', identities=[allowed])
    line = refused(plain)
    assert f"{repo_id} build {CPU_VARIANT}: expected a signer of [tool.kernels.trust] identities" in line


def test_with_targets_no_version_signed_as_required_is_refused_naming_the_newest(hub_env, sigstore, tmp_path) -> None:
    repo_id = add_signed(hub_env, "sig-none-allowed", sigstore, releases=("1.0.0", "1.1.0"),
                         identity=Identity(f"{ORG}/elsewhere"))  # fmt: skip
    folder = tmp_path / "app"
    folder.mkdir()
    root = sigstore.write_trusted_root(folder / "trusted_root.json")
    allowed = {"repository": repo_id, "workflow": WORKFLOW, "ref": MAIN}
    extra = f'[tool.kernels]\ntargets = ["{CPU_VARIANT}"]\n\n' + policy(root, identities=[allowed])
    project = write_project(folder, f'"{repo_id}" = ">=1"\n', extra=extra, trusted=())
    line = refused(project)
    assert line.startswith(f"error: kernels.lock not written: no version of {repo_id} in range is signed as the "
                           f"project requires; the newest, v1.1.0: {repo_id} build ")  # fmt: skip


def test_tree_shows_the_signer_of_each_serving_build(hub_env, sigstore, tmp_path) -> None:
    repo_id = add_signed(hub_env, "sig-tree", sigstore)
    folder = tmp_path / "app"
    folder.mkdir()
    root = sigstore.write_trusted_root(folder / "trusted_root.json")
    extra = f'[tool.kernels]\ntargets = ["{CPU_VARIANT}"]\n\n' + policy(root)
    project = write_project(folder, f'"{repo_id}" = ">=1"\n', extra=extra, trusted=())
    assert run_kernels("lock", str(project)).returncode == 0
    shown = run_kernels("tree", str(project), env={"HF_HUB_OFFLINE": "1"})
    assert shown.returncode == 0
    assert f"{CPU_VARIANT} (signed by {repo_id} {WORKFLOW}@{MAIN})" in shown.stdout
    data = json.loads(run_kernels("tree", "--json", str(project)).stdout)
    (target,) = data["targets"]
    assert target["signers"][repo_id]["identity"] == f"https://github.com/{repo_id}/{WORKFLOW}@{MAIN}"


def test_get_kernel_holds_what_it_resolves_to_the_policy_the_caller_passes(hub_env, sigstore, tmp_path) -> None:
    from kernel_deps import Identity as Allowed
    from kernel_deps import SignaturePolicy, get_kernel
    from kernel_deps.core.errors import SignatureError, UsageError

    repo_id = add_signed(hub_env, "sig-get-kernel", sigstore)
    root = sigstore.write_trusted_root(tmp_path / "trusted_root.json")
    # As a library caller writes it: the root's path as a str, the identities as a list.
    allowed = SignaturePolicy(trusted_root=str(root), require=True, identities=[Allowed(repo_id, WORKFLOW, MAIN)])
    assert allowed == SignaturePolicy(trusted_root=root, require=True, identities=(Allowed(repo_id, WORKFLOW, MAIN),))
    module = get_kernel(repo_id, version=1, backend="cpu", trust_remote_code=True, signature_policy=allowed)
    assert module.__kernel_origin__.variant == CPU_VARIANT
    for bad, named in (({"trusted_root": 42}, "trusted_root=42): expected the path of a Sigstore trusted root"),
                       ({"trusted_root": ""}, "trusted_root=''): expected the path"),
                       ({"identities": repo_id}, f"identities='{repo_id}'): expected a list of"),
                       ({"require": "yes"}, "require='yes'): expected True or False")):  # fmt: skip
        with pytest.raises(UsageError) as refused_:
            SignaturePolicy(**bad)
        assert str(refused_.value).startswith("SignaturePolicy(" + named), str(refused_.value)

    # Refused in the caller's words: no lock, no pyproject.toml.
    other = SignaturePolicy(trusted_root=root, identities=(Allowed(repo_id, ".github/workflows/other.yml", MAIN),))
    with pytest.raises(SignatureError) as refused_:
        get_kernel(repo_id, version=1, backend="cpu", trust_remote_code=True, signature_policy=other)
    message = str(refused_.value)
    assert message.startswith(f"get_kernel('{repo_id}') refused to load {repo_id} under its signature_policy argument: "
                              "2 builds are not signed as signature_policy requires: ")
    assert f"{repo_id} build {CPU_VARIANT}: expected a signer of signature_policy's identities: {repo_id} " in message
    assert message.endswith("; if you trust this signer, add it to signature_policy's identities")
    assert "kernels.lock" not in message and "pyproject.toml" not in message
    unsigned = add_signed(hub_env, "sig-get-unsigned", None)
    with pytest.raises(SignatureError) as refused_:
        get_kernel(unsigned, version=1, backend="cpu", trust_remote_code=True, signature_policy=allowed)
    message = str(refused_.value)
    assert f"{unsigned} build {CPU_VARIANT}: expected a signed metadata.json (signature_policy's require=True); " \
           "found no metadata.json.sigstore" in message
    assert message.endswith("; choose a version whose builds are signed, or drop signature_policy's require=True")
    assert "kernels.lock" not in message and "pyproject.toml" not in message and "this signer" not in message
    missing_root = SignaturePolicy(trusted_root=tmp_path / "nowhere.json")
    with pytest.raises(UsageError) as bad:
        get_kernel(repo_id, version=1, backend="cpu", trust_remote_code=True, signature_policy=missing_root)
    assert str(bad.value).startswith(f"get_kernel('{repo_id}'): signature_policy's trusted_root: {tmp_path / 'nowhere.json'}")
    assert "pyproject.toml" not in str(bad.value)
    assert get_kernel(unsigned, version=1, backend="cpu", trust_remote_code=True).__kernel_origin__.variant == CPU_VARIANT


def test_locking_downloading_and_verifying_unsigned_kernels_never_imports_sigstore(hub_env, sigstore, tmp_path) -> None:
    from tests.fixtures.processes import imported_modules, top_level

    unsigned = add_signed(hub_env, "sig-startup-unsigned", None)
    project = project_for(tmp_path / "plain", sigstore, f'"{unsigned}" = ">=1"\n')
    for args in (("lock",), ("download",), ("verify",), ("download",)):
        result, modules = imported_modules(*args, str(project))
        assert result.returncode == 0, result.stderr[-2000:]
        assert "sigstore" not in top_level(modules), args
    signed_repo = add_signed(hub_env, "sig-startup-signed", sigstore)
    project = project_for(tmp_path / "signed", sigstore, f'"{signed_repo}" = ">=1"\n')
    result, modules = imported_modules("lock", str(project))
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((project / "kernels.lock").read_text())[0]["signatures"]  # the real verifier ran
    # ... in the verifier process where a second core can take it, else in this one.
    assert ("sigstore.verify.verifier" in modules) is (len(os.sched_getaffinity(0)) < 2)


def test_a_lock_process_verifying_in_its_verifier_process_concludes_what_one_in_process_does(
    hub_env, sigstore, tmp_path
) -> None:
    # `kernels lock` as a user runs it (a real process, where the verifier process takes the
    # bundles when a second core is usable) against the same command in this process: the
    # same refusal line for a signer not allowed, and the same kernels.lock once it is allowed.
    from tests.fixtures.processes import KERNELS

    good = add_signed(hub_env, "sig-process-good", sigstore)
    stranger = add_signed(hub_env, "sig-process-stranger", sigstore, identity=Identity(f"{ORG}/someone-else"))
    allowed = [{"repository": repo, "workflow": WORKFLOW, "ref": MAIN} for repo in (good, stranger)]
    deps = f'"{good}" = ">=1"\n"{stranger}" = ">=1"\n'
    outcomes = {}
    for name, identities in (("refused", allowed[:1]), ("allowed", allowed + [{"repository": f"{ORG}/someone-else",
                                                                              "workflow": WORKFLOW, "ref": MAIN}])):
        results = []
        for how in ("process", "here"):
            project = project_for(tmp_path / name / how, sigstore, deps, require=True, identities=identities)
            if how == "process":
                env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / name / "state")}  # no receipt stands in
                result = subprocess.run([KERNELS, "lock", str(project)], capture_output=True, text=True, env=env,
                                        timeout=120)  # fmt: skip
            else:
                result = run_kernels("lock", str(project), env={"XDG_STATE_HOME": str(tmp_path / name / "state-here")})
            lock = project / "kernels.lock"
            results.append((result.returncode, result.stderr.replace(str(project), "PROJECT"),
                            lock.read_text() if lock.exists() else None))  # fmt: skip
        assert results[0] == results[1], results
        outcomes[name] = results[0]
    code, stderr, lock = outcomes["refused"]
    assert code == 1 and lock is None
    assert stderr.startswith("error: kernels.lock not written: 2 builds are not signed as the project requires: ")
    assert f"found a signature by {ORG}/someone-else {WORKFLOW}@{MAIN}" in stderr
    code, _, lock = outcomes["allowed"]
    assert code == 0 and [entry["repo_id"] for entry in json.loads(lock)] == sorted([good, stranger])
    assert all(entry["signatures"] for entry in json.loads(lock))


@pytest.mark.parametrize(
    ("table", "quoted"),
    [
        ('require-signatures = "yes"', 'tool.kernels.trust.require-signatures = "yes": expected true or false'),
        ("trusted-root = 3", "tool.kernels.trust.trusted-root = 3: expected the path of a Sigstore trusted root"),
        ('identities = "me"', 'tool.kernels.trust.identities = "me": expected a list like [{ repository = '),
        ('identities = [{ repository = "a/b", workflow = "w.yml" }]', "tool.kernels.trust.identities[0] = "),
        ('identities = [{ repository = "a/b", workflow = "w", ref = "r", who = "x" }]', 'unknown key "who"'),
        ('identities = [{ repository = "nobody", workflow = "w", ref = "r" }]', 'repository "nobody" is not a repository'),
        ('signers = ["me"]', 'tool.kernels.trust has an unknown key "signers"'),
    ],
)
def test_a_bad_signature_policy_is_one_line_exit_2_and_nothing_written(tmp_path, table: str, quoted: str) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/rotary" = ">=1"\n',
                            extra=f'[tool.kernels.trust]\npublishers = ["{ORG}"]\n{table}\n\n', trusted=())  # fmt: skip
    before = files_of(project)
    result = run_kernels("lock", str(project))
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {project / 'pyproject.toml'}:") and quoted in line
    assert files_of(project) == before


def test_a_kernels_empty_identities_and_a_missing_trusted_root_are_bad_input(hub_env, sigstore, tmp_path) -> None:
    empty = write_project(tmp_path / "empty", '"kernels-test/rotary" = { version = ">=1", identities = [] }\n')
    result = run_kernels("lock", str(empty))
    assert result.returncode == 2 and '"kernels-test/rotary".identities is empty' in result.stderr
    repo_id = add_signed(hub_env, "sig-no-root", sigstore)
    project = project_for(tmp_path / "app", sigstore, f'"{repo_id}" = ">=1"\n')
    (project / "trusted_root.json").unlink()
    before = files_of(project)
    missing = run_kernels("lock", str(project))
    assert missing.returncode == 2
    (line,) = missing.stderr.splitlines()
    assert "[tool.kernels.trust] trusted-root" in line and "cannot read the trusted root" in line
    assert files_of(project) == before


@pytest.mark.parametrize(
    ("signatures", "where"),
    [
        ({"nope": {"issuer": "i", "identity": "u", "metadata_sha256": "0" * 64}}, "'[0].signatures.nope'"),
        ({"v": {"issuer": "i", "identity": "u"}}, "'[0].signatures.v'"),
        ({"v": {"issuer": "i", "identity": "u", "metadata_sha256": "xyz"}}, "'[0].signatures.v.metadata_sha256'"),
        ({"v": {"issuer": "i", "identity": "u", "metadata_sha256": "0" * 64, "extra": 1}}, "'[0].signatures.v.extra'"),
        ("all", "'[0].signatures'"),
    ],
)
def test_a_malformed_signatures_record_names_its_key(tmp_path, signatures, where: str) -> None:
    from kernel_deps.core.errors import LockfileError
    from kernel_deps.lock.model import Lockfile

    entry = {"repo_id": "org/x", "sha": "a" * 40, "variants": {"v": {"hash": "sha256-" + "0" * 64,
             "hash_type": "git_lfs_concat"}}, "dependencies": [], "signatures": signatures}  # fmt: skip
    with pytest.raises(LockfileError) as error:
        Lockfile.from_json(json.dumps([entry]))
    assert where in error.value.message and "\n" not in error.value.message


# kernels 0.17.2 hashing a variant folder (argv[1]) with argv[2]; its Metadata parse wants
# kernel-builder's own name and version rules, which the sample kernels do not follow.
DIGEST_WITH_017 = """
import json, sys
from kernels._rust import Digest, DigestAlgorithm
actual = Digest.hash_variant(getattr(DigestAlgorithm, sys.argv[2].upper()), sys.argv[1])
print(json.dumps({"files": actual.files}))
"""


@pytest.mark.parametrize("algorithm", ["sha256", "sha512"])
def test_the_digest_is_kernels_017s_and_a_downloaded_build_meets_it(hub_env, sigstore, tmp_path, algorithm) -> None:
    repo_id = add_signed(hub_env, f"sig-digest-{algorithm}", sigstore, digest=algorithm)
    project = project_for(tmp_path, sigstore, f'"{repo_id}" = ">=1"\n')
    assert run_kernels("lock", str(project)).returncode == 0
    assert run_kernels("download", "--variant", CPU_VARIANT, str(project)).returncode == 0
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    from kernel_deps.cache import store as cache

    folder = cache.variant_dir(cache.find_repo_dir(repo_id), lock.get(repo_id).sha, CPU_VARIANT)
    theirs = run_peer("0.17", DIGEST_WITH_017, str(folder), algorithm)  # kernels 0.17.2's own hashing
    declared = json.loads((folder / "metadata.json").read_bytes())["digest"]
    assert theirs["files"] == declared["files"] and declared["algorithm"] == algorithm
    assert "__pycache__/__init__.cpython-311.pyc" not in declared["files"] and "metadata.json" not in declared["files"]
    assert "layers/__init__.py" in declared["files"]


def test_to_wheel_of_a_kernel_outside_a_project_verifies_its_signatures_and_digests(hub_env, sigstore, tmp_path) -> None:
    """``kernels to-wheel ORG/NAME@REVISION`` locks in memory as ``kernels lock`` does with no
    policy: a build signed under a root other than Sigstore's public-good one, or one not
    matching its digest, is refused and no wheel written; an unsigned build with its digest
    met is turned into a wheel."""

    def swap_library(variant: str, files: dict) -> dict:
        name = next(p for p in files if p.endswith(".so"))
        return {**files, name: RepoFileContent(b"not the built library", lfs=True)}

    cases = {
        "wheel-foreign-root": (add_signed(hub_env, "wheel-foreign-root", sigstore), "does not verify under"),
        "wheel-digest": (add_signed(hub_env, "wheel-digest", None, tamper=swap_library), "do not match their digest"),
    }
    for name, (repo_id, says) in cases.items():
        out = tmp_path / name
        result = run_kernels("to-wheel", f"{repo_id}@v1.0.0", "-o", str(out), "--trust", ORG)
        assert result.returncode == 1, result.stdout + result.stderr
        (line,) = result.stderr.splitlines()
        assert repo_id in line and says in line, line
        assert not out.exists() or not any(out.iterdir())
    unsigned = add_signed(hub_env, "wheel-unsigned", None)
    out = tmp_path / "unsigned"
    result = run_kernels("to-wheel", f"{unsigned}@v1.0.0", "-o", str(out), "--trust", ORG)
    assert result.returncode == 0, result.stderr
    assert [p.name for p in out.glob("*.whl")] and (out / "requirements.txt").is_file()


def test_a_lock_in_another_format_is_held_to_the_signature_policy_by_every_consumer(
    hub_env, sigstore, tmp_path
) -> None:
    from kernel_deps import get_locked_kernel, load_kernel
    from kernel_deps.build_hooks import StaleLockError, lock_for_build
    from kernel_deps.core.errors import LockPolicyError

    repo_id = add_signed(hub_env, "sig-formats", sigstore)
    allowed = {"repository": repo_id, "workflow": WORKFLOW, "ref": MAIN}
    project = project_for(tmp_path, sigstore, f'"{repo_id}" = ">=1"\n', require=True, identities=[allowed])
    assert run_kernels("lock", str(project)).returncode == 0
    # The same pins as kernels 0.16 writes them: no signers (nor versions, nor requirements).
    exported = tmp_path / "016.lock"
    assert run_kernels("export", "--format", "kernels-0.16", "-o", str(exported), str(project)).returncode == 0
    (project / "kernels.lock").write_bytes(exported.read_bytes())
    before = files_of(project)
    missing = (f"{repo_id} build {CPU_VARIANT}: [tool.kernels.trust] require-signatures = true, but kernels.lock "
               "(written by Hugging Face kernels <= 0.16) records no signer for it")  # fmt: skip
    wheels = tmp_path / "wheels"
    for args in (("verify",), ("download",), ("download", "--all-variants"), ("sync", "--frozen"),
                 ("to-wheel", "-o", str(wheels))):  # fmt: skip
        result = run_kernels(*args, str(project))
        out = result.stdout + result.stderr
        assert result.returncode == 1, (args, out)
        assert "Traceback" not in out and missing in out, (args, out)
        assert "run 'kernels lock' to convert it" in out and "the signer of each build" in out, (args, out)
        # Refused before a byte is fetched or written: nothing in the cache, no wheel.
        assert not list((tmp_path / "hf-cache").glob("*/snapshots/*")), args
        assert not wheels.exists() and files_of(project) == before, args
    for load in (load_kernel, get_locked_kernel):
        with pytest.raises(LockPolicyError, match=re.escape(missing)):
            load(repo_id, lockfile=project / "kernels.lock")
    with pytest.raises(StaleLockError, match=re.escape(missing)):
        lock_for_build(project)

    # The class, not the case: a kernels 0.17 lock (the build hooks carry it as it is) is held
    # to the policy too, and so is our own format with its signers taken out.
    kernels017 = run_kernels("export", "--format", "kernels-0.17", str(project))
    assert kernels017.returncode == 2, kernels017.stderr  # a 0.16 lock cannot be exported to 0.17: relock first
    assert run_kernels("lock", str(project)).returncode == 0
    assert run_kernels("export", "--format", "kernels-0.17", "-o", str(exported), str(project)).returncode == 0
    ours = (project / "kernels.lock").read_text()
    (project / "kernels.lock").write_bytes(exported.read_bytes())
    with pytest.raises(StaleLockError, match=re.escape(f"{repo_id}: [tool.kernels.trust] require-signatures = true, "
                                                       "but kernels.lock (written by Hugging Face kernels 0.17) "
                                                       "records no signer for its builds")):  # fmt: skip
        lock_for_build(project)
    stripped = json.loads(ours)
    del stripped[0]["signatures"]
    (project / "kernels.lock").write_text(json.dumps(stripped, indent=2))
    result = run_kernels("download", str(project))
    assert result.returncode == 1 and "records no signer for it" in result.stderr, result.stderr
    with pytest.raises(LockPolicyError, match="records no signer for it"):
        get_locked_kernel(repo_id, lockfile=project / "kernels.lock")


def test_to_wheel_of_a_project_refuses_a_forged_signer_record_and_a_swapped_trusted_root(
    hub_env, sigstore, tmp_path
) -> None:
    """``kernels to-wheel`` gets its bytes through download's one gate: what download and
    verify refuse, it refuses too, and writes neither a wheel nor a requirements.txt."""
    from tests.fixtures.cached_project import place_by_hand

    repo_id = add_signed(hub_env, "wheel-signer-checks", sigstore)
    forged = project_for(tmp_path / "forged", sigstore, f'"{repo_id}" = ">=1"\n')
    assert run_kernels("lock", str(forged)).returncode == 0
    lock_file = forged / "kernels.lock"
    entry = json.loads(lock_file.read_text())
    entry[0]["signatures"][CPU_VARIANT]["ref"] = "refs/heads/release"
    lock_file.write_text(json.dumps(entry, indent=2) + "\n")
    swapped = project_for(tmp_path / "swapped", sigstore, f'"{repo_id}" = ">=1"\n')
    assert run_kernels("lock", str(swapped)).returncode == 0
    LocalSigstore("elsewhere").write_trusted_root(swapped / "trusted_root.json")
    cases = [
        (forged, "is not signed as kernels.lock records", "expected the signer kernels.lock records"),
        (swapped, "is not signed as the project requires", "found a bundle that does not verify under the trusted root"),
    ]
    for fetched in (True, False):  # fetched from the Hub (never placed), then found in the cache
        if not fetched:
            place_by_hand(hub_env.repos[repo_id], "1.0.0", CPU_VARIANT)
        for project, what, found in cases:
            out = tmp_path / f"wheels-{project.parent.name}"
            result = run_kernels("to-wheel", str(project), "-o", str(out))
            assert result.returncode == 1, result.stdout + result.stderr
            (line,) = result.stderr.splitlines()
            assert f"1 build {what}: {repo_id} build {CPU_VARIANT}: " in line and found in line, line
            assert line.startswith("error: not placed in the cache: " if fetched else "error: left in the cache, "), line
            assert not out.exists() or not any(out.iterdir())  # no wheel, no requirements.txt
    for project in (forged, swapped):  # as download and verify judge them
        assert run_kernels("download", "--variant", CPU_VARIANT, str(project)).returncode == 1
        assert run_kernels("verify", str(project), env={"HF_HUB_OFFLINE": "1"}).returncode == 1

"""Verification receipts: a warm command re-checks every byte and the recorded signer, and
stands on a receipt only for a bundle this user's kernel-deps verified itself.

Every kernel is a real repo on the local Hub, signed by the tests' own Sigstore
(tests/fixtures/sigstore_ca.py) and verified by sigstore-python's real verifier. A command
that must not import sigstore runs as a real process (``-X importtime``); the rest in-process.
Each test has a state folder of its own (``XDG_STATE_HOME``, tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_deps.cache import store as cache
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release
from tests.fixtures.cli import run_kernels
from tests.fixtures.processes import imported_modules, top_level
from tests.fixtures.projects import write_project
from tests.fixtures.sigstore_ca import Identity, LocalSigstore

ORG = "kernels-test"
WORKFLOW = ".github/workflows/build.yml"
MAIN = "refs/heads/main"
OFFLINE = {"HF_HUB_OFFLINE": "1"}
CRYPTO = {"sigstore", "cryptography", "pydantic", "rekor_types"}


@pytest.fixture(scope="module")
def sigstore() -> LocalSigstore:
    return LocalSigstore("receipts")


def add_signed(hub_env, name: str, sigstore: LocalSigstore) -> str:
    """``kernels-test/<name>`` on the Hub, one CPU build with a digest, signed by its own workflow on main."""
    repo_id = f"{ORG}/{name}"
    sign = lambda data, variant: sigstore.sign(data, Identity(repo_id))  # noqa: E731
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CPU_VARIANT,), digest="sha256", sign=sign),)))
    return repo_id


def allowed(repo_id: str, workflow: str = WORKFLOW) -> str:
    return f'{{ repository = "{repo_id}", workflow = "{workflow}", ref = "{MAIN}" }}'


def make_project(folder: Path, sigstore: LocalSigstore, deps: str, identities: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    sigstore.write_trusted_root(folder / "trusted_root.json")
    trust = f'[tool.kernels.trust]\npublishers = ["{ORG}"]\ntrusted-root = "trusted_root.json"\n'
    if identities is not None:
        trust += f"identities = [{identities}]\n"
    return write_project(folder, deps, extra=trust + "\n", trusted=())


def locked_and_downloaded(hub_env, sigstore, tmp_path: Path, name: str) -> tuple[str, Path]:
    repo_id = add_signed(hub_env, name, sigstore)
    project = make_project(tmp_path / "app", sigstore, f'"{repo_id}" = ">=1"\n')
    assert run_kernels("lock", str(project)).returncode == 0
    assert run_kernels("download", str(project)).returncode == 0
    return repo_id, project


def receipts_of(state: Path) -> list[Path]:
    folder = state / "kernel-deps" / "receipts"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def forge_signer_record(project: Path, workflow: str = ".github/workflows/release.yml") -> None:
    """kernels.lock edited by hand to record another workflow as each build's signer."""
    lock_file = project / "kernels.lock"
    entries = json.loads(lock_file.read_text())
    for signer in entries[0]["signatures"].values():
        signer["identity"] = signer["identity"].replace(signer["workflow"], workflow)
        signer["workflow"] = workflow
    lock_file.write_text(json.dumps(entries, indent=2) + "\n")


def verify_json(project: Path) -> tuple[int, dict]:
    result = run_kernels("verify", "--json", str(project), env=OFFLINE)
    return result.returncode, json.loads(result.stdout)


def signer_mismatch_refused(project: Path, repo_id: str) -> None:
    """verify and an offline download refuse the build for its signer, as without receipts."""
    code, report = verify_json(project)
    assert code == 1
    assert {(p["kind"], p["repo_id"]) for p in report["problems"]} == {("signature-invalid", repo_id)}
    download = run_kernels("download", str(project), env=OFFLINE)
    assert download.returncode == 1
    assert "1 build is not signed as kernels.lock records" in download.stderr


def forged_receipt(tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An attacker's state folder holding their own key and a receipt for the cached build's
    real inputs naming the signer the forged lock records, made with kernel-deps' own code."""
    from kernel_deps.project.record import read_project_record
    from kernel_deps.trust import receipts

    attacker = tmp_path / "attacker-state"
    attacker.mkdir(mode=0o700)
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    kernel = lock.kernels[0]
    folder = cache.variant_dir(cache.repo_dir(kernel.repo_id), kernel.sha, CPU_VARIANT)
    metadata, bundle = (folder / "metadata.json").read_bytes(), (folder / "metadata.json.sigstore").read_bytes()
    policy = read_project_record(project).policy
    inputs = receipts.inputs_of(kernel.repo_id, CPU_VARIANT, metadata, bundle, policy,
                                receipts.trusted_root_content(policy))  # fmt: skip
    with monkeypatch.context() as env:
        env.setenv("XDG_STATE_HOME", str(attacker))
        receipts.record(inputs, kernel.signatures[CPU_VARIANT])
        assert receipts.recall(inputs) == kernel.signatures[CPU_VARIANT]  # honoured under the attacker's key
    return attacker / "kernel-deps"


def test_a_second_warm_download_verify_and_load_import_no_sigstore_and_report_the_same(
    hub_env, sigstore, tmp_path, private_state_home
) -> None:
    _, project = locked_and_downloaded(hub_env, sigstore, tmp_path, "rcpt-warm")
    for args in (("download", str(project)), ("verify", "--json", str(project))):
        shutil.rmtree(private_state_home / "kernel-deps")  # no receipt: the first run verifies in full
        first, modules = imported_modules(*args, env_extra=OFFLINE)
        assert first.returncode == 0, first.stdout + first.stderr[-2000:]
        assert "sigstore.verify.verifier" in modules, args
        second, modules = imported_modules(*args, env_extra=OFFLINE)
        assert second.returncode == 0, second.stdout + second.stderr[-2000:]
        assert not top_level(modules) & CRYPTO, (args, top_level(modules) & CRYPTO)
        assert second.stdout == first.stdout
    report = json.loads(second.stdout)
    assert [v["signer"]["workflow"] for v in report["verified"]] == [WORKFLOW]

    load = ("import sys\nfrom kernel_deps import load_kernel\n"
            f"load_kernel('{ORG}/rcpt-warm', lockfile={str(project / 'kernels.lock')!r}, backend='cpu')\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'sigstore', 'cryptography', 'pydantic'}))\n")  # fmt: skip
    loaded = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, timeout=120,
                            env={**os.environ, **OFFLINE})  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.strip() == "[]"


def test_a_receipt_names_exactly_one_verification_and_only_a_verified_signer_is_kept(
    hub_env, sigstore, tmp_path, private_state_home
) -> None:
    repo_id, project = locked_and_downloaded(hub_env, sigstore, tmp_path, "rcpt-one")
    (receipt,) = receipts_of(private_state_home)  # the lock's verification of the fetched bundle
    key = private_state_home / "kernel-deps" / "receipt-key"
    assert (key.stat().st_mode & 0o777, receipt.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    assert receipt.parent.parent.stat().st_mode & 0o777 == 0o700
    forge_signer_record(project)  # refused: no receipt is kept for a refusal
    signer_mismatch_refused(project, repo_id)
    assert receipts_of(private_state_home) == [receipt]


@pytest.mark.parametrize("planting", ["random-name", "another-key", "another-signer"])
def test_receipts_planted_without_this_users_key_are_worthless(
    hub_env, sigstore, tmp_path, private_state_home, monkeypatch, planting: str
) -> None:
    repo_id, project = locked_and_downloaded(hub_env, sigstore, tmp_path, f"rcpt-planted-{planting}")
    forge_signer_record(project)  # the lock now records a signer the bundle does not prove
    attacker = forged_receipt(tmp_path, project, monkeypatch)
    (forged,) = receipts_of(attacker.parent)
    ours = private_state_home / "kernel-deps" / "receipts"
    (real,) = receipts_of(private_state_home)
    if planting == "random-name":
        (ours / os.urandom(32).hex()).write_bytes(forged.read_bytes())
    elif planting == "another-key":
        shutil.copy(forged, ours / forged.name)
    else:  # this user's own receipt, its content now naming the forged lock's signer
        content = json.loads(real.read_bytes())
        content["signer"] = json.loads(forged.read_bytes())["signer"]
        real.write_text(json.dumps(content))
    signer_mismatch_refused(project, repo_id)

    # What binds a receipt is the key: with the attacker's key in its place, the same receipt is honoured.
    shutil.copy(attacker / "receipt-key", private_state_home / "kernel-deps" / "receipt-key")
    shutil.copy(forged, ours / forged.name)
    assert verify_json(project)[0] == 0


def _link_key(ours: Path, attacker: Path) -> None:
    (ours / "receipt-key").unlink()
    (ours / "receipt-key").symlink_to(attacker / "receipt-key")


def _link_receipts(ours: Path, attacker: Path) -> None:
    shutil.copy(attacker / "receipt-key", ours / "receipt-key")
    shutil.rmtree(ours / "receipts")
    (ours / "receipts").symlink_to(attacker / "receipts")


def _chmod(name: str, mode: int):
    return lambda ours, attacker: (ours / name if name else ours).chmod(mode)


def _owned_by_nobody(ours: Path, attacker: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    os.chown(ours / "receipt-key", 65534, 65534)


FLAWS = {
    "key-is-a-link": _link_key,
    "receipts-folder-is-a-link": _link_receipts,
    "key-readable-by-group": _chmod("receipt-key", 0o640),
    "folder-writable-by-group": _chmod("", 0o770),
    "receipts-folder-writable-by-others": _chmod("receipts", 0o703),
    "key-owned-by-another-user": _owned_by_nobody,
}


@pytest.mark.parametrize("flaw", list(FLAWS))
def test_a_state_folder_or_key_not_this_users_alone_turns_receipts_off(
    hub_env, sigstore, tmp_path, private_state_home, monkeypatch, flaw: str
) -> None:
    repo_id, project = locked_and_downloaded(hub_env, sigstore, tmp_path, f"rcpt-flaw-{flaw}")
    forge_signer_record(project)
    attacker = forged_receipt(tmp_path, project, monkeypatch)
    ours = private_state_home / "kernel-deps"
    (forged,) = receipts_of(attacker.parent)
    shutil.copy(attacker / "receipt-key", ours / "receipt-key")  # the attacker's key and receipt, in our folder
    shutil.copy(forged, ours / "receipts" / forged.name)
    FLAWS[flaw](ours, attacker)
    signer_mismatch_refused(project, repo_id)
    before = sorted(p.name for p in receipts_of(private_state_home))
    forge_signer_record(project, WORKFLOW)  # the lock's true record again: verified in full, and passes
    assert verify_json(project)[0] == 0
    assert sorted(p.name for p in receipts_of(private_state_home)) == before  # nothing written there


def test_a_cached_bundle_or_metadata_changed_after_its_receipt_is_refused(
    hub_env, sigstore, tmp_path, private_state_home
) -> None:
    repo_id, project = locked_and_downloaded(hub_env, sigstore, tmp_path, "rcpt-cache")
    assert verify_json(project)[0] == 0 and receipts_of(private_state_home)
    lock = read_lock(project / "kernels.lock", purpose="use").lock
    folder = cache.variant_dir(cache.repo_dir(repo_id), lock.get(repo_id).sha, CPU_VARIANT)
    for name in ("metadata.json.sigstore", "metadata.json"):
        blob = (folder / name).resolve()
        kept = blob.read_bytes()
        blob.chmod(0o644)
        blob.write_bytes(kept.replace(b"{", b"{ ", 1))
        code, report = verify_json(project)
        assert code == 1
        assert (report["problems"][0]["kind"], report["problems"][0]["path"]) == ("modified", name)
        assert run_kernels("download", str(project), env=OFFLINE).returncode != 0
        blob.write_bytes(kept)
    assert verify_json(project)[0] == 0


def test_a_lock_pointing_a_kernel_at_another_kernels_verified_bytes_is_refused(
    hub_env, sigstore, tmp_path, private_state_home
) -> None:
    first, second = add_signed(hub_env, "rcpt-first", sigstore), add_signed(hub_env, "rcpt-second", sigstore)
    deps = "".join(f'"{r}" = {{ version = ">=1", identities = [{allowed(r)}] }}\n' for r in (first, second))
    project = make_project(tmp_path / "app", sigstore, deps)
    assert run_kernels("lock", str(project)).returncode == 0
    assert run_kernels("download", str(project)).returncode == 0
    assert len(receipts_of(private_state_home)) == 2
    # first's entry pins second's commit and bytes, its signer record names first's workflow,
    # and the cache holds second's build under first's name (as anyone who can write it can).
    lock_file = project / "kernels.lock"
    entries = {e["repo_id"]: e for e in json.loads(lock_file.read_text())}
    forged = dict(entries[second], repo_id=first)
    forged["signatures"] = {v: dict(s, identity=s["identity"].replace(second, first), repository=first)
                            for v, s in entries[second]["signatures"].items()}  # fmt: skip
    forged_text = json.dumps([forged, entries[second]], indent=2) + "\n"
    lock_file.write_text(forged_text)
    shutil.copytree(cache.repo_dir(second), cache.repo_dir(first), dirs_exist_ok=True, symlinks=True)
    code, report = verify_json(project)
    assert code == 1
    assert {(p["kind"], p["repo_id"]) for p in report["problems"]} == {("signature-invalid", first)}
    assert run_kernels("download", str(project), env=OFFLINE).returncode == 1


def test_a_changed_trusted_root_or_policy_verifies_in_full(hub_env, sigstore, tmp_path, private_state_home) -> None:
    repo_id, project = locked_and_downloaded(hub_env, sigstore, tmp_path, "rcpt-root")
    kept = receipts_of(private_state_home)
    # A wider policy still allowing the signer: the receipt does not apply; verified in full, and passes.
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    wider = f"identities = [{allowed(repo_id)}, {allowed(repo_id, '.github/workflows/nightly.yml')}]\n"
    pyproject.write_text(text.replace('trusted-root = "trusted_root.json"\n', f'trusted-root = "trusted_root.json"\n{wider}'))
    result, modules = imported_modules("verify", str(project), env_extra=OFFLINE)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert "sigstore.verify.verifier" in modules
    assert len(receipts_of(private_state_home)) == len(kept) + 1  # one for this policy, beside the other
    # A policy narrowed to another signer: the lock's record is refused, and so is the bundle, verified in full.
    narrow = f"identities = [{allowed(repo_id, '.github/workflows/nightly.yml')}]\n"
    pyproject.write_text(text.replace('trusted-root = "trusted_root.json"\n', f'trusted-root = "trusted_root.json"\n{narrow}'))
    code, report = verify_json(project)
    assert code == 1 and {p["kind"] for p in report["problems"]} == {"signer-not-allowed", "signature-invalid"}
    pyproject.write_text(text)

    # The same root written again, byte for byte: the receipt holds.
    sigstore.write_trusted_root(project / "trusted_root.json")
    result, modules = imported_modules("verify", str(project), env_extra=OFFLINE)
    assert result.returncode == 0 and not top_level(modules) & CRYPTO
    # Another Sigstore's root: the receipt does not apply, and the bundle does not verify under it.
    count = len(receipts_of(private_state_home))
    LocalSigstore("elsewhere").write_trusted_root(project / "trusted_root.json")
    code, report = verify_json(project)
    assert code == 1
    assert "a bundle that does not verify under the trusted root" in json.dumps(report["problems"])
    assert run_kernels("download", str(project), env=OFFLINE).returncode == 1
    assert len(receipts_of(private_state_home)) == count  # a refusal is never kept

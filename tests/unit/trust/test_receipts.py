"""Verification receipts kept in this user's state folder: one key however many processes
start at once, nothing kept (and no error) where the folder cannot be written, and a
receipt honoured only for exactly the inputs it was made for."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
import sys
from pathlib import Path

import pytest

from kernel_deps.trust import receipts
from kernel_deps.trust.signers import Identity, SignaturePolicy, VariantSigner
from tests.fixtures.unprivileged import where_modes_apply

ROOT = b'{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}'
REPO = "kernels-test/receipts"


def signer(metadata: bytes = b"{}") -> VariantSigner:
    return VariantSigner(issuer="https://token.actions.githubusercontent.com",
                         identity=f"https://github.com/{REPO}/.github/workflows/build.yml@refs/heads/main",
                         repository=REPO, workflow=".github/workflows/build.yml", ref="refs/heads/main",
                         metadata_sha256=hashlib.sha256(metadata).hexdigest())  # fmt: skip


def inputs(variant: str = "torch-cpu", *, policy: SignaturePolicy | None = None, root: bytes = ROOT,
           bundle: bytes = b"bundle") -> bytes:  # fmt: skip
    made = receipts.inputs_of(REPO, variant, b"{}", bundle, policy or SignaturePolicy(), root)
    assert made is not None  # sigstore is installed here, so its version is known
    return made


def test_a_receipt_is_honoured_for_exactly_its_inputs(private_state_home: Path) -> None:
    receipts.record(inputs(), signer())
    assert receipts.recall(inputs()) == signer()
    narrowed = SignaturePolicy(identities=[Identity(REPO, ".github/workflows/build.yml", "refs/heads/main")])
    for other in (inputs("torch-cuda"), inputs(root=ROOT + b" "), inputs(bundle=b"bundle2"), inputs(policy=narrowed),
                  inputs(policy=SignaturePolicy(kernel_identities={REPO: narrowed.identities}))):  # fmt: skip
        assert other != inputs() and receipts.recall(other) is None
    assert receipts.sigstore_version() in inputs().decode()


def test_many_processes_starting_at_once_agree_on_one_key(private_state_home: Path) -> None:
    script = ("import sys\nfrom kernel_deps.trust import receipts\nfrom kernel_deps.trust.signers import SignaturePolicy, "
              "VariantSigner\nimport json\n"
              "signer = VariantSigner.from_dict(json.loads(sys.argv[2]))\n"
              "receipts.record(receipts.inputs_of('kernels-test/receipts', sys.argv[1], b'{}', b'bundle', "
              "SignaturePolicy(), sys.argv[3].encode()), signer)\n")  # fmt: skip
    import json

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    started = [subprocess.Popen([sys.executable, "-c", script, f"v{i}", json.dumps(signer().to_dict()), ROOT.decode()],
                                env=env) for i in range(8)]  # fmt: skip
    assert [p.wait(timeout=120) for p in started] == [0] * 8
    folder = private_state_home / "kernel-deps"
    assert sorted(p.name for p in folder.iterdir()) == ["receipt-key", "receipts"]  # no temporary left
    assert all(receipts.recall(inputs(f"v{i}")) == signer() for i in range(8))  # every one made with the one key


def test_a_state_folder_that_cannot_be_written_keeps_nothing_and_says_nothing(
    private_state_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    private_state_home.chmod(0o500)
    try:
        where_modes_apply(lambda: receipts.record(inputs(), signer()))
        assert where_modes_apply(lambda: receipts.recall(inputs())) is None
    finally:
        private_state_home.chmod(0o700)
    assert list(private_state_home.iterdir()) == []
    assert capsys.readouterr() == ("", "")


def test_a_relative_xdg_state_home_is_ignored_for_the_home_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert receipts.state_folder() == tmp_path / ".local" / "state" / "kernel-deps"
    monkeypatch.setenv("XDG_STATE_HOME", "")
    receipts.record(inputs(), signer())
    assert receipts.recall(inputs()) == signer()
    assert (tmp_path / ".local" / "state" / "kernel-deps" / "receipt-key").stat().st_mode & 0o777 == 0o600


def test_a_key_of_the_wrong_size_or_a_receipt_that_is_not_one_is_no_receipt(private_state_home: Path) -> None:
    receipts.record(inputs(), signer())
    folder = private_state_home / "kernel-deps"
    (receipt,) = (folder / "receipts").iterdir()
    receipt.write_bytes(b"not json")
    assert receipts.recall(inputs()) is None
    receipts.record(inputs(), signer())  # made again over it
    assert receipts.recall(inputs()) == signer()
    key = folder / "receipt-key"
    key.write_bytes(key.read_bytes() + b"\n")
    assert receipts.recall(inputs()) is None
    receipts.record(inputs(), signer())  # a bad key is not replaced: receipts stay off
    assert receipts.recall(inputs()) is None


def test_receipts_not_honoured_for_ninety_days_are_removed_when_another_is_kept(
    private_state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = private_state_home / "kernel-deps" / "receipts"
    receipts.record(inputs("old"), signer())
    receipts.record(inputs("used"), signer())
    key = receipts._key(folder.parent, create=False)
    old, used = (folder / receipts._name(key, inputs(variant)) for variant in ("old", "used"))
    long_ago = time.time() - (receipts.UNUSED_DAYS + 1) * 86400
    # Planted beside them, as old: a link named as a receipt (to a file of the user's), a
    # folder named as one, and a file of another name. None of them is a receipt kernel-deps made.
    outside = tmp_path / "precious"
    outside.write_bytes(b"keep")
    link = folder / ("a" * 64)
    link.symlink_to(outside)
    (folder / ("b" * 64)).mkdir()
    (folder / "notes.txt").write_bytes(b"")
    for path in (old, used, folder / ("b" * 64), folder / "notes.txt"):
        os.utime(path, (long_ago, long_ago))
    os.utime(link, (long_ago, long_ago), follow_symlinks=False)

    assert receipts.recall(inputs("used")) == signer()  # honoured: marked used now
    assert used.stat().st_mtime > time.time() - 60
    monkeypatch.setattr(receipts, "_looked_through", False)  # as in a process that has kept none yet
    receipts.record(inputs("new"), signer())  # keeping another removes what was not honoured
    os.utime(used, (long_ago, long_ago))
    receipts.record(inputs("newer"), signer())  # once per process: the folder is not looked through again
    assert used.exists()

    assert not old.exists() and receipts.recall(inputs("old")) is None
    assert receipts.recall(inputs("used")) == signer() and receipts.recall(inputs("new")) == signer()
    assert link.is_symlink() and outside.read_bytes() == b"keep"
    assert (folder / ("b" * 64)).is_dir() and (folder / "notes.txt").exists()


def test_a_receipt_honoured_again_within_a_day_is_not_written_to(private_state_home: Path) -> None:
    receipts.record(inputs(), signer())
    (receipt,) = (private_state_home / "kernel-deps" / "receipts").iterdir()
    an_hour_ago = time.time() - 3600
    os.utime(receipt, (an_hour_ago, an_hour_ago))
    assert receipts.recall(inputs()) == signer()
    assert receipt.stat().st_mtime == an_hour_ago  # a warm command reads; it marks a receipt at most once a day

"""One ``kernels`` command beside the Hugging Face ``kernels`` library.

The real kernels 0.16 and 0.17.2 releases are installed beside kernel-deps (on
``PYTHONPATH``, from ``.venv/compat/``) and the real ``kernels`` / ``kernel-deps``
scripts of this checkout run as subprocesses.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fixtures.peers import FULL_VERSIONS, UNDER_TEST, env_with_peer, peer_path
from tests.fixtures.processes import SCRIPTS
PEER_VERSIONS = ["0.16", "0.17"]


def run(script: str, *args: str, peer: str | None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / script), *args], capture_output=True, text=True, env=env_with_peer(peer, **env), timeout=120
    )


@pytest.mark.parametrize("peer", PEER_VERSIONS)
def test_a_subcommand_kernel_deps_lacks_reaches_the_hugging_face_cli(peer: str) -> None:
    # `check` moved out of kernels: its own message and its own exit code 1 (ours would be 2).
    moved = run("kernels", "check", peer=peer)
    assert moved.returncode == 1
    assert moved.stderr.strip() == "`kernels check` has moved to `kernel-builder check-abi`"
    # Arguments reach it untouched, and its argparse answers.
    helped = run("kernels", "verify-signature", "--help", peer=peer)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: kernel verify-signature") and "--filter-unsigned" in helped.stdout
    refused = run("kernels", "verify-signature", "--no-such-option", peer=peer)
    assert refused.returncode == 2 and "kernel verify-signature: error:" in refused.stderr


def test_kernels_info_reaches_the_hugging_face_cli() -> None:
    result = run("kernels", "info", "--help", peer="0.17")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: kernel info") and "--revision" in result.stdout
    missing = run("kernels", "info", peer="0.17")
    assert missing.returncode == 2 and "the following arguments are required: kernel" in missing.stderr


@pytest.mark.parametrize("peer", PEER_VERSIONS)
def test_kernel_deps_commands_stay_ours_beside_it(peer: str) -> None:
    result = run("kernels", "lock", "--help", peer=peer)
    assert result.returncode == 0 and "--upgrade-package" in result.stdout


@pytest.mark.parametrize("peer", PEER_VERSIONS)
def test_kernel_deps_never_hands_a_subcommand_over(peer: str) -> None:
    result = run("kernel-deps", "check", peer=peer)
    assert result.returncode == 2 and "No such command 'check'" in result.stderr
    assert "kernel-builder" not in result.stdout + result.stderr
    assert run("kernel-deps", "--version", peer=peer).stdout == "kernel-deps 0.1.0\n"


def test_without_the_hugging_face_library_says_what_to_install() -> None:
    result = run("kernels", "info", "kernels-community/activation", peer=None)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: 'kernels info' is not a kernel-deps command") and "pip install kernels" in line
    assert "not installed (pip install kernels)" in " ".join(run("kernels", "--help", peer=None).stdout.split())
    assert run("kernels", "--version", peer=None).stdout.splitlines() == [
        "kernel-deps 0.1.0",
        "Hugging Face kernels: not installed (pip install kernels for its subcommands)",
    ]


@pytest.mark.parametrize("peer", PEER_VERSIONS)
def test_help_and_version_show_both(peer: str) -> None:
    helped = run("kernels", "--help", peer=peer)
    assert helped.returncode == 0
    ours, _, theirs = helped.stdout.partition(f"Commands of Hugging Face kernels {FULL_VERSIONS[peer]} (run by it):")
    assert "lock " in ours and "verify " in ours
    listed = [line.split()[0] for line in theirs.strip().splitlines()]
    assert "check" in listed and "verify-signature" in listed and "benchmark" in listed
    assert "lock" not in listed and "download" not in listed  # kernel-deps runs those
    assert ("info" in listed) == (peer == "0.17")
    version = run("kernels", "--version", peer=peer).stdout.splitlines()
    assert version[0] == "kernel-deps 0.1.0"
    assert version[1].startswith(f"Hugging Face kernels {FULL_VERSIONS[peer]} (") and "runs check, " in version[1]


def test_help_beside_it_imports_none_of_it() -> None:
    env = env_with_peer("0.17", PYTHONPROFILEIMPORTTIME="1")
    result = subprocess.run([str(SCRIPTS / "kernels"), "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0 and "Hugging Face kernels 0.17.2" in result.stdout
    modules = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "kernel_deps" in modules and not modules & {"kernels", "huggingface_hub", "torch"}


def test_a_hugging_face_install_that_cannot_start_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    # kernels 0.17.2 installed without what its CLI imports at start (pip install --no-deps):
    # kernel-deps itself depends on sigstore, so the missing module is one that fails to import.
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "sigstore.py").write_text("raise ModuleNotFoundError(\"No module named 'sigstore'\", name='sigstore')\n")
    env = {**env_with_peer(None), "PYTHONPATH": f"{peer_path('0.17')}:{broken}:{UNDER_TEST}"}
    result = subprocess.run([str(SCRIPTS / "kernels"), "info", "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "'kernels info' is not a kernel-deps command" in result.stderr
    assert "Hugging Face kernels 0.17.2 command (kernels.cli:main" in result.stderr
    assert "pip install --force-reinstall kernels==0.17.2" in result.stderr

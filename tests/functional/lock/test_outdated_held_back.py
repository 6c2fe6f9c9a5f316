"""``kernels outdated`` judges an upgrade as ``kernels lock`` would: a newer release that the
project's signature policy refuses is shown held back, with why, never as the upgrade.

The kernels are real repos on the local Hub whose builds carry kernel-builder's digest and,
for the allowed releases, a Sigstore bundle from the tests' own Sigstore
(tests/fixtures/sigstore_ca.py); upstream pushes a newer release after the lock was made.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.builder import CPU_VARIANT, CUDA_VARIANT, KernelRepo, Release, commit_release, update_major_branches
from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.schemas import validated
from tests.fixtures.sigstore_ca import Identity, LocalSigstore

ORG = "kernels-test"
VARIANTS = (CPU_VARIANT, CUDA_VARIANT)
WORKFLOW = ".github/workflows/build.yml"


@pytest.fixture(scope="module")
def sigstore() -> LocalSigstore:
    return LocalSigstore("outdated")


def release(version: str, sigstore: LocalSigstore, identity: Identity | None) -> Release:
    """A release with kernel-builder's digest, signed as ``identity`` (None: unsigned)."""
    sign = None if identity is None else (lambda data, variant: sigstore.sign(data, identity))
    return Release(version, variants=VARIANTS, digest="sha256", sign=sign)


def project_for(folder: Path, sigstore: LocalSigstore, repo_id: str, *, targets: bool) -> Path:
    folder.mkdir(parents=True)
    root = sigstore.write_trusted_root(folder / "trusted_root.json")
    allowed = f'{{ repository = "{repo_id}", workflow = "{WORKFLOW}", ref = "refs/heads/main" }}'
    extra = f'[tool.kernels]\ntargets = ["{CPU_VARIANT}"]\n\n' if targets else ""
    extra += (f'[tool.kernels.trust]\npublishers = ["{ORG}"]\ntrusted-root = "{root.name}"\n'
              f"require-signatures = true\nidentities = [{allowed}]\n\n")  # fmt: skip
    return write_project(folder, f'"{repo_id}" = ">=1,<2"\n', extra=extra, trusted=())


@pytest.mark.parametrize("targets", [True, False], ids=["with-targets", "without-targets"])
@pytest.mark.parametrize("newer", ["unsigned", "other-signer"])
def test_a_newer_release_the_policy_refuses_is_held_back_with_why_not_an_upgrade(
    hub_env, sigstore, tmp_path, targets, newer
) -> None:
    repo_id = f"{ORG}/outdated-{newer}-{'targets' if targets else 'plain'}"
    good = Identity(repo_id)
    built = hub_env.add_repo(KernelRepo(repo_id, (release("1.0.0", sigstore, good),)))
    project = project_for(tmp_path / "app", sigstore, repo_id, targets=targets)
    assert run_kernels("lock", str(project)).returncode == 0
    lock_before = (project / "kernels.lock").read_bytes()
    current = validated(run_kernels("outdated", "--json", str(project)), "outdated")
    assert current["ok"] is True and current["kernels"][0]["held_back"] == []

    # Upstream pushes v1.1.0, in range, that the policy refuses: unsigned, or signed by a workflow not allowed.
    other = None if newer == "unsigned" else Identity(repo_id, workflow=".github/workflows/nightly.yml")
    commit_release(built, release("1.1.0", sigstore, other), 1)
    update_major_branches(built)
    refused = built.commits["1.1.0"]

    result = run_kernels("outdated", "--json", str(project))
    assert result.returncode == 0, result.stderr
    payload = validated(result, "outdated")
    (kernel,) = payload["kernels"]
    assert kernel["upgradable"] is False and kernel["upgrade_commit"] != refused
    (held,) = kernel["held_back"]
    assert (held["version"], held["commit"]) == ("v1.1.0", refused)
    why = "found no metadata.json.sigstore" if newer == "unsigned" else ".github/workflows/nightly.yml"
    assert held["reason"].startswith(f"{repo_id} build ") and why in held["reason"], held["reason"]
    assert payload["ok"] is False and kernel["drifted"] is True  # upstream moved on: said, with why
    text = run_kernels("outdated", str(project))
    assert text.returncode == 0, text.stderr
    (row,) = [line for line in text.stdout.splitlines() if line.startswith(repo_id)]
    assert "v1.1.0" not in row  # not offered as the upgrade
    assert f"note: {repo_id} v1.1.0 ({refused[:12]}) is held back, kernels lock --upgrade would not take it: " \
           f"{held['reason']}" in text.stdout  # fmt: skip
    assert (project / "kernels.lock").read_bytes() == lock_before  # reading only

    # What it says is what lock does: with targets it keeps v1.0.0 with a note; without, it refuses v1.1.0.
    upgraded = run_kernels("lock", "--upgrade", "--dry-run", str(project))
    if targets:
        assert upgraded.returncode == 0 and "note:" in upgraded.stdout and "v1.1.0" in upgraded.stdout
    else:
        assert upgraded.returncode == 1 and repo_id in upgraded.stderr


def test_a_newer_release_signed_as_required_is_the_upgrade(hub_env, sigstore, tmp_path) -> None:
    repo_id = f"{ORG}/outdated-signed"
    built = hub_env.add_repo(KernelRepo(repo_id, (release("1.0.0", sigstore, Identity(repo_id)),)))
    project = project_for(tmp_path / "app", sigstore, repo_id, targets=True)
    assert run_kernels("lock", str(project)).returncode == 0
    commit_release(built, release("1.1.0", sigstore, Identity(repo_id)), 1)
    update_major_branches(built)
    (kernel,) = validated(run_kernels("outdated", "--json", str(project)), "outdated")["kernels"]
    assert (kernel["upgrade_version"], kernel["upgrade_commit"]) == ("v1.1.0", built.commits["1.1.0"])
    assert kernel["upgradable"] is True and kernel["held_back"] == []

"""A lock the real Hugging Face ``kernels`` 0.17.2 wrote, used as it is by the loader, and its
publishers judged as ``kernels lock`` judges them by ``download``, ``verify`` and the loader.

kernels 0.17.2's own ``kernels lock`` writes the project's ``kernels.lock`` (commits, no
variant hashes) against the local Hub behind the fault proxy, which answers the
organizations' overview as the Hub does. ``get_locked_kernel`` then builds what the pins
stand for from the Hub's listing at each commit, with download's checks; ``load_kernel``,
which never uses the network, cannot check a cached file against commits alone and says
how to convert the lock. Each kernel here is its own repo: a module stays loaded per process.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from tests.fixtures.builder import CPU_VARIANT, UNIVERSAL_VARIANT
from tests.fixtures.cli import run_kernels
from tests.fixtures.hf_beside import hf_repo, run_hf, trusting
from tests.fixtures.projects import write_project

ORG = "kernels-test"


def _serve(hub_env, proxy, monkeypatch, repo_id: str, variants=(UNIVERSAL_VARIANT,), **kwargs) -> None:
    if repo_id not in hub_env.repos:
        spec = hf_repo(repo_id, variants, digest=kwargs.pop("digest", None))
        tamper = kwargs.pop("tamper", None)
        if tamper is not None:
            spec = dataclasses.replace(spec, releases=tuple(dataclasses.replace(r, tamper=tamper) for r in spec.releases))
        hub_env.add_repo(spec)
    trusting(proxy, ORG)
    monkeypatch.setenv("HF_ENDPOINT", proxy.url)


def _locked_by_hf(proxy, project: Path) -> bytes:
    theirs = run_hf(proxy, "lock", str(project))
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    written = (project / "kernels.lock").read_bytes()
    assert "dependency" in json.loads(written)[0]  # kernels 0.17's layout: commits, no variant hashes
    return written


def _snapshot_files(repo_id: str, commit: str, variant: str) -> list[str]:
    folder = Path(os.environ["HF_HUB_CACHE"]) / f"kernels--{repo_id.replace('/', '--')}" / "snapshots" / commit
    folder = folder / "build" / variant
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if not p.is_dir())


def test_get_locked_kernel_loads_from_a_kernels_017_lock_and_load_kernel_says_how_to_convert_it(
    hub_env, proxy, tmp_path, monkeypatch
) -> None:
    from kernel_deps import get_locked_kernel, load_kernel
    from kernel_deps.core.errors import LockfileError

    repo_id = f"{ORG}/hf-lock-loaded"
    _serve(hub_env, proxy, monkeypatch, repo_id)
    project = write_project(tmp_path / "app", f'"{repo_id}" = 1\n')
    written = _locked_by_hf(proxy, project)
    lock = project / "kernels.lock"
    commit = hub_env.repos[repo_id].branches["v1"]
    # HF's lock cached the metadata.json alone; load_kernel, which never uses the network, cannot check it.
    with pytest.raises(LockfileError) as refused:
        load_kernel(repo_id, lockfile=lock)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{lock}: written by Hugging Face kernels 0.17"), line
    assert "load_kernel never uses the network" in line and "run 'kernels lock' to convert it" in line, line
    assert "get_locked_kernel" in line, line
    # Offline, get_locked_kernel cannot either, and says so.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(LockfileError, match="only with the Hub's listings, and HF_HUB_OFFLINE is set"):
        get_locked_kernel(repo_id, lockfile=lock)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    module = get_locked_kernel(repo_id, lockfile=lock)
    origin = module.__kernel_origin__
    assert (origin.commit, origin.variant) == (commit, UNIVERSAL_VARIANT)
    assert module.VARIANT == UNIVERSAL_VARIANT and len(_snapshot_files(repo_id, commit, UNIVERSAL_VARIANT)) > 1
    assert lock.read_bytes() == written  # used as it is, never converted
    # What it fetched is verified by kernel-deps' own verify of the same lock.
    verified = run_kernels("verify", "--require-cached", str(project))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_get_locked_kernel_refuses_a_build_of_a_kernels_017_lock_that_misses_its_digest(
    hub_env, proxy, tmp_path, monkeypatch
) -> None:
    from kernel_deps import get_locked_kernel
    from kernel_deps.core.errors import DigestMismatchError

    def tamper(variant, files):
        return {**files, "__init__.py": dataclasses.replace(files["__init__.py"], data=b"print('planted')\n")}

    repo_id = f"{ORG}/hf-lock-tampered"
    _serve(hub_env, proxy, monkeypatch, repo_id, (CPU_VARIANT,), digest="sha256", tamper=tamper)
    project = write_project(tmp_path / "app", f'"{repo_id}" = 1\n')
    _locked_by_hf(proxy, project)
    with pytest.raises(DigestMismatchError) as refused:
        get_locked_kernel(repo_id, lockfile=project / "kernels.lock", backend="cpu")
    assert "does not match its digest" in str(refused.value) and "__init__.py" in str(refused.value)
    commit = hub_env.repos[repo_id].branches["v1"]
    assert _snapshot_files(repo_id, commit, CPU_VARIANT) == ["metadata.json"]  # only kernels 0.17's


def test_a_kernels_017_lock_is_refused_by_the_loader_where_the_project_requires_signatures(
    hub_env, proxy, tmp_path, monkeypatch
) -> None:
    from kernel_deps import get_locked_kernel
    from kernel_deps.core.errors import LockPolicyError

    repo_id = f"{ORG}/hf-lock-unsigned"
    _serve(hub_env, proxy, monkeypatch, repo_id)
    project = write_project(tmp_path / "app", f'"{repo_id}" = 1\n')
    _locked_by_hf(proxy, project)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("[tool.kernels.trust]\n", "[tool.kernels.trust]\nrequire-signatures = true\n"))
    with pytest.raises(LockPolicyError) as refused:
        get_locked_kernel(repo_id, lockfile=project / "kernels.lock")
    assert "refusing to load from it" in str(refused.value) and repo_id in str(refused.value)
    # verify says what it did: the policy's findings, and no build checked against the Hub.
    verified = run_kernels("verify", str(project))
    assert verified.returncode == 1
    assert "each build was checked against the Hub's listing" not in verified.stdout + verified.stderr
    assert "no build was checked against the Hub" in verified.stdout + verified.stderr, verified.stdout
    notices = json.loads(run_kernels("verify", "--json", str(project)).stdout)["notices"]
    (notice,) = [n for n in notices if n["kind"] == "foreign-lock"]
    assert "the project's policy refuses it as it is and no build was checked" in notice["message"]


def test_a_kernels_017_lock_is_held_to_publisher_trust_as_kernels_lock_holds_it(
    hub_env, proxy, tmp_path, monkeypatch
) -> None:
    """kernels 0.17 locked a kernel whose publisher the Hub trusted then; the Hub no longer
    does, and the project does not allow it: download, verify and the loader refuse the lock,
    naming the kernel, what the Hub said and the line to add, as ``kernels lock`` would; with
    the publisher allowed in ``[tool.kernels.trust] publishers`` each uses it."""
    from kernel_deps import get_locked_kernel
    from kernel_deps.core.errors import UntrustedPublisherError

    repo_id = f"{ORG}/hf-lock-distrusted"
    _serve(hub_env, proxy, monkeypatch, repo_id)
    project = write_project(tmp_path / "app", f'"{repo_id}" = 1\n', trusted=())
    written = _locked_by_hf(proxy, project)
    trusting(proxy, untrusted=[ORG])
    commit = hub_env.repos[repo_id].branches["v1"]
    for command, doing in ((("download",), "refusing to download"), (("sync", "--frozen"), "refusing to download"),
                           (("verify",), "refusing to verify")):  # fmt: skip
        refused = run_kernels(*command, str(project))
        assert refused.returncode == 1, (command, refused.stdout, refused.stderr)
        (line,) = [x for x in refused.stderr.splitlines() if x.startswith("error:")]
        assert line.startswith(f"error: {doing} from {project / 'kernels.lock'} (a kernels 0.17 lock): {repo_id}"), line
        assert f"does not trust {ORG} as a kernel publisher" in line, line
        assert f'[tool.kernels.trust] publishers = ["{ORG}"]' in line and "kernels.lock not written" not in line, line
    with pytest.raises(UntrustedPublisherError) as not_loaded:
        get_locked_kernel(repo_id, lockfile=project / "kernels.lock")
    assert str(not_loaded.value).startswith(f"refusing to load from {project / 'kernels.lock'} (a kernels 0.17")
    assert isinstance(not_loaded.value, ValueError)  # what the Hugging Face library raises for an untrusted publisher
    assert _snapshot_files(repo_id, commit, UNIVERSAL_VARIANT) == ["metadata.json"]  # nothing fetched
    # Allowed by the project, as kernels lock would take it.
    allowed = write_project(tmp_path / "allowed", f'"{repo_id}" = 1\n', trusted=(ORG,))
    (allowed / "kernels.lock").write_bytes(written)
    for command in (("download",), ("verify", "--require-cached")):
        result = run_kernels(*command, str(allowed))
        assert result.returncode == 0, (command, result.stdout, result.stderr)
    assert get_locked_kernel(repo_id, lockfile=allowed / "kernels.lock").VARIANT == UNIVERSAL_VARIANT

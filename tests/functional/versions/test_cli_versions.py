"""`kernels versions` as a user runs it: a real process against the local Hub."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.localhub import free_port
from tests.fixtures.processes import KERNEL_DEPS, KERNELS


def run(*args: str, endpoint: str, **env: str) -> CliResult:
    return run_kernels(*args, env={"HF_HUB_OFFLINE": None, "HF_ENDPOINT": endpoint, "HF_HUB_DISABLE_TELEMETRY": "1", **env})


def run_installed(exe: str, *args: str, endpoint: str) -> subprocess.CompletedProcess:
    """The installed console script, in a process of its own."""
    base = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    full_env = {**base, "HF_ENDPOINT": endpoint, "HF_HUB_DISABLE_TELEMETRY": "1"}
    return subprocess.run([exe, *args], capture_output=True, text=True, env=full_env, timeout=120)


def test_versions_newest_first(hub_env) -> None:
    built = hub_env.repos["kernels-test/activation"]
    result = run("versions", "kernels-test/activation", endpoint=hub_env.url)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "kernels-test/activation"
    names = [line.split()[0] for line in lines[2:]]
    assert names == ["v2", "v2.0.0", "v1", "v1.3.0rc1", "v1.2.0", "v1.1.0", "v1.0.0"]
    row = next(line.split() for line in lines if line.startswith("v1.2.0 "))
    assert row == ["v1.2.0", "tag", built.commits["1.2.0"][:12], "4"]


def test_versions_json_and_both_command_names(hub_env) -> None:
    built = hub_env.repos["kernels-test/flash"]
    for exe in (KERNELS, KERNEL_DEPS):
        result = run_installed(exe, "versions", "kernels-test/flash", "--json", endpoint=hub_env.url)
        assert result.returncode == 0, result.stderr
        payload = json.loads(result.stdout)
        assert payload["repo_type"] == "kernel"
        assert [(v["name"], v["kind"], v["commit"], v["variants"]) for v in payload["versions"]] == [
            ("v2", "branch", built.commits["2.0.0"], 3),
            ("v1", "branch", built.commits["1.1.0"], 3),
        ]


def test_versions_of_legacy_model_repo(hub_env) -> None:
    result = run("versions", "kernels-test/legacy-gelu", endpoint=hub_env.url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "kernels-test/legacy-gelu (legacy model repo)"


@pytest.mark.parametrize(
    ("repo", "endpoint_kind", "code", "message"),
    [
        ("kernels-test/no-such-kernel", "hub", 1, "kernels-test/no-such-kernel: kernel repo not found on http://127.0.0.1:"),
        ("kernels-test/activation", "down", 1, "cannot reach the Hub at http://127.0.0.1:"),
        ("not-a-repo-id", "hub", 2, "invalid kernel repo id 'not-a-repo-id'"),
        ("org/na me", "hub", 2, "invalid kernel repo id 'org/na me'"),
    ],
)
def test_versions_errors_are_one_clear_line(hub_env, repo, endpoint_kind, code, message) -> None:
    endpoint = hub_env.url if endpoint_kind == "hub" else f"http://127.0.0.1:{free_port()}"
    result = run("versions", repo, endpoint=endpoint)
    assert result.returncode == code
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ") and message in result.stderr


def test_versions_offline_is_refused_clearly(hub_env) -> None:
    result = run("versions", "kernels-test/activation", endpoint=hub_env.url, HF_HUB_OFFLINE="1")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: kernels-test/activation: HF_HUB_OFFLINE is set, but this needs the Hub; unset it to go online"
    )


def test_a_branch_named_v_and_non_ascii_digits_is_not_a_version_and_no_traceback(hub_env, tmp_path) -> None:
    # A hostile or careless repo: a branch "v١" (ARABIC-INDIC DIGIT ONE) is `v` and a digit to
    # a pattern's \d, but names no version packaging can parse.
    from tests.fixtures.builder import KernelRepo, Release
    from tests.fixtures.projects import write_project

    repo_id = "kernels-test/unicode-branch"
    built = hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0"), Release("1.1.0"))))
    built.git("branch", "v\u0661", built.commits["1.0.0"])
    listed = run("versions", repo_id, endpoint=hub_env.url)
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()[2:]] == ["v1", "v1.1.0", "v1.0.0"]
    project = write_project(tmp_path / "app", f'"{repo_id}" = 1')
    locked = run("lock", str(project), endpoint=hub_env.url)
    assert locked.returncode == 0, locked.stderr
    assert built.commits["1.1.0"] in (project / "kernels.lock").read_text()


def test_refs_with_numbers_too_long_to_convert_are_not_versions_and_no_traceback(hub_env, proxy, tmp_path) -> None:
    # A Hub answer no git server would give: a branch and a tag whose numbers have thousands
    # of digits, more than Python converts to an int.
    from tests.fixtures.projects import write_project

    repo_id = "kernels-test/activation"
    built = hub_env.repos[repo_id]
    real = {"branches": [{"name": "v1", "targetCommit": built.commits["1.2.0"]}], "tags": []}
    huge = "9" * 5000
    real["branches"].append({"name": f"v{huge}", "targetCommit": built.commits["1.0.0"]})
    real["tags"].append({"name": f"v1.{huge}", "targetCommit": built.commits["1.1.0"]})
    proxy.answer_json = lambda path: (200, real) if path == f"/api/kernels/{repo_id}/refs" else None
    listed = run("versions", repo_id, endpoint=proxy.url)
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()[2:]] == ["v1"]
    project = write_project(tmp_path / "app", f'"{repo_id}" = 1')
    locked = run("lock", str(project), endpoint=proxy.url)
    assert locked.returncode == 0, locked.stderr
    assert built.commits["1.2.0"] in (project / "kernels.lock").read_text()

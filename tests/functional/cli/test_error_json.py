"""A --json command stopped by an error prints its kind and fields (docs/schemas/error.schema.json),
and stderr shows the same line rendered from them: real failures against the local Hub."""

from __future__ import annotations

import pytest

from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.projects import write_project
from tests.fixtures.schemas import validated


def kernels(*args: str) -> CliResult:
    return run_kernels(*args, env={"NO_COLOR": None, "HF_HUB_OFFLINE": None})


def error_of(result: CliResult, code: int) -> dict:
    """The error document, checked against its schema and against the stderr line."""
    assert result.returncode == code, (result.stdout, result.stderr)
    payload = validated(result, "error")
    line = payload["subject"] + ": " + payload["reason"] if payload["subject"] else payload["reason"]
    if payload["hint"]:
        line += f"; {payload['hint']}"
    assert payload["error"] == line and result.stderr == f"error: {line}\n"
    return payload


def test_a_bad_pyproject_key_names_the_file_line_and_what_to_write(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/activation" = { version = 1, branch = "main" }')
    text = (project / "pyproject.toml").read_text()
    line = text.splitlines().index('"kernels-test/activation" = { version = 1, branch = "main" }') + 1

    payload = error_of(kernels("lock", "--json", str(project)), 2)

    assert payload["kind"] == "pyproject-invalid"
    assert payload["subject"] == f"{project / 'pyproject.toml'}:{line}"
    assert payload["reason"].endswith('unknown key "branch"')
    assert payload["hint"].startswith("expected a PEP 440 range")
    assert not (project / "kernels.lock").exists()


@pytest.mark.parametrize(
    ("text", "reason"),
    [("{not json", "not valid JSON (line 1 column 2"), ('{"kernels": []}', "invalid top level {'kernels': []}")],
    ids=["not-json", "not-a-list"],
)
def test_a_malformed_lock_names_the_file_and_how_to_repair_it(hub_env, tmp_path, text, reason) -> None:
    project = write_project(tmp_path / "app", '"kernels-test/activation" = 1')
    (project / "kernels.lock").write_text(text)

    payload = error_of(kernels("verify", "--json", str(project)), 2)

    assert payload["kind"] == "lockfile-invalid"
    assert payload["subject"] == str(project / "kernels.lock")
    assert payload["reason"].startswith(reason)
    assert "kernels lock" in payload["hint"]
    assert (project / "kernels.lock").read_text() == text  # nothing written


def test_a_repo_missing_on_the_hub_is_its_subject(hub_env) -> None:
    payload = error_of(kernels("versions", "kernels-test/no-such-kernel", "--json"), 1)

    assert payload["kind"] == "repo-not-found"
    assert payload["subject"] == "kernels-test/no-such-kernel"
    assert payload["reason"] == f"kernel repo not found on {hub_env.url}"
    assert payload["hint"] == "check the name, or set HF_TOKEN if the repo is private"

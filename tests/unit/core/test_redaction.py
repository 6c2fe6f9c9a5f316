"""No output names a credential: with ``HF_ENDPOINT=http://user:s3cret@host`` and
``HF_TOKEN`` set, every error that names the Hub, from every command that talks to it, with
and without ``--json``, shows the host and hides the password, the Basic authentication
it becomes and the token; so do the errors of the library API. The credentials still
reach the Hub. Against the local Hub, a closed port, a Hub that hangs and one that echoes
what it was sent."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernel_deps.core.errors import KernelDepsError, UsageError
from tests.fixtures.cached_project import write_cached_project
from tests.fixtures.cli import CliResult, run_kernels
from tests.fixtures.localhub import free_port
from tests.fixtures.processes import KERNELS
from tests.fixtures.projects import write_project
from tests.fixtures.servers import EchoHub, SilentServer

PASSWORD = "s3cret"
TOKEN = "hf_redactionTestToken0123456789"
BASIC = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
# What must never show, in the spellings a client or a Hub may use.
SECRETS = (PASSWORD, TOKEN, BASIC.rstrip("="))
MISSING = "kernels-test/nope"


def with_credentials(url: str, password: str = PASSWORD) -> str:
    return url.replace("http://", f"http://user:{password}@", 1)


@dataclass
class Hub:
    """Where a case points HF_ENDPOINT, what the error must say, and the server, if any."""

    endpoint: str
    code: int
    says: str
    echo: EchoHub | None = None


@contextmanager
def local_hub_missing_repo(hub_env) -> Iterator[Hub]:
    yield Hub(with_credentials(hub_env.url), 1, "not found on http://***@127.0.0.1:")


@contextmanager
def closed_port(hub_env) -> Iterator[Hub]:
    yield Hub(with_credentials(f"http://127.0.0.1:{free_port()}"), 1, "cannot reach the Hub at http://***@127.0.0.1:")


@contextmanager
def silent(hub_env) -> Iterator[Hub]:
    with SilentServer() as server:
        yield Hub(with_credentials(server.url), 1, "the 1 s budget is spent")


def echoing(status: int, says: str, credentials: bool = True) -> Callable:
    @contextmanager
    def case(hub_env) -> Iterator[Hub]:
        with EchoHub(status) as hub:
            yield Hub(with_credentials(hub.url) if credentials else hub.url, 1, says, hub)

    return case


def invalid(endpoint: str, says: str) -> Callable:
    @contextmanager
    def case(hub_env) -> Iterator[Hub]:
        yield Hub(endpoint, 2, says)

    return case


HUBS = {
    "local-hub-missing-repo": local_hub_missing_repo,
    "closed-port": closed_port,
    "silent-past-the-budget": silent,
    "refuses-401": echoing(401, "the Hub at http://***@127.0.0.1:"),
    "refuses-403": echoing(403, "refused access (HTTP 403)"),
    "fails-500": echoing(500, "kept failing (HTTP 500"),
    # an answer no rule maps: the HTTP client's own text, which quotes the URL, is shown
    "teapot-418-quoting-the-url": echoing(418, "answered an error: Client error '418"),
    "teapot-418-echoing-the-token": echoing(418, "answered an error: Client error '418", credentials=False),
    "invalid-port": invalid(f"http://user:{PASSWORD}@127.0.0.1:99999", "HF_ENDPOINT='http://***@127.0.0.1:99999'"),
    "control-character": invalid(f"http://user:{PASSWORD}@127.0.0.1:1/\x01", "HF_ENDPOINT='http://***@127.0.0.1:1/"),
}


@pytest.fixture
def projects(tmp_path, monkeypatch) -> dict[str, tuple[str, ...]]:
    """Each command that asks the Hub, about a kernel the Hub does not have."""
    monkeypatch.setenv("KERNELS_CACHE", str(tmp_path / "empty-cache"))  # download must fetch
    unlocked = write_project(tmp_path / "unlocked", {MISSING: ">=1"})
    empty = write_project(tmp_path / "empty")
    locked = write_cached_project(tmp_path / "locked", tmp_path / "another-cache")  # pins a repo the Hub lacks
    return {
        "lock": ("lock", str(unlocked)),
        "add": ("add", MISSING, str(empty)),
        "versions": ("versions", MISSING),
        "verify-online": ("verify", "--online", str(locked)),
        "download": ("download", str(locked)),
        "outdated": ("outdated", str(locked)),
    }


def assert_hidden(result: CliResult, says: str) -> None:
    shown = result.stdout + result.stderr
    for secret in SECRETS:
        assert secret not in shown, shown
    assert "Traceback" not in result.stderr, result.stderr
    assert says in shown and "127.0.0.1" in shown, shown


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("command", ["lock", "add", "versions", "verify-online", "download", "outdated"])
@pytest.mark.parametrize("case", sorted(HUBS))
def test_no_command_shows_the_endpoint_credentials_or_the_token(hub_env, projects, case, command, as_json) -> None:
    with HUBS[case](hub_env) as hub:
        args = projects[command] + (("--json",) if as_json else ())
        result = run_kernels(*args, env={"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": TOKEN, "KERNELS_HUB_BUDGET": "1"})
    assert result.returncode == hub.code, result.stderr
    assert_hidden(result, hub.says)
    if as_json:
        json.loads(result.stdout)  # still one JSON document
    if hub.echo is not None:  # the credentials still went with the request, as before
        sent = f"Basic {BASIC}" if "@" in hub.endpoint else f"Bearer {TOKEN}"
        assert hub.echo.authorizations[0] == sent


def test_a_password_with_an_unescaped_slash_is_not_quoted_as_a_port(hub_env) -> None:
    result = run_kernels("versions", MISSING, env={"HF_ENDPOINT": "http://user:s3/cr3t@127.0.0.1:1"})
    assert result.returncode == 2
    assert result.stderr.startswith("error: HF_ENDPOINT='http://***@127.0.0.1:1': not a valid URL (the port")
    assert "s3" not in result.stderr and "cr3t" not in result.stderr, result.stderr
    assert "must be percent-encoded" in result.stderr


@pytest.mark.parametrize("command", ["lock", "download"])
def test_huggingface_hub_debug_logs_hide_the_credentials(hub_env, tmp_path, monkeypatch, command) -> None:
    """``HF_DEBUG=1`` makes huggingface_hub log each request's URL and a curl command for it:
    those lines still show, with the endpoint's user-info and the token hidden."""
    monkeypatch.setenv("KERNELS_CACHE", str(tmp_path / "cache"))
    project = write_project(tmp_path / "app", {"kernels-test/activation": ">=1"})
    env = {"HF_ENDPOINT": with_credentials(hub_env.url), "HF_TOKEN": TOKEN, "HF_DEBUG": "1"}
    if command == "download":
        assert run_kernels("lock", str(project), env={"HF_ENDPOINT": hub_env.url}).returncode == 0
    # A real process: huggingface_hub reads HF_DEBUG when it is imported.
    result = subprocess.run([KERNELS, command, str(project)], capture_output=True, text=True,
                            env={**os.environ, **env}, timeout=120)
    assert result.returncode == 0, result.stderr
    shown = result.stdout + result.stderr
    assert "Send: curl -X GET" in shown and "GET http://***@127.0.0.1:" in shown, shown[:2000]
    for secret in SECRETS:
        assert secret not in shown, shown


# -- the library API ----------------------------------------------------------------------


def _message_of(call: Callable[[], object]) -> str:
    with pytest.raises(KernelDepsError) as info:
        call()
    assert str(info.value) == info.value.message
    return info.value.message


def test_lock_project_errors_hide_the_credentials(hub_env, tmp_path, monkeypatch) -> None:
    from kernel_deps.commands.lock import lock_project

    project = write_project(tmp_path / "app", {MISSING: ">=1"})
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_ENDPOINT", with_credentials(f"http://127.0.0.1:{free_port()}"))
    monkeypatch.setenv("KERNELS_HUB_BUDGET", "1")
    message = _message_of(lambda: lock_project(project))
    assert "cannot reach the Hub at http://***@127.0.0.1:" in message
    assert not any(secret in message for secret in SECRETS), message


def test_get_kernel_errors_hide_the_credentials(hub_env, monkeypatch) -> None:
    from kernel_deps.core.errors import RepoNotFoundError
    from kernel_deps.loader.api import get_kernel

    monkeypatch.setenv("HF_ENDPOINT", with_credentials(hub_env.url))
    with pytest.raises(RepoNotFoundError) as info:
        get_kernel(MISSING, version=1)
    assert f"not found on {hub_env.url.replace('http://', 'http://***@')}" in str(info.value)
    assert PASSWORD not in str(info.value) and PASSWORD not in info.value.endpoint


def test_a_client_given_a_token_and_an_endpoint_hides_both(hub_env, tmp_path) -> None:
    """Secrets passed to the client, not set in the environment, are hidden as well."""
    from kernel_deps.commands.lock import lock_project
    from kernel_deps.hub.client import HubClient

    project = write_project(tmp_path / "app", {MISSING: ">=1"})
    with EchoHub(418) as echo:
        message = _message_of(lambda: lock_project(project, hub=HubClient(endpoint=echo.url, token=TOKEN, budget=1)))
        assert echo.authorizations[0] == f"Bearer {TOKEN}"
        assert "/echo/Bearer%20***/" in message and TOKEN not in message
        with EchoHub(418) as basic:
            client = HubClient(endpoint=with_credentials(basic.url), budget=1)
            message = _message_of(lambda: lock_project(project, hub=client))
            assert basic.authorizations[0] == f"Basic {BASIC}"
    assert "the Hub at http://***@127.0.0.1:" in message
    assert not any(secret in message for secret in SECRETS), message
    with pytest.raises(UsageError) as info:
        HubClient(endpoint=f"http://user:{PASSWORD}@127.0.0.1:99999")
    assert str(info.value).startswith("endpoint 'http://***@127.0.0.1:99999': not a valid URL")
    assert PASSWORD not in str(info.value)


def test_redaction_finds_each_spelling_of_a_credential(monkeypatch) -> None:
    from kernel_deps.core.redaction import redact, shown_url

    monkeypatch.setenv("HF_ENDPOINT", "https://me:p%40ss%2Fword@hub.internal")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    basic = base64.b64encode(b"me:p@ss/word").decode()
    text = (f"https://a:b@x/y sent {TOKEN} as p@ss/word, p%40ss%2Fword, Basic {basic} "
            f"and {basic.rstrip('=')}%3D to https://hub.internal/a@b")  # fmt: skip
    assert redact(text) == ("https://***@x/y sent *** as ***, ***, Basic *** and ***%3D to https://hub.internal/a@b")
    assert shown_url("https://me:pw@hub.internal:8443/api") == "https://***@hub.internal:8443/api"
    assert shown_url("https://hub.internal") == "https://hub.internal"

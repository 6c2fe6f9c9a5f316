"""kernel_deps.hub.transport: every Hub request, list_refs included, under one timeout, retry
loop, time budget and error mapping; against the local Hub and servers that misbehave."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kernel_deps.core.errors import FileWriteError, HubError, HubUnavailableError, OfflineError, RepoNotFoundError
from kernel_deps.hub.client import HubClient
from tests.fixtures.builder import CPU_VARIANT
from tests.fixtures.servers import SilentServer


@contextmanager
def answering(status: int, body: bytes) -> Iterator[str]:
    """A server answering every GET with ``status`` and ``body``; yields its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_list_refs_gives_up_on_a_silent_hub_when_the_budget_is_spent() -> None:
    with SilentServer() as server:
        client = HubClient(endpoint=server.url, budget=2, backoff=0.01)
        start = time.monotonic()
        with pytest.raises(HubUnavailableError) as info:
            client.list_refs("kernels-test/activation")
        elapsed = time.monotonic() - start
    message = str(info.value)
    assert message.startswith("kernels-test/activation: the Hub at") and "timed out" in message
    assert "the 2 s budget is spent" in message and "KERNELS_HUB_BUDGET" in message
    assert "\n" not in message
    assert elapsed < 6


def test_list_refs_honours_the_read_timeout_on_every_attempt() -> None:
    with SilentServer() as server:
        client = HubClient(endpoint=server.url, timeout=0.5, retries=2, backoff=0.01, budget=60)
        start = time.monotonic()
        with pytest.raises(HubUnavailableError, match=r"timed out after 3 attempts; check the network or HF_ENDPOINT"):
            client.list_refs("kernels-test/activation")
        elapsed = time.monotonic() - start
        accepted = server.accepted
    assert accepted == 3  # one connection per attempt, each abandoned after 0.5 s
    assert 1.4 < elapsed < 5


def test_list_refs_is_one_plain_request_per_repo_type(hub_env, proxy) -> None:
    client = HubClient(endpoint=proxy.url)
    assert client.list_refs("kernels-test/legacy-gelu").repo_type == "model"
    assert proxy.counts[("GET", "/api/kernels/kernels-test/legacy-gelu/refs")] == 1
    assert proxy.counts[("GET", "/api/models/kernels-test/legacy-gelu/refs")] == 1
    assert proxy.total_requests() == 2


def test_a_missing_repo_is_not_retried(hub_env, proxy) -> None:
    with pytest.raises(RepoNotFoundError, match="kernels-test/nope: kernel repo not found on http://127.0.0.1:"):
        HubClient(endpoint=proxy.url, backoff=0.01).list_refs("kernels-test/nope")
    assert proxy.counts[("GET", "/api/kernels/kernels-test/nope/refs")] == 1  # the kernel repo, then
    assert proxy.counts[("GET", "/api/models/kernels-test/nope/refs")] == 1  # the model repo, once each
    # then, for a suggestion, the organization's kernel and model repos, once each
    assert proxy.counts[("GET", "/api/kernels")] == proxy.counts[("GET", "/api/models")] == 1
    assert proxy.total_requests() == 4


def test_rate_limiting_is_retried(hub_env, proxy) -> None:
    proxy.error_schedule = [429, 429]
    listing = HubClient(endpoint=proxy.url, backoff=0.01).list_refs("kernels-test/rotary")
    assert listing.repo_type == "kernel"
    assert proxy.counts[("GET", "/api/kernels/kernels-test/rotary/refs")] == 3


@pytest.mark.parametrize("status", [503, 429])
def test_a_request_asked_with_no_retries_is_tried_once(hub_env, proxy, status) -> None:
    # What a lock asks early, on a guess (hub/hints.py): a fault costs the guess, not a wait.
    repo_id = "kernels-test/rotary"
    commit = hub_env.repos[repo_id].commits["1.0.0"]
    client = HubClient(endpoint=proxy.url, backoff=0.01)
    client.list_refs(repo_id)
    path = f"build/{CPU_VARIANT}/metadata.json"
    proxy.reset_counts()
    proxy.error_schedule = [status, status]
    with pytest.raises(HubUnavailableError):
        client.read_small_file(repo_id, commit, path, retries=0)
    with pytest.raises(HubUnavailableError):
        client.list_commit(repo_id, "main", repo_type="kernel", retries=0)
    assert proxy.total_requests() == 2
    assert client.read_small_file(repo_id, commit, path, retries=0)  # and answered when the Hub answers


@pytest.mark.parametrize(
    "body", [b"not json", b'{"branches": [{"name": "main"}], "tags": []}', b"[]"], ids=["not-json", "no-commit", "list"]
)
def test_a_malformed_refs_answer_is_one_clear_line(body) -> None:
    with answering(200, body) as url:
        with pytest.raises(HubError, match=r"^kernels-test/odd: the Hub's list of branches and tags is malformed") as info:
            HubClient(endpoint=url).list_refs("kernels-test/odd")
    assert "\n" not in str(info.value) and "Error(" not in str(info.value)  # a reason, not an exception's repr


def test_offline_mode_sends_no_request_for_any_call(hub_env, proxy, monkeypatch, tmp_path) -> None:
    commit = hub_env.repos["kernels-test/rotary"].commits["1.0.0"]
    client = HubClient(endpoint=proxy.url)
    client.list_refs("kernels-test/rotary")
    proxy.reset_counts()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    calls = [
        lambda: client.list_refs("kernels-test/rotary"),
        lambda: client.list_variants("kernels-test/rotary", commit),
        lambda: client.list_variant_files("kernels-test/rotary", commit, CPU_VARIANT),
        lambda: client.read_small_file("kernels-test/rotary", commit, f"build/{CPU_VARIANT}/metadata.json"),
        lambda: client.commit_history("kernels-test/rotary", commit),
        lambda: client.download_to("kernels-test/rotary", commit, f"build/{CPU_VARIANT}/_ops.py", tmp_path / "f"),
    ]
    for call in calls:
        with pytest.raises(OfflineError, match="kernels-test/rotary: HF_HUB_OFFLINE is set"):
            call()
    assert proxy.total_requests() == 0


def test_a_download_that_cannot_be_written_is_a_file_error(hub_env, tmp_path) -> None:
    commit = hub_env.repos["kernels-test/rotary"].commits["1.0.0"]
    path = f"build/{CPU_VARIANT}/_ops.py"
    dest = tmp_path / "no-such-folder" / "blob"
    with pytest.raises(FileWriteError) as info:
        HubClient().download_to("kernels-test/rotary", commit, path, dest)
    message = str(info.value)
    assert message.startswith(f"kernels-test/rotary {path}: cannot write the download {dest}")
    assert "check free space and permissions" in message and "\n" not in message


def test_a_huggingface_hub_imported_offline_is_an_offline_error_without_the_credentials(hub_env, monkeypatch) -> None:
    """huggingface_hub reads offline mode once, at import: when it was on then and is off
    now, its refusal is an offline error, not a failed write quoting the request URL."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # as if imported with HF_HUB_OFFLINE=1
    endpoint = hub_env.url.replace("http://", "http://user:s3cret@")
    with pytest.raises(OfflineError) as info:
        HubClient(endpoint=endpoint).list_refs("kernels-test/rotary")
    message = str(info.value)
    assert message.startswith("kernels-test/rotary: huggingface_hub was imported in offline mode (HF_HUB_OFFLINE")
    assert "s3cret" not in message

"""Tests for the fault-injecting reverse proxy in tests/fixtures/faultproxy.py."""

from __future__ import annotations

import contextlib
import http.client
import json
import random
import re
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.fixtures.faultproxy import FaultProxy

BIG = random.Random(1234).randbytes(1 << 20)
SMALL = json.dumps({"hello": "world"}).encode()
CHUNKS = [b"alpha-" * 100, b"beta-" * 5000, b"gamma"]


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def handle(self) -> None:
        with contextlib.suppress(OSError):  # the proxy hangs up early when truncating
            super().handle()

    def do_GET(self) -> None:
        if self.path == "/big":
            match = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
            if match:
                start, end = int(match[1]), int(match[2])
                rng = ("Content-Range", f"bytes {start}-{end}/{len(BIG)}")
                self._reply(206, BIG[start : end + 1], rng)
            else:
                self._reply(200, BIG)
        elif self.path.startswith("/small"):
            self._reply(200, SMALL, ("Content-Type", "application/json"))
        elif self.path == "/redir":
            port = self.server.server_address[1]
            self._reply(302, b"", ("Location", f"http://127.0.0.1:{port}/small"))
        elif self.path == "/host":
            self._reply(200, self.headers["Host"].encode())
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in CHUNKS:
                self.wfile.write(b"%X\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self._reply(404, b"not found")

    do_HEAD = do_GET

    def do_POST(self) -> None:
        self._reply(200, self.rfile.read(int(self.headers["Content-Length"])))

    def _reply(self, status: int, body: bytes, *headers: tuple[str, str]) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(upstream: str) -> Iterator[FaultProxy]:
    with FaultProxy(upstream=upstream, seed=0) as p:
        yield p


def _conn(proxy: FaultProxy) -> http.client.HTTPConnection:
    assert proxy.port is not None
    return http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)


def _get(proxy: FaultProxy, path: str, method: str = "GET", **headers: str):
    conn = _conn(proxy)
    try:
        conn.request(method, path, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def test_passthrough_and_keepalive(proxy: FaultProxy, upstream: str) -> None:
    assert proxy.url == f"http://127.0.0.1:{proxy.port}"
    conn = _conn(proxy)
    for path, expected in [("/big", BIG), ("/small?x=1", SMALL), ("/big", BIG)]:
        conn.request("GET", path)  # same connection: keep-alive towards the client
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.headers["Content-Length"] == str(len(expected))
        assert resp.read() == expected
    conn.close()
    assert _get(proxy, "/host")[2].decode() == upstream.removeprefix("http://")
    assert proxy.faults == []


def test_head_and_post(proxy: FaultProxy) -> None:
    status, headers, body = _get(proxy, "/big", method="HEAD")
    assert (status, headers["Content-Length"], body) == (200, str(len(BIG)), b"")
    conn = _conn(proxy)
    conn.request("POST", "/echo", body=b"payload")
    assert conn.getresponse().read() == b"payload"
    conn.request("POST", "/echo", body=iter([b"chunked ", b"request"]), encode_chunked=True)
    assert conn.getresponse().read() == b"chunked request"
    conn.close()


def test_range_passthrough(proxy: FaultProxy) -> None:
    status, headers, body = _get(proxy, "/big", Range="bytes=1000-4999")
    assert status == 206
    assert headers["Content-Range"] == f"bytes 1000-4999/{len(BIG)}"
    assert body == BIG[1000:5000]


def test_chunked_upstream_is_rechunked(proxy: FaultProxy) -> None:
    status, headers, body = _get(proxy, "/chunked")
    assert status == 200
    assert body == b"".join(CHUNKS)


def test_redirect_rewritten_to_proxy(proxy: FaultProxy) -> None:
    status, headers, _ = _get(proxy, "/redir")
    assert status == 302
    assert headers["Location"] == f"{proxy.url}/small"
    proxy.reset_counts()
    with urllib.request.urlopen(f"{proxy.url}/redir", timeout=5) as resp:
        assert resp.read() == SMALL
    assert proxy.counts == {("GET", "/redir"): 1, ("GET", "/small"): 1}


def test_error_schedule_in_order(proxy: FaultProxy) -> None:
    proxy.error_schedule = [503, None, 500, True, False]
    conn = _conn(proxy)  # error answers keep the connection usable
    statuses = []
    for _ in range(6):
        conn.request("GET", "/small")
        resp = conn.getresponse()
        resp.read()
        statuses.append(resp.status)
    conn.close()
    assert statuses == [503, 200, 500, 503, 200, 200]
    assert proxy.error_schedule is None
    assert proxy.faults == [("error", "/small")] * 3


def test_error_rate_and_clear(proxy: FaultProxy) -> None:
    proxy.fail_all()
    assert [_get(proxy, "/big")[0] for _ in range(5)] == [503] * 5
    proxy.error_status = 502
    assert _get(proxy, "/small")[0] == 502
    proxy.clear_faults()
    assert _get(proxy, "/small")[0] == 200


def test_reset_raises_connection_error(proxy: FaultProxy) -> None:
    proxy.reset_rate = 1.0
    with pytest.raises(ConnectionError):
        _get(proxy, "/small")
    assert proxy.faults == [("reset", "/small")]
    proxy.clear_faults()
    assert _get(proxy, "/small")[2] == SMALL


@pytest.mark.parametrize("path", ["/big", "/chunked"])
def test_truncate_gives_short_body(proxy: FaultProxy, path: str) -> None:
    proxy.truncate_rate = 1.0
    conn = _conn(proxy)
    conn.request("GET", path)
    resp = conn.getresponse()
    assert resp.status == 200
    if path == "/big":
        assert resp.headers["Content-Length"] == str(len(BIG))
    with pytest.raises(http.client.IncompleteRead) as excinfo:
        resp.read()
    full = BIG if path == "/big" else b"".join(CHUNKS)
    assert len(excinfo.value.partial) < len(full)
    assert full.startswith(excinfo.value.partial)
    conn.close()


def test_latency_and_stall(proxy: FaultProxy) -> None:
    proxy.latency = 0.3
    start = time.monotonic()
    assert _get(proxy, "/small")[2] == SMALL
    assert time.monotonic() - start >= 0.3
    proxy.clear_faults()
    proxy.stall = 0.3
    start = time.monotonic()
    assert _get(proxy, "/big")[2] == BIG
    assert time.monotonic() - start >= 0.3
    assert proxy.faults == [("latency", "/small"), ("stall", "/big")]


def test_only_paths(proxy: FaultProxy) -> None:
    proxy.fail_all()
    proxy.only_paths = "/big"
    assert _get(proxy, "/small")[0] == 200
    assert _get(proxy, "/big")[0] == 503
    proxy.only_paths = lambda path: path.endswith("all")
    assert _get(proxy, "/small")[0] == 503
    assert _get(proxy, "/big")[0] == 200


def test_seeded_randomness_is_reproducible(upstream: str) -> None:
    runs = []
    for _ in range(2):
        with FaultProxy(upstream=upstream, seed=7) as p:
            p.error_rate = 0.5
            runs.append([_get(p, "/small")[0] for _ in range(12)])
    assert runs[0] == runs[1]
    assert set(runs[0]) == {200, 503}


def test_counts(proxy: FaultProxy) -> None:
    proxy.error_schedule = [503]
    for path in ["/small", "/small?rev=main", "/big", "/redir"]:
        _get(proxy, path)
    _get(proxy, "/big", method="HEAD")
    assert proxy.counts == {
        ("GET", "/small"): 2, ("GET", "/big"): 1, ("GET", "/redir"): 1, ("HEAD", "/big"): 1,
    }
    assert proxy.total_requests() == 5
    assert proxy.requests_matching("/big") == 2
    assert proxy.requests_matching("/nothing") == 0
    proxy.reset_counts()
    assert (proxy.total_requests(), proxy.faults) == (0, [])


def test_stop_is_prompt_with_hung_connections(upstream: str) -> None:
    proxy = FaultProxy(upstream=upstream).start()
    proxy.stall = 30.0
    idle = socket.create_connection(("127.0.0.1", proxy.port))  # never sends a request
    errors: list[Exception] = []

    def fetch() -> None:
        try:
            _get(proxy, "/big")
        except Exception as exc:
            errors.append(exc)

    stalled = threading.Thread(target=fetch, daemon=True)
    stalled.start()
    deadline = time.monotonic() + 5
    while not proxy.faults and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy.faults == [("stall", "/big")]
    start = time.monotonic()
    proxy.stop()
    assert time.monotonic() - start < 2
    stalled.join(timeout=5)
    assert not stalled.is_alive()
    assert len(errors) == 1  # the stalled download was cut off, not completed
    idle.close()
    proxy.stop()  # idempotent

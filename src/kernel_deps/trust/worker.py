"""Sigstore bundles verified in a second process, on another core, while a lock asks the Hub.

sigstore's import costs about half a second of CPU (the pydantic models of Rekor's types,
cryptography's X.509, requests) and each bundle some 2 ms more; in the locking process they
share one interpreter lock with resolving, so a lock of signed kernels took that long
longer than one of plain kernels. A command that locks (:func:`enable`, `kernels lock`,
`add` and `remove`) on a machine with more than one usable core instead starts, as soon as
it knows that signed builds are expected (:func:`start`), a child process of the same
interpreter and ``sys.path`` (``python -m kernel_deps.trust.worker``): it imports sigstore
and builds the verifier while the parent imports huggingface_hub and resolves, then checks
each bundle it is sent with :func:`kernel_deps.trust.bundles.verify_bundle`, the function
the parent would have called itself, on the same bytes, trusted root content and allowed
identities, and writes back the signer's facts or why the bundle does not prove one.

Requests and answers go over the child's stdin and stdout, pipes only the two processes
hold. Whatever goes wrong with the child (it cannot start, exits, answers something that
cannot be read) leaves the parent verifying in its own process as before: a verdict comes
from ``verify_bundle`` and from nothing else. Library calls (``get_kernel``) never start it.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import json
import os
import queue
import struct
import subprocess
import sys
import threading
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator, Sequence

from kernel_deps.trust.bundles import BundleError, CertifiedSigner, TrustedRootError, verify_bundle
from kernel_deps.trust.signers import Identity

_HEADER = struct.Struct(">I")
MAX_FRAME = 8 << 20  # a bundle, its metadata.json and a trusted root, base64'd, with room

# How long a verdict is waited for before the bundle is verified here instead (a worker
# that stopped answering); verifying one takes milliseconds.
ANSWER_SECONDS = 60.0

_state = threading.Lock()
_users = 0  # the commands in this process between enable() and stop() (a library may relock in threads)
_worker: _Worker | None = None
_ahead: dict[tuple, Future] = {}  # verdicts asked for ahead of verify(), by request


def enable() -> None:
    """Let :func:`start` start a worker in this process (the CLI's locking commands), until the
    matching :func:`stop`."""
    global _users
    with _state:
        _users += 1


@contextmanager
def enabled() -> Iterator[None]:
    """:func:`enable` for the block (a command's lock), :func:`stop` after it, however it ends."""
    enable()
    try:
        yield
    finally:
        stop()


def start(trusted_root: Path | None) -> bool:
    """Start the worker (once per process) when enabled, more than one core is usable and
    this process has not imported sigstore already (then the import is paid, and bundles are
    verified here); whether one is running."""
    global _worker
    with _state:
        if _worker is None and _users > 0 and _usable_cores() > 1 and "sigstore.verify" not in sys.modules:
            try:
                _worker = _Worker(trusted_root)
            except OSError:
                return False
        return _worker is not None and not _worker.broken


def running() -> bool:
    """Whether a worker runs in this process and still answers."""
    worker = _worker
    return worker is not None and not worker.broken


def stop() -> None:
    """The end of one :func:`enable`: once no command that enabled it is left, end the worker,
    if one runs (it also ends by itself at the end of its input, when this process does), and
    start none again until :func:`enable`. Another command still locking keeps it."""
    global _worker, _users
    with _state:
        _users = max(_users - 1, 0)
        if _users:
            return
        worker, _worker = _worker, None
        _ahead.clear()
    if worker is not None:
        worker.close()


def ahead(
    data: bytes, bundle: bytes, trusted_root: Path | None, allowed: Sequence[Sequence[Identity]] = (),
    root_content: bytes | None = None,
) -> None:
    """Send a bundle to the worker now, as soon as it is read, so that its verdict is ready
    when :func:`verify` asks for it with the same arguments (nothing without a worker)."""
    worker = _worker
    if worker is None or worker.broken:
        return
    key = _request_key(data, bundle, trusted_root, allowed, root_content)
    with _state:
        if key in _ahead:
            return
        try:
            _ahead[key] = worker.submit(data, bundle, trusted_root, allowed, root_content)
        except _WorkerGone:
            pass


def verify(
    data: bytes, bundle: bytes, trusted_root: Path | None, allowed: Sequence[Sequence[Identity]] = (),
    root_content: bytes | None = None,
) -> CertifiedSigner:
    """:func:`kernel_deps.trust.bundles.verify_bundle`, in the worker when one runs (its
    verdict on a bundle sent :func:`ahead` when there is one), else here."""
    worker = _worker
    if worker is not None and not worker.broken:
        key = _request_key(data, bundle, trusted_root, allowed, root_content)
        with _state:
            sent = _ahead.pop(key, None)
        try:
            sent = sent or worker.submit(data, bundle, trusted_root, allowed, root_content)
            return _outcome(sent.result(timeout=ANSWER_SECONDS))
        except _WorkerGone:
            pass  # verified here, below
        except TimeoutError:  # it stopped answering: ended, so that no other bundle waits on it
            worker.close()
    return verify_bundle(data, bundle, trusted_root, allowed, root_content)


def _request_key(data: bytes, bundle: bytes, trusted_root: Path | None, allowed: Sequence[Sequence[Identity]],
                 root_content: bytes | None) -> tuple:  # fmt: skip
    digest = lambda value: None if value is None else hashlib.sha256(value).digest()  # noqa: E731
    groups = tuple(tuple((i.repository, i.workflow, i.ref, i.issuer) for i in group) for group in allowed)
    return digest(data), digest(bundle), None if trusted_root is None else str(trusted_root), digest(root_content), groups


class _WorkerGone(Exception):
    """The worker exited or answered something that cannot be read: verify here instead."""


class _Worker:
    """The child process, its pending requests, and the threads that write them and read its answers."""

    def __init__(self, trusted_root: Path | None) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if isinstance(p, str) and p))
        root = "" if trusted_root is None else str(trusted_root)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kernel_deps.trust.worker", root], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env, close_fds=True,
        )  # fmt: skip
        self.broken = False
        self._pending: dict[int, Future] = {}
        self._lock = threading.Lock()
        self._next = 0
        self._roots_sent: set[str] = set()
        # Requests are written by a thread of their own: the worker reads none while it
        # imports sigstore, and a caller (a Hub call thread) must never wait on a full pipe.
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._write, name="kernel-deps-verifier-in", daemon=True).start()
        threading.Thread(target=self._read, name="kernel-deps-verifier-out", daemon=True).start()
        atexit.register(self.close)

    def submit(self, data: bytes, bundle: bytes, trusted_root: Path | None, allowed: Sequence[Sequence[Identity]],
               root_content: bytes | None) -> Future:  # fmt: skip
        request = {
            "data": _b64(data), "bundle": _b64(bundle), "trusted_root": None if trusted_root is None else str(trusted_root),
            "allowed": [[[i.repository, i.workflow, i.ref, i.issuer] for i in group] for group in allowed],
        }  # fmt: skip
        future: Future = Future()
        with self._lock:
            if self.broken:
                raise _WorkerGone()
            if root_content is not None:  # each trusted root's bytes are sent once, named by their hash after
                request["root_sha256"] = name = hashlib.sha256(root_content).hexdigest()
                if name not in self._roots_sent:
                    self._roots_sent.add(name)
                    request["root_content"] = _b64(root_content)
            self._next += 1
            request["id"] = self._next
            self._pending[self._next] = future
            self._outbox.put(request)
        return future

    def _write(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        try:
            while (request := self._outbox.get()) is not None:
                _write_frame(stdin, request)
            stdin.close()  # the worker ends at the end of its input
        except (OSError, ValueError):
            with self._lock:
                self._fail_all()

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            try:
                answer = _read_frame(stdout)
                with self._lock:
                    future = self._pending.pop(answer["id"]) if answer is not None else None
            except (OSError, ValueError, KeyError, TypeError):
                answer = future = None
            if future is None:
                with self._lock:
                    self._fail_all()
                return
            future.set_result(answer)

    def _fail_all(self) -> None:
        """Under ``_lock``: no more requests; each one waiting is verified by its caller instead."""
        if not self.broken:
            self.broken = True
            self._outbox.put(None)
        pending, self._pending = self._pending, {}
        for future in pending.values():
            future.set_exception(_WorkerGone())

    def close(self) -> None:
        """No more requests, and the worker ended now: nothing it would still do is wanted, and
        a process left to wind down (sigstore's modules loaded) would take a core from what
        the user runs next."""
        atexit.unregister(self.close)  # a library that locks again and again keeps no closed worker alive
        with self._lock:
            self._fail_all()
        try:
            self.process.kill()
            self.process.wait()
        except OSError:
            pass


def _outcome(answer: dict) -> CertifiedSigner:
    """The worker's answer as verify_bundle's return or exception; _WorkerGone for one that cannot be read."""
    try:
        if "signer" in answer:
            issuer, identity, repository, workflow, ref = answer["signer"]
            return CertifiedSigner(issuer, identity, repository, workflow, ref)
        if "bundle_error" in answer:
            raise BundleError(str(answer["bundle_error"]), not_allowed=bool(answer["not_allowed"]))
        if "root_error" in answer:
            raise TrustedRootError(str(answer["root_error"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise _WorkerGone() from exc
    raise _WorkerGone()


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _write_frame(stream: IO[bytes] | None, value: dict) -> None:
    assert stream is not None
    body = json.dumps(value, separators=(",", ":")).encode("ascii")
    stream.write(_HEADER.pack(len(body)) + body)
    stream.flush()


def _read_frame(stream: IO[bytes]) -> dict | None:
    """One frame's JSON object; None at the end of the stream; ValueError for a frame that is not one."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME:
        raise ValueError("frame too large")
    body = stream.read(size)
    if len(body) < size:
        return None
    value = json.loads(body)
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


def _serve(trusted_root: Path | None, requests: IO[bytes], answers: IO[bytes]) -> None:
    """The worker: the verifier built at once, then each request verified and answered in turn."""
    from kernel_deps.trust.bundles import prepare

    prepare(trusted_root)
    roots: dict[str, bytes] = {}  # trusted roots' bytes by their SHA-256, each sent once
    while (request := _read_frame(requests)) is not None:
        answer: dict = {"id": request["id"]}
        try:
            allowed = [[Identity(*fields) for fields in group] for group in request["allowed"]]
            root = request["trusted_root"]
            if "root_content" in request:
                roots[request["root_sha256"]] = base64.b64decode(request["root_content"])
            content = roots[request["root_sha256"]] if "root_sha256" in request else None
            signer = verify_bundle(base64.b64decode(request["data"]), base64.b64decode(request["bundle"]),
                                   None if root is None else Path(root), allowed, content)  # fmt: skip
            answer["signer"] = [signer.issuer, signer.identity, signer.repository, signer.workflow, signer.ref]
        except BundleError as exc:
            answer.update(bundle_error=exc.reason, not_allowed=exc.not_allowed)
        except TrustedRootError as exc:
            answer["root_error"] = str(exc)
        _write_frame(answers, answer)


def main() -> None:
    # Answers go to a private copy of stdout; anything a library prints goes to stderr instead.
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        _serve(Path(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] else None, sys.stdin.buffer, answers)
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    os._exit(0)  # every answer is written: no teardown of the modules sigstore loaded


if __name__ == "__main__":
    main()

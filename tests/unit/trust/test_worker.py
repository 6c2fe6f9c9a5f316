"""The verifier process (kernel_deps.trust.worker): its verdicts are verify_bundle's, and
whatever happens to it, a bundle is still verified, here.

Each case runs in a fresh Python process (a test process has sigstore imported already,
and a process that has imports its bundles itself): it starts the worker as `kernels lock`
does, verifies real bundles of the tests' own Sigstore, and reports the verdicts and
whether it imported sigstore itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_deps.trust.bundles import BundleError, verify_bundle
from kernel_deps.trust.signers import Identity as Allowed
from tests.fixtures.sigstore_ca import Identity, LocalSigstore

CASE = r"""
import json, sys
from pathlib import Path
from kernel_deps.trust import worker
from kernel_deps.trust.bundles import BundleError
from kernel_deps.trust.signers import Identity

case = json.loads(sys.stdin.read())
root = Path(case["root"])
worker.enable()
started = worker.start(root)
if case["kill"]:
    worker._worker.process.kill()
    worker._worker.process.wait()
if case.get("hang"):  # stopped, as by a debugger or a frozen container: alive, answering nothing
    import os, signal
    worker.ANSWER_SECONDS = case["hang"]
    os.kill(worker._worker.process.pid, signal.SIGSTOP)
items = [(Path(i["data"]).read_bytes(), Path(i["bundle"]).read_bytes(), [[Identity(*f) for f in g] for g in i["allowed"]])
         for i in case["items"]]
if case["ahead"]:
    for data, bundle, allowed in items:
        worker.ahead(data, bundle, root, allowed, root.read_bytes())
import time
verdicts = []
began = time.monotonic()
for data, bundle, allowed in items:
    try:
        verdicts.append(worker.verify(data, bundle, root, allowed, root.read_bytes()).to_dict())
    except BundleError as exc:
        verdicts.append({"reason": exc.reason, "not_allowed": exc.not_allowed})
print(json.dumps({"started": started, "verdicts": verdicts, "sigstore_here": "sigstore.verify" in sys.modules,
                  "waited": time.monotonic() - began}))
"""

REPO = "kernels-test/worker"
ALLOWED = Allowed(REPO, ".github/workflows/build.yml", "refs/heads/main")
OTHER = Allowed("kernels-test/other", ".github/workflows/build.yml", "refs/heads/main")


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> tuple[Path, list[dict]]:
    """A trusted root, and four (metadata.json, bundle, allowed) cases: one that proves its
    signer, one whose bundle signs other bytes, one signed by someone not allowed, one that is not a bundle."""
    folder = tmp_path_factory.mktemp("worker")
    sigstore = LocalSigstore("worker")
    root = sigstore.write_trusted_root(folder / "trusted_root.json")
    good, other = folder / "good.json", folder / "other.json"
    good.write_bytes(b'{"version": 1}\n')
    other.write_bytes(b'{"version": 2}\n')
    bundle = folder / "good.sigstore"
    bundle.write_text(sigstore.sign(good.read_bytes(), Identity(REPO)))
    junk = folder / "junk.sigstore"
    junk.write_bytes(b'{"mediaType": "not a bundle"}')
    fields = [[ALLOWED.repository, ALLOWED.workflow, ALLOWED.ref, ALLOWED.issuer]]
    other_fields = [[OTHER.repository, OTHER.workflow, OTHER.ref, OTHER.issuer]]
    items = [
        {"data": str(good), "bundle": str(bundle), "allowed": [fields]},
        {"data": str(other), "bundle": str(bundle), "allowed": [fields]},
        {"data": str(good), "bundle": str(bundle), "allowed": [other_fields]},
        {"data": str(good), "bundle": str(junk), "allowed": []},
    ]
    return root, items


def here(root: Path, items: list[dict]) -> list[dict]:
    """The verdicts of verify_bundle in this process."""
    verdicts = []
    for item in items:
        allowed = [[Allowed(*f) for f in group] for group in item["allowed"]]
        try:
            signer = verify_bundle(Path(item["data"]).read_bytes(), Path(item["bundle"]).read_bytes(), root, allowed,
                                   root.read_bytes())  # fmt: skip
            verdicts.append(signer.to_dict())
        except BundleError as exc:
            verdicts.append({"reason": exc.reason, "not_allowed": exc.not_allowed})
    return verdicts


def in_a_process(root: Path, items: list[dict], *, kill: bool = False, ahead: bool = False, hang: float = 0) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    result = subprocess.run([sys.executable, "-c", CASE], input=json.dumps({"root": str(root), "items": items,
                            "kill": kill, "ahead": ahead, "hang": hang}), capture_output=True, text=True, env=env,
                            timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the worker runs only where a second core can take it")
def test_the_worker_gives_verify_bundles_verdicts_and_a_dead_one_leaves_them_to_this_process(cases) -> None:
    root, items = cases
    expected = here(root, items)
    assert expected[0]["repository"] == REPO and expected[2]["not_allowed"] and not expected[1]["not_allowed"]
    assert "does not verify" in expected[1]["reason"] and "not a Sigstore bundle" in expected[3]["reason"]
    for ahead in (False, True):  # asked for when needed, or sent ahead as a lock sends each bundle it reads
        report = in_a_process(root, items, ahead=ahead)
        assert report["started"] and report["verdicts"] == expected
        assert not report["sigstore_here"]  # every verdict came from the worker
    killed = in_a_process(root, items, kill=True, ahead=True)
    assert killed["started"] and killed["verdicts"] == expected
    assert killed["sigstore_here"]  # verified here once the worker was gone
    # A worker that stops answering is waited for once (its answer time, 2 s here), then
    # ended: the other bundles are verified here at once, not after a wait of their own.
    hung = in_a_process(root, items, ahead=True, hang=2.0)
    assert hung["started"] and hung["verdicts"] == expected and hung["sigstore_here"]
    assert 2.0 <= hung["waited"] < 2.0 * 2


ORPHAN = r"""
import os, signal, sys
from pathlib import Path
from kernel_deps.trust import worker

worker.enable()
assert worker.start(Path(sys.argv[1]))
print(worker._worker.process.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the worker runs only where a second core can take it")
def test_a_killed_lock_leaves_no_verifier_process_behind(cases) -> None:
    import time

    root, _ = cases
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    result = subprocess.run([sys.executable, "-c", ORPHAN, str(root)], capture_output=True, text=True, env=env,
                            timeout=60)  # fmt: skip
    assert result.returncode == -9, result.stderr[-2000:]
    pid = int(result.stdout)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}") and "Z" not in _state(pid):
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}") or "Z" in _state(pid), "the verifier outlived the lock"


def _state(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


TWO_LOCKS = r"""
import json, sys
from pathlib import Path
from kernel_deps.trust import worker
from kernel_deps.trust.signers import Identity

case = json.loads(sys.stdin.read())
root = Path(case["root"])
item = case["items"][0]
data, bundle = Path(item["data"]).read_bytes(), Path(item["bundle"]).read_bytes()
allowed = [[Identity(*f) for f in group] for group in item["allowed"]]
worker.enable(); worker.enable()  # two locks of one process (a library's threads)
started = worker.start(root)
worker.stop()  # the first one done
kept = worker.running()
verdict = worker.verify(data, bundle, root, allowed, root.read_bytes()).to_dict()
worker.stop()  # the second one done
print(json.dumps({"started": started, "kept": kept, "verdict": verdict, "after": worker.running(),
                  "again": worker.start(root), "sigstore_here": "sigstore.verify" in sys.modules}))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the worker runs only where a second core can take it")
def test_one_lock_ending_leaves_the_verifier_to_another_still_locking(cases) -> None:
    root, items = cases
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    result = subprocess.run([sys.executable, "-c", TWO_LOCKS], input=json.dumps({"root": str(root), "items": items}),
                            capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["started"] and report["kept"] and not report["sigstore_here"]  # the second lock's verdict came from it
    assert report["verdict"] == here(root, items[:1])[0]
    assert not report["after"] and not report["again"]  # ended with the last, and none started until enabled

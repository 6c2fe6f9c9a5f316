"""The signature rows of bench/compare.py: what Sigstore signatures cost where users wait.

Kernels of one shape (bench/bench_signatures.py's ``build_kernel_sets``: one release, three
variants), plain and signed (kernel-builder's digest and a Sigstore bundle per variant,
from the tests' own Sigstore, tests/fixtures/sigstore_ca.py). The signed project names
that Sigstore's trusted root and requires signatures; the plain one asks for the plain
kernels the same way. Each side is kernel-deps' own ``kernels`` script (the one every row
of bench/compare.py runs, with its environment: an installed wheel first on PYTHONPATH
is what runs) with a Hugging Face home, a cache and an ``XDG_STATE_HOME`` of its own in
the run's temporary folder, never the user's. Every command is a fresh process, the two
sides in turn (signed, then plain) in every run, medians of ``--runs`` runs after one
untimed run of each; each figure is signed / plain, judged against 1.3x.

- ``signed``: 3 kernels locked and downloaded once, then a warm ``kernels download`` and
  an offline ``kernels verify`` (``HF_HUB_OFFLINE=1``), each twice over: right after a
  ``kernels lock`` (the lock file removed and written again, untimed; the cache kept), the
  first warm command a user runs after locking; and in steady state, the same command
  again with nothing in between. The state folder is kept for the whole row, as a user's.
- ``signed-lock``: a lock of ``--kernels`` (20) kernels, no lock file, an empty cache and
  an empty state folder every run (the strict figure: nothing verified before), 50 ms
  added to every request, through the concurrent caching layer
  (tests/fixtures/cachinghub.py) so that olah's serving one request at a time does not
  weigh on the side with more requests.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.bench_signatures import build_kernel_sets, signature_project
from bench.timing import Goal, Sample, Step, Tool, goal, interleaved, layer_note, met, with_env
from tests.fixtures.cachinghub import CachingHub
from tests.fixtures.faultproxy import FaultProxy
from tests.fixtures.sigstore_ca import LocalSigstore

SIGNED_GOAL = 1.3
WARM = 3
HEADER = ("what", "signed", "plain", "signed / plain", "goal")


class Side:
    """One side of the comparison: its tool (home, cache and state of its own) and project."""

    def __init__(self, root: Path, ours: Tool, endpoint: str, label: str, repos: list[str], trusted_root: Path | None):
        root.mkdir(parents=True, exist_ok=True)
        self.label = label
        self.cache = root / f"cache-{label}"
        self.state = root / f"state-{label}"
        self.tool = with_env(ours, label, HF_ENDPOINT=endpoint, HF_HOME=str(root / f"home-{label}"),
                             HF_HUB_CACHE=str(self.cache), XDG_STATE_HOME=str(self.state))  # fmt: skip
        self.project = signature_project(root, f"project-{label}", repos, trusted_root)
        self.lock_file = self.project / "kernels.lock"

    def lock(self) -> None:
        self.lock_file.unlink(missing_ok=True)
        self.tool.run("lock", str(self.project))

    def empty(self) -> None:
        """No lock file, an empty cache and an empty state folder."""
        self.lock_file.unlink(missing_ok=True)
        shutil.rmtree(self.cache, ignore_errors=True)
        shutil.rmtree(self.state, ignore_errors=True)

    def download(self) -> None:
        self.tool.run("download", str(self.project))

    def verify(self) -> None:
        self.tool.run("verify", str(self.project), extra_env={"HF_HUB_OFFLINE": "1"})


class SignedKernels:
    """Plain and signed kernels built into ``mirrors``, and the trusted root of their Sigstore."""

    def __init__(self, root: Path, count: int) -> None:
        sigstore = LocalSigstore("bench")
        self.plain, self.signed = build_kernel_sets(root / "mirrors", sigstore, count)
        self.trusted_root = sigstore.write_trusted_root(root / "trusted_root.json")

    def sides(self, root: Path, ours: Tool, endpoint: str, count: int) -> tuple[Side, Side]:
        return (Side(root / f"signed-{count}", ours, endpoint, "signed", self.signed[:count], self.trusted_root),
                Side(root / f"plain-{count}", ours, endpoint, "plain", self.plain[:count], None))  # fmt: skip


def _pair(what: str, signed: Sample, plain: Sample, goals: list[Goal]) -> tuple[str, ...]:
    value = signed.seconds / plain.seconds
    goals.append(goal(f"{what}: signed / plain", value, SIGNED_GOAL))
    return what, signed.show(), plain.show(), f"{value:.2f}x", f"<= {SIGNED_GOAL}x: {met(value <= SIGNED_GOAL)}"


def warm_rows(kernels: SignedKernels, root: Path, ours: Tool, proxy: FaultProxy, layer: CachingHub, runs: int,
              goals: list[Goal]) -> tuple[list[tuple[str, ...]], str]:  # fmt: skip
    """The ``signed`` rows; and whether the layer served every request from memory."""
    signed, plain = kernels.sides(root / "warm", ours, proxy.url, WARM)
    for side in (signed, plain):
        side.lock()
        side.download()  # cold: fills this side's cache
    rows, served = [], []
    measures = (
        (f"warm `kernels download .`, {WARM} kernels, first run after `kernels lock`", "download", True),
        (f"warm `kernels download .`, {WARM} kernels, steady state", "download", False),
        (f"offline `kernels verify .`, {WARM} kernels, first run after `kernels lock`", "verify", True),
        (f"offline `kernels verify .`, {WARM} kernels, steady state", "verify", False),
    )
    for what, command, after_lock in measures:
        steps = [Step(getattr(side, command), side.lock if after_lock else None, proxy) for side in (signed, plain)]
        (mine, base), counts = interleaved(steps, runs, layer)
        served.append(counts)
        rows.append(_pair(what, mine, base, goals))
    return rows, layer_note(*served)


def lock_row(kernels: SignedKernels, root: Path, ours: Tool, proxy: FaultProxy, layer: CachingHub, runs: int,
             count: int, latency: float, goals: list[Goal]) -> tuple[list[tuple[str, ...]], str]:  # fmt: skip
    """The ``signed-lock`` row; and whether the layer served every request from memory."""
    signed, plain = kernels.sides(root / "lock", ours, proxy.url, count)
    proxy.latency = latency
    try:
        steps = [Step(side.lock, side.empty, proxy) for side in (signed, plain)]
        (mine, base), served = interleaved(steps, runs, layer)
    finally:
        proxy.latency = 0.0
    what = (f"`kernels lock`, {count} kernels, {latency * 1000:.0f} ms per request, empty cache and state, "
            "through the concurrent layer")  # fmt: skip
    return [_pair(what, mine, base, goals)], layer_note(served)

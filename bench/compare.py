"""kernel-deps beside the Hugging Face `kernels` 0.16 CLI, where users wait: the issue's table.

One run builds N sample kernels (tests/fixtures/builder.py: releases 1.0.0 and 1.1.0,
a `v1` branch, three variants, no kernel dependencies, so both tools lock the same
thing), serves them with olah (tests/fixtures/localhub.py) behind the request-counting
proxy (tests/fixtures/faultproxy.py), and times every row of the table as a user runs
it: a fresh process per run, the median of ``--runs`` runs after one untimed run.

- `kernels --help`, against a Python that only imports click;
- `kernels lock` of 3 and of N kernels (`"org/name" = 1` for each, the one requirement
  form kernels 0.16 reads), ``--latency`` seconds added to every request, no prior lock,
  on an empty cache each run; kernel-deps also on the cache an earlier lock left (it
  keeps the `metadata.json` files it reads there; kernels 0.16 keeps nothing it uses);
- a warm `kernels download .` of the 3 locked kernels, this machine's variant already in
  the cache (each tool locks and fills a cache of its own first: each reads its own
  lock and cache, as its users have them); no latency added, which only helps the tool
  that asks the Hub;
- an offline `kernels verify .` of the same 3 kernels (kernel-deps only);
- hashing 4 x 64 MB as `verify` does (`cache.check_variant`), serial and on every usable
  core, against the fastest one-core hashlib SHA-256 (bench/bench_hashing.py).

After that table, the limits kernel-deps is held to, each a ratio within this one run
(so that load on the machine, which slows both sides alike, does not decide it): `--help`,
an offline `verify` and a warm `download` against `import click` (each of their runs right
after a run of `import click`, the two medians compared), the lock of N kernels against
the lock of 3, and its requests against kernels 0.16's.

The local Hub serves requests one after another, so a lock of N kernels pays for the
serving of every extra request however many are in flight. The run measures that too:
milliseconds per request of each kind a lock makes (refs, a commit's listing, a
`metadata.json`; olah's trailing-slash redirect), one at a time and all of a kind at once,
without the proxy; and, during every timed lock, the CPU time olah and the git processes
it starts spend (from /proc: olah serves from one thread, each request's git work
waited for, so that is its serving time). Beside the scaling goal it prints, labelled as
derived, the same ratio with the large lock's extra serving time (olah's CPU time in
the large lock less in the small one) taken out: what the local Hub's own speed accounts
for. The goal is judged on the raw ratio only.

Requests are those the proxy saw during one run (the median over the runs). kernels
0.16 runs from its compat install (`.venv/compat/kernels-0.16`, installed by `make`; what
its CLI imports at start, sigstore among it, is in `.venv` as kernel-deps' own).

kernel-deps runs as the `kernels` console script beside this interpreter, with this
process's environment (less `HF_*` and `KERNELS_*`), so `PYTHONPATH` decides which
kernel-deps it imports: an installed wheel first on it is what every row measures (the
first line printed names the `kernel_deps` the commands import). Each tool, and each
setup of the rows below, has a Hugging Face home, a cache and an `XDG_STATE_HOME` of its
own in the run's temporary folder: no run reads or writes the user's home.

The rows after the table (kernel-deps only) measure through tests/fixtures/cachinghub.py,
a concurrent caching layer between a second latency proxy and olah, primed by each
command's untimed run, so that timed runs are served from memory, many at once, as a
real Hub serves them (each says whether every request was): `lock-layer`, a lock of N
against a lock of 3, and the same straight to olah in the same rounds
(bench/compare_concurrent.py); `signed`, a warm `download` and an offline `verify` of 3
signed kernels against 3 plain ones of the same shape, right after a `lock` and in steady
state, and `signed-lock`, a lock of N signed kernels against N plain ones on an empty
cache and state (bench/compare_signed.py); `waves`, the round trips a lock of 3 kernels,
one of them transitive, waits on, with one run's trace of the requests in waves
(bench/compare_concurrent.py). Each pair is timed in turn, run after run.

    .venv/bin/python -m bench.compare [--runs 7] [--kernels 20] [--latency 0.05] [--rows help,lock,...]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench.bench_hashing import measure_hashing
from bench.compare_concurrent import WAVE_LATENCY, build_wave_kernels, lock_layer_rows, waves_rows
from bench.compare_signed import HEADER as SIGNED_HEADER
from bench.compare_signed import WARM, SignedKernels, warm_rows
from bench.compare_signed import lock_row as signed_lock_row
from bench.timing import Goal, Sample, Tool, goal, print_table, timed
from bench.timing import met as _met
from tests.fixtures.builder import KernelRepo, Release, build_repo
from tests.fixtures.cachinghub import CachingHub
from tests.fixtures.faultproxy import FaultProxy
from tests.fixtures.localhub import LocalHub
from tests.fixtures.projects import write_project

VENV = Path(sys.prefix)
KERNELS_016 = VENV / "compat" / "kernels-0.16"
# kernels 0.16's console script, run with this interpreter and its compat folders.
KERNELS_016_MAIN = "import sys; sys.argv[0] = 'kernels'; from kernels.cli import main; sys.exit(main())"
SMALL = 3
ROWS = ("help", "lock", "download", "verify", "hashing", "lock-layer", "signed", "signed-lock", "waves")


def build_kernels(mirrors: Path, count: int) -> list[str]:
    """``count`` independent sample kernels with a `v1` branch; their repo ids."""
    names = [f"bench/kernel-{i:02d}" for i in range(count)]
    for name in names:
        build_repo(mirrors, KernelRepo(name, (Release("1.0.0"), Release("1.1.0"))))
    return names


def tools(root: Path, endpoint: str) -> tuple[Tool, Tool]:
    """kernel-deps and kernels 0.16, each with a Hugging Face cache and home of its own."""
    if not (KERNELS_016 / "kernels" / "cli" / "__init__.py").is_file():
        raise SystemExit(f"kernels 0.16 is not in {KERNELS_016}: run 'make'")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KERNELS_"))}

    def env(slug: str) -> dict[str, str]:
        # A state folder of its own too (kernel-deps keeps per-user state under XDG_STATE_HOME):
        # nothing a run does reads or writes the user's home.
        return {**base, "HF_ENDPOINT": endpoint, "HF_HOME": str(root / f"home-{slug}"),
                "HF_HUB_CACHE": str(root / f"cache-{slug}"), "XDG_STATE_HOME": str(root / f"state-{slug}"),
                "HF_HUB_DISABLE_TELEMETRY": "1"}  # fmt: skip

    ours = Tool("kernel-deps", "ours", [str(Path(sys.executable).with_name("kernels"))], env("ours"))
    theirs_env = env("kernels016")
    theirs_env["PYTHONPATH"] = str(KERNELS_016)
    # kernels 0.16 with telemetry off sends a User-Agent the huggingface_hub client refuses.
    theirs_env["HF_HUB_DISABLE_TELEMETRY"] = "0"
    theirs = Tool("kernels 0.16", "kernels016", [sys.executable, "-c", KERNELS_016_MAIN], theirs_env)
    return ours, theirs


def ratio(ours: Sample, theirs: Sample | None) -> str:
    return "" if theirs is None else f"{theirs.seconds / ours.seconds:.1f}x faster" if ours.seconds < theirs.seconds else (
        f"{ours.seconds / theirs.seconds:.1f}x slower"
    )


Row = tuple[str, str, str, str, str]  # what, kernel-deps, kernels 0.16, kernel-deps against 0.16, goal and verdict

# The limits kernel-deps is held to, each a ratio within one run (so that load on the
# machine, which slows both sides alike, does not decide it): start-up against a Python
# that only imports click, a large lock against a small one, and requests against
# kernels 0.16's for the same kernels.
HELP_GOAL = 1.2
VERIFY_GOAL = 1.5
DOWNLOAD_GOAL = 1.5
LOCK_SCALE_GOAL = 1.3


def import_click(runs: int) -> Sample:
    """A Python that only imports click: the floor of any click command's start-up."""
    return timed(run_click, runs=runs)


def run_click() -> None:
    subprocess.run([sys.executable, "-c", "import click"], check=True)


def against_click(run, *, runs: int, proxy: FaultProxy | None = None) -> tuple[Sample, Sample]:
    """``run()`` and ``python -c "import click"`` timed in turn, ``runs`` times each (after one
    untimed run of each): their median wall times (and the requests the proxy saw per run
    of ``run``), taken side by side so that what the machine does meanwhile (the local Hub,
    other work) weighs on both alike. A start-up goal is the ratio of the two."""
    run_click()
    run()
    mine, click, counts = [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        run_click()
        click.append(time.perf_counter() - start)
        if proxy:
            proxy.reset_counts()
        start = time.perf_counter()
        run()
        mine.append(time.perf_counter() - start)
        if proxy:
            counts.append(proxy.total_requests())
    requests = round(statistics.median(counts)) if counts else None
    return Sample(statistics.median(mine), requests), Sample(statistics.median(click))


def help_row(ours: Tool, theirs: Tool, click: Sample, runs: int, goals: list[Goal]) -> Row:
    mine, click = against_click(lambda: ours.run("--help"), runs=runs)
    other = timed(lambda: theirs.run("--help"), runs=runs)
    # Under load both grow alike, so the goal is judged against `import click` measured beside it.
    goals.append(goal("`kernels --help` / `import click`", mine.seconds / click.seconds, HELP_GOAL))
    return (
        "`kernels --help`", mine.show(), other.show(), ratio(mine, other),
        f"<= {HELP_GOAL}x `import click` ({click.seconds:.3f} s now): {mine.seconds / click.seconds:.2f}x click, "
        f"{_met(mine.seconds <= HELP_GOAL * click.seconds)}",
    )  # fmt: skip


# The kinds of request a lock makes, as tests.fixtures.faultproxy.by_kind names them.
HUB_KINDS = ("refs", "tree", "slash", "file")
HUB_KIND_NAMES = {"refs": "refs", "tree": "listing", "slash": "slash redirect", "file": "metadata.json"}


@dataclass(frozen=True)
class HubSpeed:
    """Milliseconds the local Hub takes per request of each kind a lock makes (no proxy, no
    latency), one at a time and all of a kind at once: equal means it serves requests one
    after another, so N requests cost N times that however many are in flight."""

    one: dict[str, float]
    together: dict[str, float]

    def show(self) -> str:
        return "; ".join(
            f"{HUB_KIND_NAMES[kind]} {self.one[kind]:.1f} ms one at a time, {self.together[kind]:.1f} ms together"
            for kind in HUB_KINDS
        )


def hub_speed(url: str, names: list[str], passes: int = 3) -> HubSpeed:
    """:class:`HubSpeed` of the local Hub at ``url`` for ``names``' refs, the listing of their
    main commit (asked as ``tree/<commit>/``), their ``metadata.json`` files, and olah's
    redirect answer to a listing asked without the trailing slash."""
    import httpx2

    with httpx2.Client(limits=httpx2.Limits(max_connections=100)) as client, ThreadPoolExecutor(64) as pool:
        main = {}
        for name in names:
            refs = client.get(f"{url}/api/kernels/{name}/refs").raise_for_status().json()
            main[name] = next(b["targetCommit"] for b in refs["branches"] if b["name"] == "main")
        listing = {name: f"{url}/api/kernels/{name}/tree/{main[name]}" for name in names}
        query = "?recursive=true&expand=false"
        files = [
            f"{url}/kernels/{name}/resolve/{main[name]}/{entry['path']}"
            for name in names
            for entry in client.get(listing[name] + "/" + query).raise_for_status().json()
            if entry["path"].endswith("/metadata.json")
        ]
        urls = {
            "refs": [f"{url}/api/kernels/{name}/refs" for name in names],
            "tree": [listing[name] + "/" + query for name in names],
            "slash": [listing[name] + query for name in names],  # answered with the redirect only
            "file": files,
        }

        def get(path: str) -> None:
            if client.get(path, follow_redirects=False).status_code >= 400:
                raise SystemExit(f"the local Hub refused {path}")

        def per_request(paths: list[str], together: bool) -> float:
            samples = []
            for _ in range(passes):
                start = time.perf_counter()
                if together:
                    list(pool.map(get, paths))
                else:
                    for path in paths:
                        get(path)
                samples.append((time.perf_counter() - start) / len(paths) * 1000)
            return statistics.median(samples)

        for paths in urls.values():
            per_request(paths, True)  # warm
        one = {kind: per_request(paths, False) for kind, paths in urls.items()}
        together = {kind: per_request(paths, True) for kind, paths in urls.items()}
        return HubSpeed(one, together)


def lock_project_dir(root: Path, tool: Tool, names: list[str]) -> Path:
    """A project asking for ``names``, each as ``= 1`` (the form kernels 0.16 reads), for ``tool``."""
    deps = "\n".join(f'"{name}" = 1' for name in names)
    # The local Hub has no organizations API: kernel-deps' project trusts the sample
    # kernels' publisher itself, as a user of such a mirror would; kernels 0.16 checks none.
    trusted = (names[0].split("/")[0],) if tool.slug == "ours" else ()
    return write_project(root / f"lock-{len(names)}-{tool.slug}", deps, name="bench", trusted=trusted)


def lock_rows(
    ours: Tool, theirs: Tool, root: Path, names: list[str], proxy: FaultProxy, runs: int, latency: float, goals: list[Goal],
    hub_pid: int | None = None,
) -> list[Row]:
    """Lock 3 and N kernels with no prior lock, each tool on an empty cache every run (the
    first lock on a machine); kernel-deps also with the cache an earlier lock left (a
    relock: the metadata.json files it read are kept there)."""
    proxy.latency = latency
    try:
        found: dict[int, list[Sample]] = {}
        for count in (SMALL, len(names)):
            found[count] = []
            for tool, keep_cache in ((ours, False), (ours, True), (theirs, False)):
                project = lock_project_dir(root, tool, names[:count])

                def fresh(project: Path = project, tool: Tool = tool, keep_cache: bool = keep_cache) -> None:
                    (project / "kernels.lock").unlink(missing_ok=True)
                    if not keep_cache:
                        shutil.rmtree(tool.env["HF_HUB_CACHE"], ignore_errors=True)

                found[count].append(timed(lambda: tool.run("lock", str(project)), runs=runs, proxy=proxy, before=fresh,
                                          hub_pid=hub_pid))  # fmt: skip
        # The same relock with no latency at all: what is left is the work of the Hub, the
        # proxy and the client, which no amount of concurrency takes away.
        proxy.latency = 0.0
        project = lock_project_dir(root, ours, names)
        no_latency = timed(lambda: ours.run("lock", str(project)), runs=runs, proxy=proxy,
                           before=lambda: (project / "kernels.lock").unlink(missing_ok=True))  # fmt: skip
    finally:
        proxy.latency = 0.0
    (small, small_kept, small_016), (large, large_kept, large_016) = found[SMALL], found[len(names)]
    ms = f"{latency * 1000:.0f} ms per request"

    def third(mine: Sample) -> str:
        return f"<= 1/3 of kernels 0.16 ({small_016.seconds / 3:.2f} s): {mine.seconds / small_016.seconds:.2f} of it, " + _met(
            mine.seconds * 3 <= small_016.seconds
        )

    def scale(mine: Sample, base: Sample) -> str:
        return (
            f"<= {LOCK_SCALE_GOAL}x the {SMALL}-kernel time ({LOCK_SCALE_GOAL * base.seconds:.2f} s): "
            f"{mine.seconds / base.seconds:.2f}x, {_met(mine.seconds <= LOCK_SCALE_GOAL * base.seconds)}; "
            f"requests <= kernels 0.16's: {_met(mine.requests <= large_016.requests)}"
        )

    goals.append(goal(f"lock {len(names)} independent kernels / lock {SMALL} (empty cache, {ms})",
                      large.seconds / small.seconds, LOCK_SCALE_GOAL))  # fmt: skip
    # Derived, never instead of the goal's figure: the local Hub's own serving of the large
    # lock's extra requests (its CPU time, one thread) taken out of the large lock's time.
    if large.hub_cpu is not None and small.hub_cpu is not None:
        extra = large.hub_cpu - small.hub_cpu
        goals.append((
            f"(derived) the same with the local Hub's serving of the {large.requests - small.requests} extra requests "
            f"taken out: (lock {len(names)} - {extra:.2f} s) / lock {SMALL}",
            f"{(large.seconds - extra) / small.seconds:.2f}x",
            f"not judged: lock {len(names)} - lock {SMALL} = {large.seconds - small.seconds:.2f} s; olah and its git "
            f"processes spent {large.hub_cpu:.2f} s of CPU in a lock of {len(names)}, {small.hub_cpu:.2f} s in one of "
            f"{SMALL}",
        ))  # fmt: skip
    goals.append((f"Hub requests to lock {len(names)} kernels (empty cache)", str(large.requests),
                  f"<= {large_016.requests} (kernels 0.16's): {_met(large.requests <= large_016.requests)}"))  # fmt: skip

    return [
        (f"`kernels lock`, {SMALL} kernels, {ms}, empty cache", small.show(), small_016.show(), ratio(small, small_016), third(small)),
        (f"`kernels lock`, {SMALL} kernels, {ms}, cache of an earlier lock", small_kept.show(), small_016.show(),
         ratio(small_kept, small_016), third(small_kept)),
        (f"`kernels lock`, {len(names)} kernels, {ms}, empty cache", large.show(), large_016.show(), ratio(large, large_016),
         scale(large, small)),
        (f"`kernels lock`, {len(names)} kernels, {ms}, cache of an earlier lock", large_kept.show(), large_016.show(),
         ratio(large_kept, large_016), scale(large_kept, small_kept)),
        ("(the limit) the same, no latency added", no_latency.show(), "", "",
         f"{no_latency.seconds / large_kept.seconds:.2f} of the time with {ms}: the rest is not waiting on round trips"),
    ]  # fmt: skip


def download_row(
    ours: Tool, theirs: Tool, root: Path, names: list[str], proxy: FaultProxy, runs: int, click: Sample, goals: list[Goal]
) -> Row:
    warm = []
    for tool in (ours, theirs):
        project = lock_project_dir(root, tool, names[:SMALL])
        tool.run("lock", str(project))
        tool.run("download", str(project))  # cold: fills this tool's own cache
        warm_download = lambda: tool.run("download", str(project))  # noqa: E731
        warm.append(against_click(warm_download, runs=runs, proxy=proxy) if tool is ours else timed(warm_download,
                    runs=runs, proxy=proxy))  # fmt: skip
    (mine, click), other = warm
    goals.append(goal(f"warm `kernels download`, {SMALL} kernels / `import click`", mine.seconds / click.seconds,
                      DOWNLOAD_GOAL))  # fmt: skip
    ok = mine.seconds <= 0.30 and mine.requests == 0 and mine.seconds < other.seconds
    return (
        f"warm `kernels download .`, {SMALL} kernels cached", mine.show(), other.show(), ratio(mine, other),
        f"<= 0.30 s, 0 requests, faster than kernels 0.16: {_met(ok)}",
    )  # fmt: skip


def verify_row(
    ours: Tool, root: Path, names: list[str], proxy: FaultProxy, click: Sample, runs: int, goals: list[Goal]
) -> Row:
    project = lock_project_dir(root, ours, names[:SMALL])
    if not (project / "kernels.lock").exists():
        ours.run("lock", str(project))
        ours.run("download", str(project))
    offline = {"HF_HUB_OFFLINE": "1"}
    mine, click = against_click(lambda: ours.run("verify", str(project), extra_env=offline), runs=runs, proxy=proxy)
    goals.append(goal(f"offline `kernels verify`, {SMALL} small kernels / `import click`", mine.seconds / click.seconds,
                      VERIFY_GOAL))  # fmt: skip
    return (
        f"offline `kernels verify .`, {SMALL} small kernels", mine.show(), "(none)", "",
        f"<= 0.15 s: {_met(mine.seconds <= 0.15)} ({mine.seconds / click.seconds:.2f}x `import click`)",
    )  # fmt: skip


def hashing_row(files: int, mb: int) -> tuple[Row, float]:
    hashing = measure_hashing(files, mb, repeat=5)
    serial, parallel = hashing.serial_ratio, hashing.parallel_ratio
    two_cores = _met(parallel >= 1.6) if hashing.threads >= 2 else "n/a (1 usable core)"
    row = (
        f"`verify` hashing, {files} x {mb} MB", f"{serial:.2f}x (1 thread), {parallel:.2f}x ({hashing.threads} threads)",
        "(none)", "", f">= 0.9x one core: {_met(serial >= 0.9)}; >= 1.6x on 2 cores: {two_cores}",
    )  # fmt: skip
    return row, hashing.baseline_mb_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--kernels", type=int, default=20, help="kernels in the large lock rows (lock, lock-layer, signed-lock)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds added to every request while locking")
    parser.add_argument("--hash-files", type=int, default=4)
    parser.add_argument("--hash-mb", type=int, default=64)
    parser.add_argument("--rows", default=",".join(ROWS), help=f"which rows to measure, of {','.join(ROWS)}")
    args = parser.parse_args()
    wanted = set(args.rows.split(","))
    if wanted - set(ROWS):
        parser.error(f"--rows: unknown {','.join(sorted(wanted - set(ROWS)))}; pick from {','.join(ROWS)}")
    runs = args.runs
    rows: list[Row] = []
    goals: list[Goal] = []
    tables: list[tuple[tuple[str, ...], list[tuple[str, ...]], list[str]]] = []  # header, rows, lines after
    baseline = None
    load_before = os.getloadavg()[0]
    speed = None

    with tempfile.TemporaryDirectory(prefix="kernel-deps-compare-") as tmp:
        root = Path(tmp)
        large = max(args.kernels, SMALL)
        names = build_kernels(root / "mirrors", large if wanted & {"lock", "lock-layer"} else SMALL)
        signed = SignedKernels(root, large if "signed-lock" in wanted else WARM) if wanted & {"signed", "signed-lock"} else None
        if "waves" in wanted:
            build_wave_kernels(root / "mirrors")
        with contextlib.ExitStack() as servers:
            hub = servers.enter_context(LocalHub(root / "mirrors", root / "olah"))
            proxy = servers.enter_context(FaultProxy(hub.url))
            # client -> its own fault proxy -> the concurrent caching layer -> olah
            layer = servers.enter_context(CachingHub(hub.url))
            # Each client connection forwarded over one connection to the layer, kept: no
            # connection and no layer thread per request, on the cores the client uses too.
            fast = servers.enter_context(FaultProxy(layer.url, keep_upstream=True))
            ours, theirs = tools(root, proxy.url)
            print(f"kernel-deps under test: {ours_location(ours)}", flush=True)
            click = import_click(runs)
            speed = hub_speed(hub.url, names)
            if "help" in wanted:
                rows.append(help_row(ours, theirs, click, runs, goals))
            if "lock" in wanted:
                rows += lock_rows(ours, theirs, root, names, proxy, runs, args.latency, goals, hub.process.pid)
            if "download" in wanted:
                rows.append(download_row(ours, theirs, root, names, proxy, runs, click, goals))
            if "verify" in wanted:
                rows.append(verify_row(ours, root, names, proxy, click, runs, goals))
            if "lock-layer" in wanted:
                projects = {count: lock_project_dir(root / "layer", ours, names[:count]) for count in (SMALL, large)}
                found, note = lock_layer_rows(ours, root / "layer", projects, proxy, fast, layer, runs, args.latency, goals)
                tables.append(((f"lock of {large} against lock of {SMALL}", f"lock {large}", f"lock {SMALL}", "ratio", "goal"),
                               found, [note]))  # fmt: skip
            if "signed" in wanted:
                found, note = warm_rows(signed, root / "signed", ours, fast, layer, runs, goals)
                tables.append((SIGNED_HEADER, found, [note]))
            if "signed-lock" in wanted:
                found, note = signed_lock_row(signed, root / "signed", ours, fast, layer, runs, large, args.latency, goals)
                tables.append((SIGNED_HEADER, found, [note]))
            if "waves" in wanted:
                found, note, trace = waves_rows(ours, root, fast, layer, runs, goals)
                tables.append((("round trips", f"lock at {WAVE_LATENCY * 1000:.0f} ms", "lock at 0 ms", "round trips", "goal"),
                               found, [note, "", f"trace of one lock at {WAVE_LATENCY * 1000:.0f} ms per request:", *trace]))  # fmt: skip
    if "hashing" in wanted:  # in this process, no Hub
        row, baseline = hashing_row(args.hash_files, args.hash_mb)
        rows.append(row)

    hashing = f"; hashing against one-core hashlib sha256 ({baseline:.0f} MB/s)" if baseline else ""
    print(f"kernel-deps vs kernels 0.16: median of {runs} runs; {os.cpu_count()} cores{hashing}")
    print(f"load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; `import click` {click.seconds:.3f} s")
    if speed:
        print(f"local Hub (olah), per request: {speed.show()}")
    if rows:
        print_table(("what", "kernel-deps", "kernels 0.16", "kernel-deps against 0.16", "goal"), rows)
    for header, found, after in tables:
        print()
        print_table(header, found)
        for line in after:
            print(line)
    if goals:
        print()
        print_table((f"measure (this run; {args.latency * 1000:.0f} ms per Hub request while locking)", "figure", "goal"), goals)


def ours_location(ours: Tool) -> str:
    """Where the kernel-deps that ``ours`` runs is imported from (an installed wheel's folder
    when it is first on PYTHONPATH), and whether its bytecode is written."""
    probe = "import kernel_deps, sys; print(kernel_deps.__file__, 'bytecode written' if not sys.dont_write_bytecode else 'PYTHONDONTWRITEBYTECODE set')"
    python = Path(sys.executable)
    return subprocess.run([str(python), "-c", probe], env=ours.env, capture_output=True, text=True, check=True).stdout.strip()


if __name__ == "__main__":
    main()

"""The time budget is a promise: per command, kept while streaming, while retrying and
while waiting for another process; and every failure is one line. Real `kernels`
processes against the local Hub, the fault proxy and servers that misbehave."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from filelock import FileLock

from kernel_deps.cache import store as cache
from kernel_deps.commands.download import download_project
from kernel_deps.core.errors import HubUnavailableError
from kernel_deps.hub.client import HubClient
from kernel_deps.lock.read import read_lock
from tests.fixtures.builder import CPU_VARIANT
from tests.fixtures.downloads import add_repos, all_verified, snapshot_entries
from tests.fixtures.projects import write_project
from tests.fixtures.servers import SilentServer
from tests.fixtures.processes import KERNELS


def kernels(*args: str, env: dict[str, str], timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    """Run the real console script; returns the result and how long it took."""
    start = time.monotonic()
    result = subprocess.run([KERNELS, *args], env=env, capture_output=True, text=True, timeout=timeout)
    return result, time.monotonic() - start


def env_for(url: str, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "KERNELS_HUB_BUDGET")}
    return {**base, "HF_ENDPOINT": url, "HF_HUB_DISABLE_TELEMETRY": "1", **extra}


# -- 1. a Hub that drips bytes cannot stretch a command past its budget ------------------


def test_a_dripping_hub_cannot_keep_a_download_past_the_budget(hub_env, proxy, tmp_path) -> None:
    project = write_project(tmp_path / "drip", add_repos(hub_env, "drip", kernels=1), locked=True)
    proxy.only_paths = "/resolve/"
    proxy.drip = 0.5  # every byte arrives well within the read timeout
    # The same process start-up (imports, system detection) without touching the Hub.
    _, startup = kernels("download", str(project), env=env_for(proxy.url, HF_HUB_OFFLINE="1"))
    result, elapsed = kernels("download", str(project), env=env_for(proxy.url, KERNELS_HUB_BUDGET="3"))
    assert result.returncode == 1, result.stderr
    *progress, error = result.stderr.strip().splitlines()
    assert all(line.startswith("kernels: ") for line in progress), result.stderr  # how far it got, then one error
    assert error.startswith(f"error: kernels-test/faults-drip-0 build/{CPU_VARIANT}/"), error
    assert "the 3 s budget is spent" in error and "KERNELS_HUB_BUDGET" in error
    assert elapsed < startup + 3 + 3, (elapsed, startup)  # start-up, the budget, and a little
    assert snapshot_entries(cache.cache_root()) == []


def test_a_stall_mid_body_near_the_deadline_is_cut_at_the_deadline(hub_env, proxy, tmp_path) -> None:
    project = write_project(tmp_path / "stall", add_repos(hub_env, "stall", kernels=1), locked=True)
    proxy.only_paths = "/resolve/"
    proxy.stall = 60  # half a body, then nothing for a minute
    hub = HubClient(endpoint=proxy.url, budget=2, timeout=30, backoff=0.01)
    start = time.monotonic()
    with pytest.raises(HubUnavailableError, match="the 2 s budget is spent") as info:
        download_project(project, hub=hub)
    elapsed = time.monotonic() - start
    assert str(info.value).startswith(f"kernels-test/faults-stall-0 build/{CPU_VARIANT}/")
    assert elapsed < 2 + 5, elapsed  # not the 30 s read timeout


# -- 2. the budget belongs to one operation, not to the client ----------------------------


def test_a_client_held_past_its_budget_still_retries(hub_env, proxy) -> None:
    client = HubClient(endpoint=proxy.url, budget=1, backoff=0.01)
    time.sleep(1.5)
    proxy.error_schedule = [503]
    assert client.list_refs("kernels-test/rotary").repo_type == "kernel"
    assert proxy.counts[("GET", "/api/kernels/kernels-test/rotary/refs")] == 2


def test_each_download_gets_the_whole_budget(hub_env, proxy, tmp_path) -> None:
    project = write_project(tmp_path / "later", add_repos(hub_env, "later", kernels=1), locked=True)
    hub = HubClient(endpoint=proxy.url, budget=2, backoff=0.01)
    hub.list_refs("kernels-test/faults-later-0")
    time.sleep(2.5)  # a library held the client for a while
    proxy.only_paths = "/resolve/"
    proxy.error_schedule = [503, 503]
    report = download_project(project, all_variants=True, hub=hub)
    assert len(report.fetched) == 3 and all_verified(project)


def test_one_operation_shares_one_deadline() -> None:
    with SilentServer() as server:
        hub = HubClient(endpoint=server.url, budget=2, backoff=0.01)
        with hub.transport.operation():
            start = time.monotonic()
            with pytest.raises(HubUnavailableError, match="the 2 s budget is spent"):
                hub.list_refs("kernels-test/a")
            first = time.monotonic() - start
            with pytest.raises(HubUnavailableError, match="the 2 s budget is spent"):
                hub.list_refs("kernels-test/b")
            both = time.monotonic() - start
        accepted = server.accepted
    assert first < 2 + 2 and both - first < 0.5, (first, both)
    assert accepted >= 1


@pytest.mark.parametrize("value", ["nan", "-1", "inf", "-inf", "abc"])
def test_a_budget_that_is_not_a_finite_number_of_seconds_is_bad_input(hub_env, value) -> None:
    result, _ = kernels("versions", "kernels-test/rotary", env=env_for(hub_env.url, KERNELS_HUB_BUDGET=value))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: KERNELS_HUB_BUDGET={value!r}"), result.stderr


# -- 3. waiting for another process's download of the same variant ------------------------


def variant_lock(project: Path) -> FileLock:
    kernel = read_lock(project / "kernels.lock", purpose="use").lock.kernels[0]
    repo = cache.repo_dir(kernel.repo_id, "kernel", cache.cache_root())
    path = cache.cache_root() / ".locks" / repo.name / f"{kernel.sha}.{CPU_VARIANT}.kernel-deps.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path))


def test_waiting_for_another_download_is_said_and_bounded_by_the_budget(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "held", add_repos(hub_env, "held", kernels=1), locked=True)
    with variant_lock(project):
        result, elapsed = kernels("download", str(project), env=env_for(hub_env.url, KERNELS_HUB_BUDGET="4"))
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(f"waiting for another kernels download of kernels-test/faults-held-0 {CPU_VARIANT}")
    assert len(lines) == 2 and lines[1].startswith(f"error: kernels-test/faults-held-0 {CPU_VARIANT}: "), lines
    assert "the 4 s budget" in lines[1] and "KERNELS_HUB_BUDGET" in lines[1]
    assert 4 <= elapsed < 4 + 6, elapsed


def test_a_download_that_waited_for_another_one_completes(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "waits", add_repos(hub_env, "waits", kernels=1), locked=True)
    lock = variant_lock(project)
    lock.acquire()
    process = subprocess.Popen(
        [KERNELS, "download", str(project)], env=env_for(hub_env.url), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    watchdog = threading.Timer(60, process.kill)
    watchdog.start()
    try:
        first = process.stderr.readline()  # written while this test still holds the lock
        lock.release()
        out, rest = process.communicate()
    finally:
        watchdog.cancel()
    assert first.startswith(f"waiting for another kernels download of kernels-test/faults-waits-0 {CPU_VARIANT}")
    assert process.returncode == 0, rest
    verify, _ = kernels("verify", "--require-cached", str(project), env=env_for(hub_env.url))
    assert verify.returncode == 0, verify.stdout


# -- 4. malformed Hub settings: commands without the Hub work, the others exit 2 ----------


BAD_HUB_ENV = [
    ("HF_ENDPOINT", "http://[::1"),
    ("HF_ENDPOINT", "http://127.0.0.1:99999"),
    ("HF_ENDPOINT", "ftp://127.0.0.1:8080"),
    ("HF_HUB_ETAG_TIMEOUT", "abc"),
    ("HF_HUB_DOWNLOAD_TIMEOUT", "soon"),
]


@pytest.mark.parametrize(("name", "value"), BAD_HUB_ENV)
def test_a_malformed_hub_variable_breaks_only_what_needs_the_hub(hub_env, tmp_path, name, value) -> None:
    project = write_project(tmp_path / "badenv", add_repos(hub_env, "badenv", kernels=1), locked=True)
    env = {**env_for(hub_env.url), name: value}

    version, _ = kernels("--version", env=env)
    assert version.returncode == 0 and "kernel-deps" in version.stdout, version.stderr
    verify, _ = kernels("verify", str(project), env=env)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    offline, _ = kernels("download", str(project), env={**env, "HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 1 and "HF_HUB_OFFLINE is set" in offline.stderr, offline.stderr

    for args in (("versions", "kernels-test/rotary"), ("lock", str(project)), ("download", str(project))):
        result, _ = kernels(*args, env=env)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, (args, result.stderr)
        assert len(lines) == 1 and lines[0].startswith(f"error: {name}="), (args, result.stderr)


# -- 5. a killed download leaves no partial files behind ----------------------------------


def part_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.part"))


def test_a_killed_download_is_resumed_by_the_next_run(hub_env, proxy, tmp_path) -> None:
    project = write_project(tmp_path / "resume", add_repos(hub_env, "resume", lfs_size=4 << 20, kernels=1), locked=True)
    kernel = read_lock(project / "kernels.lock", purpose="use").lock.kernels[0]
    root = cache.cache_root()
    env = env_for(proxy.url)
    proxy.only_paths = "/resolve/"
    proxy.stall = 60  # every file stops part-way (after half its body, or its first chunk)
    process = subprocess.Popen(
        [KERNELS, "download", "--quiet", str(project)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(1 for p in part_files(root) if p.stat().st_size) < 5:
        time.sleep(0.1)  # every file of the variant has arrived in part
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    kept = sum(p.stat().st_size for p in part_files(root))
    assert kept > 0, "the download was not caught mid-file"
    proxy.clear_faults()
    proxy.reset_counts()

    result, _ = kernels("download", str(project), env=env)
    assert result.returncode == 0, result.stderr
    summary = result.stdout.strip().splitlines()[-1]
    fetched = int(summary.rsplit(", ", 1)[1].split()[0].replace(",", ""))
    folder = cache.variant_dir(cache.repo_dir(kernel.repo_id), kernel.sha, CPU_VARIANT)
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    # What arrived before the kill is resumed with a Range request where the Hub honours
    # one; a file the Hub sends whole again starts over cleanly.
    assert total - kept <= fetched <= total, (fetched, total, kept)
    assert part_files(root) == []
    verify, _ = kernels("verify", "--require-cached", str(project), env=env)
    assert verify.returncode == 0, verify.stdout


def test_old_partial_downloads_are_removed(hub_env, tmp_path) -> None:
    project = write_project(tmp_path / "stale", add_repos(hub_env, "stale", kernels=1), locked=True)
    kernel = read_lock(project / "kernels.lock", purpose="use").lock.kernels[0]
    tmp = cache.repo_dir(kernel.repo_id) / ".kernel-deps" / "tmp"
    tmp.mkdir(parents=True)
    old = tmp / ("0" * 64 + ".1a2b3c4d5e6f.part")
    old.write_bytes(b"x" * 100)
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    result, _ = kernels("download", str(project), env=env_for(hub_env.url))
    assert result.returncode == 0, result.stderr
    assert part_files(cache.cache_root()) == []

"""Ctrl-C at any moment ends a command with one line and exit code 130, never a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from kernel_deps.cache import store as cache
from tests.fixtures.builder import CPU_VARIANT, KernelRepo, Release
from tests.fixtures.processes import KERNELS, sigint_as_in_a_terminal
from tests.fixtures.projects import write_project


def interrupt(args: list[str], endpoint: str, *, after: float = 0.0, until=None) -> tuple[int, str, float]:
    """Start ``kernels ARGS``, send SIGINT ``after`` seconds (or once ``until()`` is true),
    and return its exit code, its stderr and the seconds it took to end after the signal."""
    env = {**os.environ, "HF_ENDPOINT": endpoint}
    proc = subprocess.Popen([KERNELS, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=sigint_as_in_a_terminal)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        time.sleep(after)
        while until is not None and not until():
            assert proc.poll() is None and time.monotonic() < deadline, "the command ended before the interrupt"
            time.sleep(0.05)
        assert proc.poll() is None, "the command ended before the interrupt"
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=30)
        return proc.returncode, err, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


# 0.3 s: the command is still importing kernel_deps, click and huggingface_hub; 1-4 s: it
# waits on a Hub that answers after a minute.
@pytest.mark.parametrize("after", [0.3, 1.0, 4.0])
def test_ctrl_c_during_start_up_or_a_hub_call_ends_with_one_line(hub_env, proxy, tmp_path, after) -> None:
    app = write_project(tmp_path / "app", '"kernels-test/rotary" = ">=1,<2"')
    proxy.latency = 60.0
    code, err, took = interrupt(["lock", str(app)], proxy.url, after=after)
    assert (code, err) == (130, "interrupted\n")
    assert took < 10
    assert not (app / "kernels.lock").exists()


def test_ctrl_c_stops_a_download_in_flight_promptly(hub_env, proxy, tmp_path) -> None:
    repo_id = "kernels-test/interrupt-download"
    hub_env.add_repo(KernelRepo(repo_id, (Release("1.0.0", variants=(CPU_VARIANT,), lfs_size=1 << 20),)))
    app = write_project(tmp_path / "app", f'"{repo_id}" = ">=1"', locked=True)
    proxy.only_paths = "/resolve/"
    proxy.stall = 120.0  # every file stops halfway for two minutes

    def stalled() -> bool:
        return any(kind == "stall" for kind, _ in list(proxy.faults))

    code, err, took = interrupt(["download", str(app)], proxy.url, until=stalled)
    assert (code, err) == (130, "interrupted\n")
    assert took < 10  # the worker threads stuck on the Hub do not keep the process alive
    root = cache.cache_root()
    assert not root.exists() or not list(root.glob("*/snapshots/*/build/*"))

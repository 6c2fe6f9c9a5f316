"""core.filelocks.HostLock: one holder at a time, naming itself, with flock and, where the
file system refuses flock, by exclusive creation of <lock>.held."""

from __future__ import annotations

import os
import threading
from contextlib import nullcontext

import pytest

from kernel_deps.core.filelocks import HELD_SUFFIX, HostLock, acquire_within
from tests.fixtures.flockless import refusing_flock

HOST = os.uname().nodename


@pytest.mark.parametrize("flock", [True, False], ids=["flock", "no-flock"])
def test_one_holder_at_a_time_and_the_holder_is_named(tmp_path, flock) -> None:
    path = tmp_path / "variant.lock"
    with refusing_flock(tmp_path) if not flock else nullcontext():
        first, second = HostLock(path, stale_after=60), HostLock(path, stale_after=60)
        assert first.try_acquire()
        assert not second.try_acquire()
        assert second.holder() == f"pid {os.getpid()} on host {HOST}"
        assert (tmp_path / f"variant.lock{HELD_SUFFIX}").exists() is not flock
        first.release()
        assert second.try_acquire()
        second.release()
    assert not (tmp_path / f"variant.lock{HELD_SUFFIX}").exists()


@pytest.mark.parametrize("flock", [True, False], ids=["flock", "no-flock"])
def test_a_waiter_gets_the_lock_once_it_is_let_go_and_not_before(tmp_path, flock) -> None:
    path = tmp_path / "variant.lock"
    with refusing_flock(tmp_path) if not flock else nullcontext():
        holder = HostLock(path, stale_after=60)
        assert holder.try_acquire()
        timer = threading.Timer(0.5, holder.release)
        timer.start()
        waited = []
        waiter = HostLock(path, stale_after=60)
        assert acquire_within(waiter, lambda: 10.0, lambda: waited.append(True))
        timer.join()
        assert waited == []  # free within the notice time: nothing told
        waiter.release()
        told = []
        assert holder.try_acquire()
        assert not acquire_within(HostLock(path, stale_after=60), lambda: 2.2, lambda: told.append(True))
        assert told == [True]
        holder.release()


def test_a_broken_lock_s_first_holder_does_not_remove_its_successor_s(tmp_path) -> None:
    path = tmp_path / "variant.lock"
    marker = tmp_path / f"variant.lock{HELD_SUFFIX}"
    with refusing_flock(tmp_path):
        slow = HostLock(path, stale_after=0)
        assert slow.try_acquire()
        marker.write_text("node-9 77 0\n")  # broken and taken by another host meanwhile
        slow.release()
        assert marker.read_text() == "node-9 77 0\n"
        other = HostLock(path, stale_after=3600)
        assert not other.try_acquire()  # another host's, younger than stale_after: held
        assert other.holder() == "pid 77 on host node-9"


def test_a_holder_record_that_is_not_one_names_no_holder(tmp_path) -> None:
    path = tmp_path / "variant.lock"
    with refusing_flock(tmp_path):
        (tmp_path / f"variant.lock{HELD_SUFFIX}").write_bytes(b"\xff" * 4096)
        lock = HostLock(path, stale_after=3600)
        assert not lock.try_acquire()
        assert lock.holder() is None

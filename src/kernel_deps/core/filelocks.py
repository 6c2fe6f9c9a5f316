"""Waiting for a file lock another process holds: quietly for a moment, then told, until
the operation's time is spent. The download of a variant and an edit of a project wait
this one way."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from kernel_deps.core.settings import LOCK_NOTICE_SECONDS

if TYPE_CHECKING:
    from filelock import BaseFileLock


def acquire_within(lock: BaseFileLock, time_left: Callable[[], float], on_wait: Callable[[], None]) -> bool:
    """Acquire ``lock``. When it is not free within LOCK_NOTICE_SECONDS, ``on_wait()`` is
    called once and the wait goes on while ``time_left()`` lasts. False (the lock not held)
    when the time is spent first."""
    from filelock import Timeout

    try:
        lock.acquire(timeout=max(min(LOCK_NOTICE_SECONDS, time_left()), 0))
        return True
    except Timeout:
        on_wait()
    try:
        lock.acquire(timeout=max(time_left(), 0))
        return True
    except Timeout:
        return False

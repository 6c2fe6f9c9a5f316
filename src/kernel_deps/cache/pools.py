"""Thread pools that never hold a command back after an interrupt.

``with ThreadPoolExecutor()`` waits for every running task when the block ends, also
when it ends by an exception: after a Ctrl-C, a download in flight would keep the
command alive until its files finish. :func:`worker_pool` waits only when the block
succeeds; on any exception it cancels what has not started and returns at once.

:func:`shared_map` runs short CPU-bound tasks (hashing files) on one pool shared by the
whole process, so variants checked at once share the cores instead of each starting
threads of its own. Its tasks never wait on other tasks, so any thread may call it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # imported when a pool starts: an offline check of small files may start none
    from concurrent.futures import ThreadPoolExecutor

T = TypeVar("T")
R = TypeVar("R")


@contextmanager
def worker_pool(max_workers: int, name: str = "kernel-deps") -> Iterator[ThreadPoolExecutor]:
    """A thread pool, joined when the block succeeds and abandoned when it raises."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name)
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


_shared: ThreadPoolExecutor | None = None
_shared_size = 0
_shared_lock = threading.Lock()


def shared_map(fn: Callable[[T], R], items: Iterable[T], threads: int) -> list[R]:
    """``[fn(item) for item in items]``, run on up to ``threads`` shared threads.

    Results come in the order of ``items``, and the first exception in that order is
    raised, as the plain loop would; the tasks not yet started are then cancelled.
    With one thread or one item, everything runs in the caller.
    """
    items = list(items)
    if threads <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    pool = _shared_pool(threads)
    futures = [pool.submit(fn, item) for item in items]
    try:
        return [future.result() for future in futures]
    except BaseException:
        for future in futures:
            future.cancel()
        raise


def _shared_pool(threads: int) -> ThreadPoolExecutor:
    from concurrent.futures import ThreadPoolExecutor

    global _shared, _shared_size
    with _shared_lock:
        if _shared is None or _shared_size != threads:
            if _shared is not None:
                _shared.shutdown(wait=False)  # its queued tasks still run; new ones go to the new pool
            _shared = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kernel-deps-hash")
            _shared_size = threads
        return _shared


def _forget_shared_pool() -> None:
    """In a forked child the pool's threads do not exist: start a new pool on first use."""
    global _shared, _shared_size, _shared_lock
    _shared, _shared_size, _shared_lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_shared_pool)

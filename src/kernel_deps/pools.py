"""Thread pools that never hold a command back after an interrupt.

``with ThreadPoolExecutor()`` waits for every running task when the block ends, also
when it ends by an exception: after a Ctrl-C, a download in flight would keep the
command alive until its files finish. :func:`worker_pool` waits only when the block
succeeds; on any exception it cancels what has not started and returns at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager


@contextmanager
def worker_pool(max_workers: int, name: str = "kernel-deps") -> Iterator[ThreadPoolExecutor]:
    """A thread pool, joined when the block succeeds and abandoned when it raises."""
    pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name)
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)

"""Answers computed once per run and shared between threads: the memo of :class:`~kernel_deps.hub.index.KernelIndex`.

An answer is asked for (:meth:`RunMemo._once`: the first asker computes it, the others wait
for it, and an error is raised to each), or started in the background
(:meth:`RunMemo.start_once`) and taken when it is there (:meth:`RunMemo.answer_of`). A thread
never waits for an answer that no thread computes: one asked for before a background thread
took it up is computed by the asker.
"""

from __future__ import annotations

import threading
from concurrent.futures import Executor
from typing import Callable, TypeVar

T = TypeVar("T")


class Once:
    """A value computed by exactly one thread; others wait for it."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: object = None
        self.error: BaseException | None = None
        self.compute: Callable[[], object] | None = None  # a started answer no thread has taken up yet


class RunMemo:
    """A per-run memo of answers, keyed by tuples; background answers run on ``calls``."""

    def __init__(self, calls: Executor) -> None:
        self._memo: dict[tuple, Once] = {}
        self._lock = threading.Lock()
        self._background = calls

    def start_once(self, key: tuple, compute: Callable[[], object]) -> None:
        """Compute the answer for ``key`` on a Hub call thread, unless it is known or under
        way; one who asks for it (:meth:`answer_of`) before a thread took it up computes it."""
        with self._lock:
            if key in self._memo:
                return
            slot = self._memo[key] = Once()
            slot.compute = compute
        try:
            self._background.submit(self._claim, slot)
        except RuntimeError:  # closed: left to whoever asks
            pass

    def put(self, key: tuple, value: object) -> None:
        """Record ``value`` as the answer for ``key``, unless one is known or under way."""
        with self._lock:
            if key in self._memo:
                return
            slot = self._memo[key] = Once()
        slot.value = value
        slot.done.set()

    def answer_of(self, key: tuple) -> object:
        """The answer started for ``key`` (waiting for it); None when none was started or it failed."""
        with self._lock:
            slot = self._memo.get(key)
        if slot is None:
            return None
        self._claim(slot)
        slot.done.wait()
        return None if slot.error is not None else slot.value

    def _claim(self, slot: Once) -> None:
        with self._lock:
            compute, slot.compute = slot.compute, None
        if compute is None:
            return
        try:
            slot.value = compute()
        except BaseException as exc:  # noqa: BLE001 - kept; the one who needs it asks again
            slot.error = exc
        finally:
            slot.done.set()

    @staticmethod
    def _quietly(fn: Callable[[T], object], req: T) -> None:
        try:
            fn(req)
        except BaseException:  # noqa: BLE001 - kept in the memo; raised when asked for
            pass

    def _once(self, key: tuple, compute: Callable[[], T]) -> T:
        with self._lock:
            slot = self._memo.get(key)
            owner = slot is None
            if owner:
                slot = self._memo[key] = Once()
        if owner:
            try:
                slot.value = compute()
            except BaseException as exc:  # noqa: BLE001 - re-raised to every asker
                slot.error = exc
            finally:
                slot.done.set()
        else:
            slot.done.wait()
        if slot.error is not None:
            raise slot.error
        return slot.value  # type: ignore[return-value]

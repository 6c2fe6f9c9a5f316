"""The one file lock of kernel-deps, and waiting for one another process holds: quietly for
a moment, then told, until the operation's time is spent.

Every lock in the cache (a variant's download, a partial file's writer, ``kernels cache
prune`` and a refused variant's removal taking them) and a project's edit lock is a
:class:`HostLock`: ``flock`` on the lock file, which then holds its holder's host and pid,
so a wait that gives up says who held it. On a file system where
``flock`` does not work (some NFS mounts, Lustre without ``-o flock``: it fails with
``ENOLCK``, ``EOPNOTSUPP`` or ``ENOSYS``) the lock is taken instead by creating
``<lock file>.held`` exclusively (``O_EXCL``, atomic on those file systems too), with the
holder's host and pid in it; it is removed on release. One left by a process that died is
broken: at once when the holder ran on this host and is gone, else once it is older than
``stale_after`` seconds (a download gives twice its time budget: no command keeps a lock
longer than its budget, and hosts' clocks may disagree: :func:`stale_after`). Which folders lack
``flock`` is found once per process, and said once (``on_note``).
"""

from __future__ import annotations

import errno
import os
import time
from typing import Callable

from kernel_deps.core.settings import BUDGET_ENV, DEFAULT_BUDGET, LOCK_NOTICE_SECONDS, env_seconds

# flock itself is refused by the file system, as opposed to the lock being taken.
NO_FLOCK = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS})
_BUSY = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES})
HELD_SUFFIX = ".held"
# How often a waiter tries again (jittered, so that many waiters do not try in step).
POLL_SECONDS = 0.05
# A holder record is a line of text; more than this is not one.
MAX_HOLDER_BYTES = 512

_flockless: dict[str, str] = {}  # folder -> the error name flock failed with there
_told = False


def stale_after(budget: float | None = None) -> float:
    """After how long a ``.held`` file another host left is broken: twice the time budget
    (``budget``, else ``KERNELS_HUB_BUDGET``'s), as no command holds a lock longer than
    its budget and hosts' clocks may disagree."""
    return 2 * (budget if budget is not None else env_seconds(BUDGET_ENV, DEFAULT_BUDGET))


def _host() -> str:
    return os.uname().nodename or "localhost"


class HostLock:
    """An exclusive lock on ``path`` among processes (and threads), saying who holds it."""

    def __init__(self, path: str | os.PathLike[str], *, stale_after: float,
                 on_note: Callable[[str], None] | None = None) -> None:  # fmt: skip
        self.lock_file = os.fspath(path)
        self.stale_after = stale_after
        self.on_note = on_note
        self._fd: int | None = None
        self._record: bytes | None = None  # what our .held file says, when we hold one

    @property
    def marker(self) -> str:
        """The file whose creation is the lock where ``flock`` does not work."""
        return self.lock_file + HELD_SUFFIX

    def acquire(self, timeout: float) -> bool:
        """Take the lock, trying until ``timeout`` seconds have passed; whether it is held."""
        deadline = time.monotonic() + timeout
        while True:
            if self.try_acquire():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            import random  # a wait only (with bisect and _sha512): not paid by a command that reads

            time.sleep(min(left, POLL_SECONDS * (0.5 + random.random())))

    def try_acquire(self) -> bool:
        """Take the lock if it is free now; whether it is held. OSError for a lock file that
        cannot be opened or made (a read-only cache)."""
        folder = os.path.dirname(self.lock_file) or "."
        if folder not in _flockless:
            import fcntl

            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in _BUSY:
                    return False
                if exc.errno not in NO_FLOCK:
                    raise
                _flockless[folder] = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            else:
                self._fd = fd
                self._write_holder(fd)
                return True
        self._note(folder)
        return self._try_create()

    def release(self) -> None:
        """Let the lock go (the flock file stays, so that every waiter locks the same file)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)  # closing releases the flock
        elif self._record is not None:
            record, self._record = self._record, None
            if _read_small(self.marker) == record:  # never a successor's, had ours been broken
                try:
                    os.unlink(self.marker)
                except FileNotFoundError:
                    pass

    def holds_file_there(self) -> bool:
        """Whether the lock held is on the file now at ``lock_file``, not on one a holder before
        removed as it let go (a lock whose file exists only while held; the edit lock)."""
        if self._fd is None:
            return self._record is not None and _read_small(self.marker) == self._record
        try:
            return os.path.samestat(os.fstat(self._fd), os.lstat(self.lock_file))
        except FileNotFoundError:
            return False

    def holder(self) -> str | None:
        """Who holds the lock, as its holder recorded it (``pid 123 on host node7``), if it says."""
        path = self.marker if os.path.dirname(self.lock_file) in _flockless else self.lock_file
        fields = (_read_small(path) or b"").decode("utf-8", "replace").split()
        if len(fields) < 2 or not fields[1].isdigit():
            return None
        return f"pid {fields[1]} on host {fields[0][:100]}"

    # -- the lock by exclusive creation -----------------------------------------------

    def _try_create(self) -> bool:
        for _ in range(2):  # once more after breaking a stale one
            record = f"{_host()} {os.getpid()} {time.time():.0f}\n".encode()
            try:
                fd = os.open(self.marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
            except FileExistsError:
                if not self._break_if_stale():
                    return False
                continue
            try:
                os.write(fd, record)
            finally:
                os.close(fd)
            self._record = record
            return True
        return False

    def _break_if_stale(self) -> bool:
        """Remove the ``.held`` file when its holder is gone; whether it was removed (not when
        the file found on moving it aside was a successor's fresh one, which is put back)."""
        seen = _read_small(self.marker)
        try:
            age = time.time() - os.stat(self.marker).st_mtime
        except FileNotFoundError:
            return True  # released meanwhile
        if not self._stale(seen, age):
            return False
        # Moved aside first, then checked to be the one judged stale: a successor's fresh
        # file, made between the judgement and the move, is put back.
        import random

        aside = f"{self.marker}.broken-{os.getpid()}-{random.getrandbits(32):08x}"
        try:
            os.rename(self.marker, aside)
        except FileNotFoundError:
            return True
        broken = _read_small(aside) == seen
        if not broken:
            try:
                os.link(aside, self.marker)
            except OSError:
                pass
        os.unlink(aside)
        return broken

    def _stale(self, seen: bytes | None, age: float) -> bool:
        fields = (seen or b"").decode("utf-8", "replace").split()
        if len(fields) >= 2 and fields[0] == _host() and fields[1].isdigit():
            return not _alive(int(fields[1]))
        return age > self.stale_after

    def _write_holder(self, fd: int) -> None:
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{_host()} {os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # who holds it is for messages only

    def _note(self, folder: str) -> None:
        global _told
        if _told or self.on_note is None:
            return
        _told = True
        self.on_note(
            f"{folder}: this file system does not support flock ({_flockless[folder]}); locking by creating "
            f"*{HELD_SUFFIX} files that name the holder's host and pid instead (one left by a process that "
            f"died is removed: at once on this host, after {self.stale_after:g} s from another)"
        )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _read_small(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        return os.read(fd, MAX_HOLDER_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)


def acquire_within(lock: HostLock, time_left: Callable[[], float], on_wait: Callable[[], None]) -> bool:
    """Acquire ``lock``. When it is not free within LOCK_NOTICE_SECONDS, ``on_wait()`` is
    called once and the wait goes on while ``time_left()`` lasts. False (the lock not held)
    when the time is spent first."""
    if lock.acquire(max(min(LOCK_NOTICE_SECONDS, time_left()), 0)):
        return True
    on_wait()
    return lock.acquire(max(time_left(), 0))

"""First-come-first-served locks.

TOOLS.md: write/edit to one path are applied *in arrival order*, bash calls
of one instance one at a time. ``threading.Lock`` does not promise FIFO
hand-over, so waiters take a ticket and are served by number.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class FifoLock:
    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._next_ticket = 0
        self._serving = 0

    def ticket(self) -> int:
        """Take a place in line now (the arrival), wait for it later."""
        with self._cond:
            ticket = self._next_ticket
            self._next_ticket += 1
            return ticket

    def wait(self, ticket: int) -> None:
        with self._cond:
            while self._serving != ticket:
                self._cond.wait()

    def release(self) -> None:
        with self._cond:
            self._serving += 1
            self._cond.notify_all()

    @property
    def idle(self) -> bool:
        with self._cond:
            return self._serving == self._next_ticket

    @contextmanager
    def held(self) -> Iterator[None]:
        self.wait(self.ticket())
        try:
            yield
        finally:
            self.release()


class PathLocks:
    """One ``FifoLock`` per path, dropped again when nobody holds or waits."""

    #: Times ``held_file`` resolves again when a symlink changes under it.
    RESOLVE_TRIES = 8

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locks: dict[str, tuple[FifoLock, int]] = {}

    @contextmanager
    def held(self, path: str) -> Iterator[None]:
        """The lock of the path string ``path`` (see ``held_file`` for a file)."""
        self._acquire(path)
        try:
            yield
        finally:
            self._release(path)

    @contextmanager
    def held_file(self, path: str) -> Iterator[str]:
        """The lock of the file ``path`` names, however it is spelled; yields
        that file's resolved path (every symlink resolved).

        Locks are keyed by the resolved path, so ``link`` (to ``file``),
        ``folder-alias/file`` and ``file`` queue on one lock and a
        compare-and-swap holds per file (issue 23, item 8). The path is
        resolved again once the lock is held: if a symlink on it changed
        meanwhile, the new file's lock is taken instead (a link flipped on
        every try is the workload racing itself: the last try's file is kept).
        """
        target = os.path.realpath(path)
        for _ in range(self.RESOLVE_TRIES):
            self._acquire(target)
            again = os.path.realpath(path)
            if again == target:
                break
            self._release(target)
            target = again
        else:
            self._acquire(target)
        try:
            yield target
        finally:
            self._release(target)

    def _acquire(self, key: str) -> None:
        with self._mutex:
            lock, users = self._locks.get(key, (FifoLock(), 0))
            self._locks[key] = (lock, users + 1)
            ticket = lock.ticket()
        lock.wait(ticket)

    def _release(self, key: str) -> None:
        with self._mutex:
            lock, users = self._locks[key]
            lock.release()
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

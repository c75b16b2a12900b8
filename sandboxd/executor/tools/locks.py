"""First-come-first-served locks.

TOOLS.md: write/edit to one path are applied *in arrival order*, bash calls
of one instance one at a time. ``threading.Lock`` does not promise FIFO
hand-over, so waiters take a ticket and are served by number.
"""

from __future__ import annotations

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

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locks: dict[str, tuple[FifoLock, int]] = {}

    @contextmanager
    def held(self, path: str) -> Iterator[None]:
        with self._mutex:
            lock, users = self._locks.get(path, (FifoLock(), 0))
            self._locks[path] = (lock, users + 1)
            ticket = lock.ticket()
        lock.wait(ticket)
        try:
            yield
        finally:
            lock.release()
            with self._mutex:
                lock, users = self._locks[path]
                if users == 1:
                    del self._locks[path]
                else:
                    self._locks[path] = (lock, users - 1)

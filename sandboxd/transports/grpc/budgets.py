"""Budgets a stream's client cannot grow: what is in flight, per stream and per caller.

Streams that multiplex work (``ToolCalls``' calls, ``OpenPorts``'
connections) count it here against a cap of the stream and one of the
caller (the scope its credentials give), shared by all its streams.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Hashable, Iterator


class Outstanding:
    """Calls accepted and not yet answered and read, against a cap to wait on."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self._limit = limit  # read at each use: a test may lower the module's cap
        self.count = 0
        self._changed = asyncio.Event()

    @property
    def over(self) -> bool:
        return self.count > self._limit()

    def add(self, n: int) -> None:
        self.count += n

    def done(self, n: int) -> None:
        self.count -= n
        self._changed.set()

    async def room(self) -> None:
        while self.count >= self._limit():
            self._changed.clear()
            await self._changed.wait()


class Callers:
    """One ``Outstanding`` per caller, shared by all its streams while any is open."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self._limit = limit
        self._budgets: dict[Hashable, tuple[Outstanding, int]] = {}

    @contextlib.contextmanager
    def budget(self, caller: Hashable) -> Iterator[Outstanding]:
        budget, streams = self._budgets.get(caller) or (
            Outstanding(self._limit),
            0,
        )
        self._budgets[caller] = (budget, streams + 1)
        try:
            yield budget
        finally:
            budget, streams = self._budgets[caller]
            if streams == 1:
                del self._budgets[caller]
            else:
                self._budgets[caller] = (budget, streams - 1)

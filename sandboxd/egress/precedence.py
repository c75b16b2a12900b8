"""Tool calls go before relayed bulk bytes.

Every sandbox's relayed connections and every agent's tool calls share the
daemon's event loop, and the host's CPUs with the executors and workloads
the relays keep busy: on a 2-core host a tool call of a ninth sandbox took
4-5x its idle time while eight others downloaded through their gateways
(bench.egress), and about as long with the gateway's event loop idle but the
CPUs busy. So, while another sandbox's tool call is in flight and for a
moment after it (its answer still travels back to the caller), each relayed
chunk waits before it goes on: the relays' work here and, within a chunk,
their executors' and workloads' work downstream step aside for the call.

Bounded both ways, so bulk bytes never starve: a call holds relays back only
while it is young (``HOLD_S``: a long bash is no reason to stall every
download), and one chunk waits at most ``MAX_WAIT_S`` however many calls
come and go. A sandbox's own calls never hold its relays back (the call may
be waiting for them: a bash running curl), nor does anything while no call
runs (a lone download goes at full speed).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Iterator

__all__ = ["Precedence"]


class Precedence:
    #: A call holds relays back only this long after it started.
    HOLD_S = 0.02
    #: After a call ends, relays keep still this long: its answer's way out.
    AFTER_S = 0.005
    #: One relayed chunk waits at most this long in all.
    MAX_WAIT_S = 0.02

    def __init__(self) -> None:
        #: Calls in flight: sandbox -> token -> the loop time it started (in
        #: that order, so a sandbox's youngest call is its last: a chunk looks
        #: at one entry per sandbox, however many calls are in flight).
        self._calls: dict[str, dict[int, float]] = {}
        #: Sandbox -> until when its last ended call keeps relays still.
        self._after: dict[str, float] = {}
        self._tokens = itertools.count()
        #: The chunks waiting: woken when a call ends, to look again.
        self._waiting: set[asyncio.Future[None]] = set()

    @contextlib.contextmanager
    def call(self, instance_id: str) -> Iterator[None]:
        """Around a tool call of ``instance_id``."""
        loop = asyncio.get_running_loop()
        token = next(self._tokens)
        mine = self._calls.setdefault(instance_id, {})
        mine[token] = loop.time()
        try:
            yield
        finally:
            del mine[token]
            if not mine:
                del self._calls[instance_id]
            now = loop.time()
            for key in [k for k, until in self._after.items() if until <= now]:
                del self._after[key]
            self._after[instance_id] = now + self.AFTER_S
            for waiter in self._waiting:
                _wake(waiter)

    def holds(self, instance_id: str) -> bool:
        """Whether ``instance_id``'s relays would wait now."""
        return self._held_until(instance_id) > asyncio.get_running_loop().time()

    def _held_until(self, instance_id: str) -> float:
        """Until when other sandboxes' calls hold ``instance_id``'s relays (0: not)."""
        until = 0.0
        for owner, calls in self._calls.items():
            if owner != instance_id:
                until = max(until, next(reversed(calls.values())) + self.HOLD_S)
        for owner, after in self._after.items():
            if owner != instance_id:
                until = max(until, after)
        return until

    async def yield_to_calls(self, instance_id: str) -> None:
        """Before a chunk ``instance_id``'s gateway relays: wait while calls go first."""
        if not self._calls and not self._after:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.MAX_WAIT_S
        while (until := min(self._held_until(instance_id), deadline)) > loop.time():
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiting.add(waiter)
            timer = loop.call_at(until, _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiting.discard(waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)

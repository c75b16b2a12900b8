"""Per-sandbox egress limits: open connections, and bytes per second where set."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

__all__ = ["Limits", "RateLimiter"]


@dataclass(frozen=True, slots=True)
class Limits:
    #: Connections one sandbox may have open through its gateway at once. Each
    #: holds up to two calls in its executor (its pipe, and a write towards the
    #: sandbox); the executor starts pipes only while fewer than 192 calls run
    #: (executor.main MAX_PIPE_WORKERS), which keeps the agent's own calls 64
    #: slots whatever this is.
    max_connections: int = 96
    #: Bytes per second through one sandbox's gateway, both ways together (0: no limit).
    bytes_per_second: int = 0
    connect_timeout_s: float = 10.0


class RateLimiter:
    """A token bucket shared by a sandbox's connections (one second of burst)."""

    def __init__(self, rate: int) -> None:
        self._rate = rate
        self._tokens = float(rate)
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def take(self, n: int) -> None:
        if self._rate <= 0:
            return
        async with self._lock:  # first come, first served: no connection starves another
            now = time.monotonic()
            self._tokens = min(float(self._rate), self._tokens + (now - self._stamp) * self._rate)
            self._stamp = now
            self._tokens -= n
            if self._tokens < 0:
                await asyncio.sleep(-self._tokens / self._rate)


class LoopPacer:
    """Holds relays back while the daemon's event loop runs late under several sandboxes.

    Relayed bytes and every sandbox's tool calls share the daemon's one loop:
    with several sandboxes downloading at full speed, a call waits behind
    their chunks. A ticker measures how late the loop wakes it; while that is
    over ``threshold_s`` and more than one sandbox is relaying, every relayed
    chunk first sleeps twice as long, so the loop gets to the calls in
    between. One sandbox alone is never held back (its own calls share its
    executor anyway). It runs only while relays use it.
    """

    TICK_S = 0.005
    IDLE_S = 1.0
    #: A sandbox that relayed within this counts as relaying.
    RECENT_S = 0.1

    def __init__(self, threshold_s: float = 0.001) -> None:
        self.threshold_s = threshold_s
        self.lag = 0.0
        self._used = 0.0
        self._recent: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None

    async def pace(self, key: str) -> None:
        loop = asyncio.get_running_loop()
        now = self._used = loop.time()
        self._recent[key] = now
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._tick(), name="egress-pacer")
        if self.lag > self.threshold_s and self._relaying(now) > 1:
            await asyncio.sleep(min(2 * self.lag, 0.05))

    def _relaying(self, now: float) -> int:
        if len(self._recent) > 1:
            for key, then in list(self._recent.items()):
                if now - then > self.RECENT_S:
                    del self._recent[key]
        return len(self._recent)

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while loop.time() - self._used < self.IDLE_S:
            start = loop.time()
            await asyncio.sleep(self.TICK_S)
            late = loop.time() - start - self.TICK_S
            # Smoothed: one late wake-up is noise, a run of them is load.
            self.lag = max(0.0, 0.7 * self.lag + 0.3 * late)
        self.lag = 0.0

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

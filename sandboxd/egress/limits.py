"""Per-sandbox egress limits: open connections, and bytes per second where set."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

__all__ = ["Limits", "RateLimiter"]


@dataclass(frozen=True, slots=True)
class Limits:
    #: Connections one sandbox may have open through its gateway at once. Each
    #: is a call in its executor (at most 256 at once, executor.main
    #: MAX_WORKERS): half are left for the agent's own calls.
    max_connections: int = 128
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

"""The warm pool: workspaces started ahead of demand for the default options.

A pooled workspace is a fresh container on a fresh volume with its executor
already answering; claiming one is a rename. Nothing is ever recycled: a
workspace leaves the pool only to become an instance or to be removed, so no
instance can see another's files. Refilling is one at a time in the
background, so a burst of creates never starts more than the pool size at
once on top of the cold path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

W = TypeVar("W")

#: Wait after a failed refill before trying again, so a broken engine or a
#: missing image does not turn the pool into a busy loop.
RETRY_DELAY_S = 5.0


class WarmPool(Generic[W]):
    def __init__(
        self,
        size: int,
        make: Callable[[], Awaitable[W]],
        discard: Callable[[W], Coroutine[Any, Any, None]],
        usable: Callable[[W], bool],
    ) -> None:
        self.size = size
        self._make = make
        self._discard = discard
        self._usable = usable
        self._ready: deque[W] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._discarding: set[asyncio.Task[None]] = set()
        self._making: asyncio.Future[W] | None = None
        self.served = 0
        self.made = 0

    @property
    def ready(self) -> int:
        return len(self._ready)

    def start(self) -> None:
        if self.size > 0 and self._task is None:
            self._task = asyncio.create_task(self._fill(), name="warm-pool")

    def take(self) -> W | None:
        """A ready workspace, or None when the pool is empty (the caller goes cold)."""
        while self._ready:
            workspace = self._ready.popleft()
            self._wake.set()
            if self._usable(workspace):
                self.served += 1
                return workspace
            task = asyncio.create_task(self._discard(workspace))
            self._discarding.add(task)
            task.add_done_callback(self._discarding.discard)
        self._wake.set()
        return None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._making is not None:
            # A start in progress finishes, then goes like the rest: never leaked.
            with contextlib.suppress(Exception):
                self._ready.append(await self._making)
            self._making = None
        while self._ready:
            await self._discard(self._ready.popleft())
        if self._discarding:
            await asyncio.gather(*self._discarding, return_exceptions=True)

    async def _fill(self) -> None:
        while True:
            while len(self._ready) < self.size:
                self._making = asyncio.ensure_future(self._make())
                try:
                    # Shielded: cancelling the pool must not strand a half-made
                    # container; close() waits for it and removes it.
                    workspace = await asyncio.shield(self._making)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self._making = None
                    log.warning("warm pool: could not start a workspace: %s", exc)
                    await asyncio.sleep(RETRY_DELAY_S)
                    continue
                self._making = None
                self.made += 1
                self._ready.append(workspace)
            self._wake.clear()
            await self._wake.wait()

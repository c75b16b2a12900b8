"""The warm pool: workspaces started ahead of demand for the default options.

A pooled workspace is a fresh container on a fresh volume with its executor
already answering; claiming one is a rename. Nothing is ever recycled: a
workspace leaves the pool only to become an instance or to be removed, so no
instance can see another's files.

The pool follows demand between a floor and a ceiling: it aims to hold as
many workspaces as were claimed in the last ``window_s`` seconds (never fewer
than the floor), so the next burst of the same size is served warm, and it
shrinks back to the floor when demand stops. Refills run ``parallel`` at a
time and only once claims have paused for ``quiet_s``, so a burst of creates
is not slowed by the containers being started behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, TypeVar

from sandboxd.contract.models import PoolStatus

log = logging.getLogger(__name__)

W = TypeVar("W")

#: Wait after a failed refill before trying again, so a broken engine or a
#: missing image does not turn the pool into a busy loop.
RETRY_DELAY_S = 5.0


class WarmPool(Generic[W]):
    def __init__(
        self,
        floor: int,
        make: Callable[[], Awaitable[W]],
        discard: Callable[[W], Coroutine[Any, Any, None]],
        usable: Callable[[W], bool],
        *,
        ceiling: int | None = None,
        parallel: int = 2,
        window_s: float = 300.0,
        quiet_s: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.floor = floor
        self.ceiling = max(floor, ceiling if ceiling is not None else floor)
        self._make = make
        self._discard = discard
        self._usable = usable
        self._parallel = max(1, parallel)
        self._window_s = window_s
        self._quiet_s = quiet_s
        self._clock = clock
        self._claims: deque[float] = deque()
        self._ready: deque[W] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._making: set[asyncio.Future[W]] = set()
        self._retry_at = 0.0
        self.served = 0
        self.made = 0

    @property
    def ready(self) -> int:
        return len(self._ready)

    @property
    def size(self) -> int:
        """How many ready workspaces the pool aims for now (floor..ceiling)."""
        if self.floor == 0:
            return 0
        self._forget_old_claims()
        return min(self.ceiling, max(self.floor, len(self._claims)))

    def status(self) -> PoolStatus:
        return PoolStatus(size=self.size, ready=self.ready, served=self.served, started=self.made)

    def start(self) -> None:
        if self.floor > 0 and self._task is None:
            self._task = asyncio.create_task(self._fill(), name="warm-pool")

    def take(self) -> W | None:
        """A ready workspace, or None when the pool is empty (the caller goes cold)."""
        if self.floor > 0:
            self._claims.append(self._clock())
        while self._ready:
            workspace = self._ready.popleft()
            self._wake.set()
            if self._usable(workspace):
                self.served += 1
                return workspace
            self._in_background(self._discard(workspace))
        self._wake.set()
        return None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        # Starts in progress finish, then go like the rest: never leaked.
        for making in list(self._making):
            with contextlib.suppress(Exception):
                self._ready.append(await making)
        self._making.clear()
        # All at once: one by one, a full pool on a loaded engine outlasted
        # the stop's grace period and was left behind.
        ready = list(self._ready)
        self._ready.clear()
        outcomes = await asyncio.gather(
            *(self._discard(workspace) for workspace in ready), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    # ------------------------------------------------------------ internals

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _forget_old_claims(self) -> None:
        horizon = self._clock() - self._window_s
        while self._claims and self._claims[0] < horizon:
            self._claims.popleft()

    async def _wait_for_quiet(self) -> None:
        while True:
            pause = self._clock() - self._claims[-1] if self._claims else self._quiet_s
            if pause >= self._quiet_s:
                return
            await asyncio.sleep(self._quiet_s - pause)

    async def _fill(self) -> None:
        while True:
            await self._wait_for_quiet()
            if (delay := self._retry_at - self._clock()) > 0:
                await asyncio.sleep(delay)
            target = self.size
            while len(self._ready) > target:  # demand has passed: shrink towards the floor
                self._in_background(self._discard(self._ready.pop()))
            missing = target - len(self._ready) - len(self._making)
            if missing > 0 and len(self._making) < self._parallel:
                for _ in range(min(missing, self._parallel - len(self._making))):
                    self._start_one()
                continue
            self._wake.clear()
            # Woken by a claim or a finished start; the timeout lets demand decay.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(self._window_s / 4, 0.01)):
                    await self._wake.wait()

    def _start_one(self) -> None:
        # Not awaited here: several starts overlap. Each is shielded from the
        # pool's cancellation so close() can wait for it and remove it.
        making = asyncio.ensure_future(self._make())
        self._making.add(making)
        making.add_done_callback(self._started)

    def _started(self, making: asyncio.Future[W]) -> None:
        self._making.discard(making)
        self._wake.set()
        if making.cancelled() or self._task is None:
            return  # close() collects it
        error = making.exception()
        if error is not None:
            log.warning("warm pool: could not start a workspace: %s", error)
            self._retry_at = self._clock() + RETRY_DELAY_S
            return
        self.made += 1
        self._ready.append(making.result())

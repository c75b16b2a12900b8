"""A connection that always has a reading thread, even while its reader runs a call.

A quick call (a read, write or edit of one file) is cheapest run by the
thread that read it: handing it to a worker costs two thread switches and a
GIL hand-over, about a third of the executor's CPU per call. But while the
reader runs a call, nothing reads the connection: a cancel, a credit or the
next call waits. So the reader runs a call only through ``Relay.run``, which
marks it held; a ``Watchdog`` hands the reading to a fresh thread when a
call holds it past ``STALL_S``, and the held-up thread leaves once its call
ends. The workload can make a file slow (a huge one, a path lock another
call keeps), never the channel for longer than ``STALL_S + TICK_S``.

Which thread reads is a generation number: the watchdog bumps it when it
starts the next reader; a thread whose generation is no longer current
stops reading.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

#: A call holding its reader this long gets the reading handed on.
STALL_S = 0.02
#: How often the watchdog looks while calls run on readers.
TICK_S = 0.01
#: With no call held for this long, the watchdog sleeps until the next one.
IDLE_S = 1.0

Call = Callable[[], None]
#: A connection's read loop, run as ``read_loop(relay, generation)``; it
#: starts with ``relay.run(generation, [])`` (a predecessor's leftovers).
ReadLoop = Callable[["Relay", int], None]


class Relay:
    """The reading of one connection: which thread has it, and the calls it runs."""

    def __init__(self, read_loop: ReadLoop, watchdog: Watchdog, *, name: str) -> None:
        self._read_loop = read_loop
        self._watchdog = watchdog
        self._name = name
        self._lock = threading.Lock()
        self._generation = 0
        #: Calls read and not yet started; a successor runs what is left.
        self._queue: collections.deque[Call] = collections.deque()
        self._held_since: float | None = None

    def start(self) -> None:
        self._watchdog.add(self)
        self._thread(0).start()

    def stop(self) -> None:
        """The connection is gone: no reader is started for it any more."""
        self._watchdog.remove(self)

    def run(self, generation: int, calls: list[Call]) -> bool:
        """Run ``calls``, and any a predecessor left, one after another on this
        reading thread; False if the reading was handed on meanwhile (the
        caller's thread then stops reading: its successor runs the rest)."""
        with self._lock:
            self._queue.extend(calls)
        if calls:
            self._watchdog.wake()
        while True:
            with self._lock:
                if generation != self._generation:
                    return False
                if not self._queue:
                    self._held_since = None
                    return True
                call = self._queue.popleft()
                self._held_since = time.monotonic()
            call()

    def held(self) -> bool:
        with self._lock:
            return self._held_since is not None

    def take_over_if_stalled(self, now: float) -> None:
        """Called by the watchdog: a reader held past STALL_S gets a successor."""
        with self._lock:
            held_since = self._held_since
            if held_since is None or now - held_since < STALL_S:
                return
            successor = self._thread(self._generation + 1)
            try:
                successor.start()
            except RuntimeError:
                return  # out of threads: the held reader goes on when its call ends
            self._generation += 1
            self._held_since = None

    def _thread(self, generation: int) -> threading.Thread:
        # Started under the lock, bumped after: the new reader's first run()
        # waits for the lock, so it finds its generation current.
        return threading.Thread(
            target=self._read_loop, args=(self, generation), name=self._name, daemon=True
        )


class Watchdog:
    """One thread that looks at every held relay while calls run on readers."""

    def __init__(self) -> None:
        self._relays: set[Relay] = set()
        self._lock = threading.Lock()
        self._awake = threading.Event()
        self._last_wake = 0.0
        self._started = False

    def add(self, relay: Relay) -> None:
        with self._lock:
            self._relays.add(relay)
            start = not self._started
            self._started = True
        if start:
            threading.Thread(target=self._loop, name="relay-watchdog", daemon=True).start()

    def remove(self, relay: Relay) -> None:
        with self._lock:
            self._relays.discard(relay)

    def wake(self) -> None:
        self._last_wake = time.monotonic()
        if not self._awake.is_set():
            self._awake.set()

    def _loop(self) -> None:
        while True:
            self._awake.wait()
            time.sleep(TICK_S)
            now = time.monotonic()
            with self._lock:
                relays = list(self._relays)
            for relay in relays:
                relay.take_over_if_stalled(now)
            if now - self._last_wake > IDLE_S:
                self._awake.clear()
                # A call marked held before the clear has called (or will
                # call) wake() after its mark: look again so none is missed.
                if any(relay.held() for relay in relays):
                    self._awake.set()

"""Credit-based flow control for one streamed call (executor side).

The daemon grants a stream a window of events when it asks for it and more
as its consumer drains them. The executor sends an event only against a
credit: a stalled consumer stops its own stream's producer (whose process
then blocks on its full pipe) and nothing else, so the channel's reader,
shared by every call of the instance, never waits for one consumer.
"""

from __future__ import annotations

import threading

#: Events a stream may have in flight before the consumer drains some.
WINDOW = 64
#: A socket pipe's window: its events are large (``executor.pipes.CHUNK``,
#: 256 KiB, so bulk bytes cost few events), so fewer of them may be in flight:
#: the daemon holds at most 4 MiB of a pipe whose reader stopped.
PIPE_WINDOW = 16
_WINDOWS = {"pipe_connect": PIPE_WINDOW, "pipe_attach": PIPE_WINDOW}
#: Credits a grant may carry at most; more is a malformed frame.
MAX_GRANT = 1 << 16
_POLL_S = 0.1


def window(op: str) -> int:
    """The credit window the daemon grants a stream of ``op`` when it asks for it."""
    return _WINDOWS.get(op, WINDOW)


class Credits:
    def __init__(self, initial: int = WINDOW) -> None:
        self._available = initial
        self._cond = threading.Condition()

    def grant(self, count: int) -> None:
        with self._cond:
            self._available = min(self._available + count, MAX_GRANT)
            self._cond.notify_all()

    def take(self, cancel: threading.Event) -> bool:
        """Use one credit, waiting for a grant; False once ``cancel`` is set."""
        with self._cond:
            while self._available <= 0:
                if cancel.is_set():
                    return False
                self._cond.wait(_POLL_S)
            self._available -= 1
            return True

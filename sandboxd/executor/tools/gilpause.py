"""Letting the executor's other calls run while one loops in pure Python.

A thread that runs Python without blocking keeps the GIL from the threads
that make system calls far longer than the interpreter's switch interval:
each of their calls waits for the next forced switch (read.py measured a
quick read taking 0.1-1.1 s beside a long one). Loops whose length the
sandbox decides (a walk of a huge tree, a .gitignore of many thousand
rules) call ``pause`` often; every ``INTERVAL`` seconds, while another call
is in flight (``contended``), it gives the GIL away once.

``time.sleep(0)`` is what hands the GIL over: the waiting thread only gets
it if this one steps off the CPU. On a busy host that step costs ms, so it
is not taken when no other call waits (measured: a lone glob of 5,000
files 78 -> 175 ms with a pause every 2 ms on a loaded 2-core machine).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

#: Longest stretch of pure Python between two hand-overs of the GIL.
INTERVAL = 0.002


def _always() -> bool:
    return True


#: Whether another call may be waiting for the GIL; the executor's main
#: loop sets it to "more than one call in flight" (in-process: always).
contended: Callable[[], bool] = _always

_last = threading.local()


def pause() -> None:
    now = time.monotonic()
    if now - getattr(_last, "at", 0.0) >= INTERVAL:
        _last.at = now
        if contended():
            time.sleep(0)  # off the CPU: a thread waiting for the GIL takes it
            _last.at = time.monotonic()

"""FIFO hand-over of the write/edit path locks and the bash lock."""

from __future__ import annotations

import threading
import time

from sandboxd.executor.tools.locks import FifoLock, PathLocks


def test_waiters_are_served_in_arrival_order() -> None:
    lock = FifoLock()
    first = lock.ticket()
    lock.wait(first)
    order: list[int] = []

    def waiter(i: int, ticket: int) -> None:
        lock.wait(ticket)
        order.append(i)
        lock.release()

    # Tickets are taken here, in order; the threads then start in reverse
    # order, so only ticket order can explain a sorted result.
    tickets = [lock.ticket() for _ in range(10)]
    threads = [threading.Thread(target=waiter, args=(i, t)) for i, t in enumerate(tickets)]
    for thread in reversed(threads):
        thread.start()
    time.sleep(0.1)
    lock.release()
    for thread in threads:
        thread.join()
    assert order == list(range(10))
    assert lock.idle


def test_path_locks_are_per_path_and_cleaned_up() -> None:
    locks = PathLocks()
    inside = threading.Event()
    with locks.held("/a"):

        def other() -> None:
            with locks.held("/b"):  # another path is not blocked by /a
                inside.set()

        thread = threading.Thread(target=other)
        thread.start()
        thread.join(2)
    assert inside.is_set()
    assert locks._locks == {}

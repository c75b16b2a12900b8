"""The executor's side of stream flow control."""

from __future__ import annotations

import threading
import time

import pytest

from sandboxd.executor.credits import MAX_GRANT, Credits

pytestmark = pytest.mark.unit


def test_take_uses_the_window_then_waits_for_a_grant() -> None:
    credits = Credits(2)
    cancel = threading.Event()
    assert credits.take(cancel) and credits.take(cancel)
    taken = threading.Event()

    def third() -> None:
        if credits.take(cancel):
            taken.set()

    worker = threading.Thread(target=third)
    worker.start()
    assert not taken.wait(0.3)  # no credit left: the producer waits
    credits.grant(1)
    assert taken.wait(5)
    worker.join()


def test_cancel_frees_a_waiting_producer() -> None:
    credits = Credits(0)
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    started = time.monotonic()
    assert credits.take(cancel) is False
    assert time.monotonic() - started < 5


def test_grants_are_capped() -> None:
    credits = Credits(0)
    credits.grant(MAX_GRANT * 4)
    cancel = threading.Event()
    cancel.set()
    count = 0
    while credits.take(cancel):
        count += 1
    assert count == MAX_GRANT


def test_attachments_are_limited(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each attached client holds an executor thread: past the limit, a clear error."""
    from sandboxd.contract.errors import ResourceExhausted
    from sandboxd.executor import processes

    monkeypatch.setattr(processes, "MAX_ATTACHED", 1)
    procs = processes.Processes(str(tmp_path))
    info = procs.start(command=["sleep", "30"], cwd=str(tmp_path), env={}, pty=None)
    cancel = threading.Event()
    first = threading.Thread(target=procs.attach, args=(info["handle"], 0, cancel, print))
    first.start()
    time.sleep(0.3)
    with pytest.raises(ResourceExhausted, match="clients are attached"):
        procs.attach(info["handle"], 0, threading.Event(), print)
    cancel.set()
    first.join(5)
    procs.close()

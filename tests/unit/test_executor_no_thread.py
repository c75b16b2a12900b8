"""The executor's request loop when no worker thread can be started (pids limit).

``ThreadPoolExecutor.submit`` queues the request, then fails to start a
thread. With a worker alive the request must simply wait for it (one reply,
no error); with none it is refused, and the refused request never runs later.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from sandboxd.executor import wire
from sandboxd.executor.dispatch import Executor
from sandboxd.executor.main import _Server
from tests.executor_outlet import RecordingOutlet


def _request(request_id: int, path: str) -> wire.Frame:
    return wire.Frame(wire.encode({"id": request_id, "op": "exists", "args": {"path": path}}))


def _wait_for(out: RecordingOutlet, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        replies = out.replies()
        if len(replies) >= count:
            return replies
        time.sleep(0.01)
    return out.replies()


@pytest.fixture
def server(tmp_path: Path) -> _Server:
    (tmp_path / "w").mkdir()
    return _Server(Executor(str(tmp_path / "w"), state_dir=str(tmp_path / "s")), RecordingOutlet())


def _no_new_threads(server: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> None:
        if not server.pool._idle_semaphore.acquire(timeout=0):
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(server.pool, "_adjust_thread_count", refuse)


def test_with_a_worker_alive_the_request_waits_for_it(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = server.stdio
    assert isinstance(out, RecordingOutlet)
    server.accept(_request(1, "."))
    assert _wait_for(out, 1)[0]["ok"]["exists"] is True
    _no_new_threads(server, monkeypatch)
    # Two at once: the second finds no idle worker and no thread to start.
    server.accept(_request(2, "."))
    server.accept(_request(3, "."))
    replies = _wait_for(out, 3)
    time.sleep(0.2)
    replies = out.replies()
    assert sorted(r["id"] for r in replies) == [1, 2, 3]
    assert all("ok" in r for r in replies)


def test_with_no_worker_the_request_is_refused_and_never_runs(
    server: _Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = server.stdio
    assert isinstance(out, RecordingOutlet)
    _no_new_threads(server, monkeypatch)
    made = tmp_path / "w" / "made"
    server.accept(
        wire.Frame(
            wire.encode({"id": 1, "op": "make_dir", "args": {"path": "made", "parents": True}})
        )
    )
    [refused] = out.replies()
    assert refused["err"]["kind"] == "resource_exhausted"
    monkeypatch.undo()
    server.accept(_request(2, "."))  # starts a worker, which finds the refused request first
    replies = _wait_for(out, 2)
    time.sleep(0.2)
    assert [r["id"] for r in out.replies()] == [1, 2]
    assert not made.exists()
    assert replies[1]["ok"]["exists"] is True

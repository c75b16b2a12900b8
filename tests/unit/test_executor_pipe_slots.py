"""Socket pipes cannot take the executor's last call slots: a workload
flooding its egress proxy (or a client flooding a forwarded port) left the
agent's own calls "already running 256 calls" (seen in the hostile egress
flood). Pipes now start only below MAX_PIPE_WORKERS; other calls keep the
rest. Checked: with pipes held to MAX_WORKERS like any call, the first test
fails (the pipe is taken and the slots fill)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from sandboxd.executor import wire
from sandboxd.executor.dispatch import Executor
from sandboxd.executor.main import MAX_PIPE_WORKERS, MAX_WORKERS, _Server
from tests.executor_outlet import RecordingOutlet

pytestmark = pytest.mark.unit


def _frame(request_id: int, op: str, args: dict[str, Any]) -> wire.Frame:
    return wire.Frame(wire.encode({"id": request_id, "op": op, "args": args}))


def _reply(out: RecordingOutlet, request_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for reply in out.replies():
            if reply.get("id") == request_id:
                return reply
        time.sleep(0.01)
    raise AssertionError(f"no reply to {request_id}")


@pytest.fixture
def server(tmp_path: Path) -> _Server:
    (tmp_path / "w").mkdir()
    return _Server(Executor(str(tmp_path / "w"), state_dir=str(tmp_path / "s")), RecordingOutlet())


def test_at_the_pipe_share_a_pipe_is_refused_and_a_call_still_runs(server: _Server) -> None:
    out = server.stdio
    assert isinstance(out, RecordingOutlet)
    assert MAX_PIPE_WORKERS < MAX_WORKERS
    server.busy = MAX_PIPE_WORKERS  # that many calls in flight (pipes, here)
    server.accept(_frame(1, "pipe_write", {"pipe": "p1", "data": "eA=="}))
    refused = _reply(out, 1)
    assert refused["err"]["kind"] == "resource_exhausted"
    assert "connections hold 192" in refused["err"]["message"]
    server.accept(_frame(2, "exists", {"path": "."}))
    assert _reply(out, 2)["ok"]["exists"] is True


def test_at_the_whole_limit_every_call_is_refused(server: _Server) -> None:
    out = server.stdio
    assert isinstance(out, RecordingOutlet)
    server.busy = MAX_WORKERS
    server.accept(_frame(1, "exists", {"path": "."}))
    assert "already running 256 calls" in _reply(out, 1)["err"]["message"]

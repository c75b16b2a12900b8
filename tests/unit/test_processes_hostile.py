"""What a process can do to the executor's process table: garbage on its
terminal, closing it, ignoring SIGTERM, flooding. None of it may grow memory
past the ring or wedge an attachment."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sandboxd.executor import processes
from sandboxd.executor.processes import Processes

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]


def _attach(procs: Processes, handle: str, offset: int | None = 0) -> tuple[bytes, dict[str, Any]]:
    chunks: list[bytes] = []
    end = procs.attach(handle, offset, threading.Event(), lambda e: chunks.append(e["data"]))
    return b"".join(chunks), end


def test_garbage_then_a_closed_terminal(tmp_path: Path) -> None:
    procs = Processes(str(tmp_path / "state"))
    script = (
        "head -c 100000 /dev/urandom; exec 0<&- 1>&- 2>&-; sleep 0.5; exit 5"
    )  # fmt: skip
    info = procs.start(command=["bash", "-c", script], cwd=str(tmp_path), env={}, pty=(5, 5))
    data, end = _attach(procs, info["handle"])
    assert end["exit_code"] == 5 and end["state"] == "exited"
    assert len(data) >= 100000  # the terminal may add \r to \n bytes


def test_a_flood_keeps_only_the_ring(tmp_path: Path) -> None:
    procs = Processes(str(tmp_path / "state"))
    info = procs.start(
        command=["head", "-c", "50000000", "/dev/zero"], cwd=str(tmp_path), env={}, pty=None
    )
    process = procs.get(info["handle"])
    deadline = time.monotonic() + 30
    while not process.done:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert process.output.total == 50_000_000
    assert process.output.held <= processes.RING_BYTES + processes.CHUNK
    data, end = _attach(procs, info["handle"], None)
    assert len(data) == process.output.held and end["missed"] == 0  # None: what is kept
    _, from_zero = _attach(procs, info["handle"], 0)
    assert from_zero["missed"] == 50_000_000 - process.output.held


def test_sigterm_ignored_then_sigkill(tmp_path: Path) -> None:
    procs = Processes(str(tmp_path / "state"))
    info = procs.start(
        command=["bash", "-c", "trap '' TERM; echo ready; sleep 30"],
        cwd=str(tmp_path),
        env={},
        pty=None,
    )
    process = procs.get(info["handle"])
    while b"ready" not in b"".join(d for _, _, d in process.output.pieces):
        time.sleep(0.05)
    process.send_signal(15)
    time.sleep(0.5)
    assert process.info()["state"] == "running"
    process.send_signal(9)
    _, end = _attach(procs, info["handle"])
    assert end["signal"] == 9


def test_too_many_running_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "MAX_PROCESSES", 2)
    procs = Processes(str(tmp_path / "state"))
    for _ in range(2):
        procs.start(command=["sleep", "30"], cwd=str(tmp_path), env={}, pty=None)
    with pytest.raises(processes.ResourceExhausted, match="processes are running"):
        procs.start(command=["sleep", "30"], cwd=str(tmp_path), env={}, pty=None)
    procs.close()

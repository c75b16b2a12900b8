"""Executor transfer sessions: abandoned temp files go, aborts that overtake
their begin still win, and the session table is bounded."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from sandboxd.contract.errors import InvalidArgument, NotFound, ResourceExhausted
from sandboxd.executor import transfer
from sandboxd.executor.dispatch import Executor


@pytest.fixture
def ex(tmp_path: Path) -> Executor:
    (tmp_path / "w").mkdir()
    executor = Executor(str(tmp_path / "w"), state_dir=str(tmp_path / "state"))
    yield executor
    executor.close()


def _temps(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if name.startswith(".sandboxd-upload-")]


def test_upload_commit_is_atomic_and_abort_removes_the_temp(ex: Executor, tmp_path: Path) -> None:
    work = tmp_path / "w"
    (work / "f").write_bytes(b"old")
    ex.handle("upload_begin", {"session": "s1", "path": "f"})
    ex.handle("upload_chunk", {"session": "s1", "offset": 3, "data": b"def"})
    ex.handle("upload_chunk", {"session": "s1", "offset": 0, "data": b"abc"})
    assert (work / "f").read_bytes() == b"old" and len(_temps(work)) == 1
    assert ex.handle("upload_commit", {"session": "s1", "size": 6}) == {"created": False}
    assert (work / "f").read_bytes() == b"abcdef" and _temps(work) == []
    ex.handle("upload_begin", {"session": "s2", "path": "f"})
    ex.handle("upload_chunk", {"session": "s2", "offset": 0, "data": b"zzz"})
    assert ex.handle("transfer_abort", {"session": "s2"}) == {"aborted": True}
    assert (work / "f").read_bytes() == b"abcdef" and _temps(work) == []
    with pytest.raises(NotFound):
        ex.handle("upload_chunk", {"session": "s2", "offset": 0, "data": b"x"})


def test_commit_with_missing_bytes_changes_nothing(ex: Executor, tmp_path: Path) -> None:
    ex.handle("upload_begin", {"session": "s", "path": "g"})
    ex.handle("upload_chunk", {"session": "s", "offset": 0, "data": b"abc"})
    with pytest.raises(InvalidArgument, match="announced 10 bytes but 3 arrived"):
        ex.handle("upload_commit", {"session": "s", "size": 10})
    assert not (tmp_path / "w/g").exists() and _temps(tmp_path / "w") == []


def test_an_abort_that_overtakes_its_begin_wins(ex: Executor, tmp_path: Path) -> None:
    assert ex.handle("transfer_abort", {"session": "early"}) == {"aborted": False}
    with pytest.raises(InvalidArgument, match="aborted"):
        ex.handle("upload_begin", {"session": "early", "path": "h"})
    assert _temps(tmp_path / "w") == []


def test_idle_sessions_are_reaped(
    ex: Executor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transfer, "IDLE_S", 0.2)
    ex.handle("upload_begin", {"session": "idle", "path": "i"})
    assert len(_temps(tmp_path / "w")) == 1
    deadline = time.monotonic() + 10
    while _temps(tmp_path / "w") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _temps(tmp_path / "w") == []


def test_a_reconnecting_daemon_aborts_every_session(ex: Executor, tmp_path: Path) -> None:
    ex.handle("upload_begin", {"session": "a", "path": "j"})
    ex.handle("hello", {})
    assert _temps(tmp_path / "w") == [] and ex.transfers.count() == 0


def test_the_session_table_is_bounded(ex: Executor, tmp_path: Path) -> None:
    (tmp_path / "w/src").write_bytes(b"x")
    for n in range(transfer.MAX_SESSIONS):
        ex.handle("download_begin", {"session": f"d{n}", "path": "src"})
    with pytest.raises(ResourceExhausted, match="already open"):
        ex.handle("download_begin", {"session": "one-more", "path": "src"})


def test_download_refuses_a_fifo_without_blocking(ex: Executor, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "w/pipe")
    done = threading.Event()
    with pytest.raises(InvalidArgument, match="not a regular file"):
        ex.handle("download_begin", {"session": "p", "path": "pipe"})
    done.set()


def test_no_file_written_keeps_setuid_or_setgid(ex: Executor, tmp_path: Path) -> None:
    """Upload, WriteFile and the write tool (issue 23, item 12); sticky stays."""
    work = tmp_path / "w"
    ex.handle("upload_begin", {"session": "u", "path": "up", "mode": 0o6755})
    ex.handle("upload_chunk", {"session": "u", "offset": 0, "data": b"x"})
    ex.handle("upload_commit", {"session": "u", "size": 1})
    ex.handle("write_file", {"path": "wf", "data": b"x", "mode": 0o7755})
    (work / "kept").write_bytes(b"old")
    os.chmod(work / "kept", 0o6750)
    ex.handle("write_file", {"path": "kept", "data": b"new"})
    (work / "tool").write_bytes(b"old")
    os.chmod(work / "tool", 0o4700)
    ex.handle("tool", {"name": "read", "args": {"file_path": "tool"}})
    ex.handle("tool", {"name": "write", "args": {"file_path": "tool", "content": "new"}})
    modes = {name: os.stat(work / name).st_mode & 0o7777 for name in ("up", "wf", "kept", "tool")}
    assert modes == {"up": 0o755, "wf": 0o1755, "kept": 0o750, "tool": 0o700}

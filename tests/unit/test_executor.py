"""The executor's operations, in-process (the local backend's path)."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

from sandboxd.contract.errors import (
    AlreadyExists,
    Conflict,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
)
from sandboxd.executor.dispatch import Executor

pytestmark = pytest.mark.unit


@pytest.fixture
def ex(tmp_path: Path) -> Executor:
    work = tmp_path / "work"
    work.mkdir()
    return Executor(str(work), state_dir=str(tmp_path / "state"), max_payload_bytes=1024)


def test_write_creates_parents_and_read_returns_ranges(ex: Executor) -> None:
    written = ex.handle(
        "write_file", {"path": "a/b/c.txt", "data": b"0123456789", "create_parents": True}
    )
    assert written == {
        "size": 10,
        "sha256": hashlib.sha256(b"0123456789").hexdigest(),
        "created": True,
    }
    assert ex.handle("read_file", {"path": "a/b/c.txt", "offset": 2, "length": 3}) == {
        "data": b"234",
        "size": 10,
        "eof": False,
    }
    assert ex.handle("read_file", {"path": "a/b/c.txt", "offset": 8})["data"] == b"89"
    assert ex.handle("read_file", {"path": "a/b/c.txt", "offset": 50})["data"] == b""


def test_write_without_parents_fails_and_creates_nothing(ex: Executor) -> None:
    with pytest.raises(NotFound, match="set create_parents"):
        ex.handle("write_file", {"path": "x/y.txt", "data": b"1"})
    assert not os.path.exists(os.path.join(ex.workdir, "x"))


def test_overwrite_keeps_mode_and_leaves_no_temp_files(ex: Executor) -> None:
    path = os.path.join(ex.workdir, "run.sh")
    ex.handle("write_file", {"path": "run.sh", "data": b"#!/bin/sh\n", "mode": 0o755})
    assert os.stat(path).st_mode & 0o777 == 0o755
    result = ex.handle("write_file", {"path": "run.sh", "data": b"echo\n"})
    assert result["created"] is False
    assert os.stat(path).st_mode & 0o777 == 0o755
    assert os.listdir(ex.workdir) == ["run.sh"]


def test_compare_and_swap(ex: Executor) -> None:
    first = ex.handle("write_file", {"path": "f", "data": b"one", "expected_sha256": "absent"})
    with pytest.raises(Conflict, match="content changed"):
        ex.handle("write_file", {"path": "f", "data": b"two", "expected_sha256": "absent"})
    ex.handle("write_file", {"path": "f", "data": b"two", "expected_sha256": first["sha256"]})
    assert Path(ex.workdir, "f").read_bytes() == b"two"
    with pytest.raises(Conflict):
        ex.handle("write_file", {"path": "f", "data": b"three", "expected_sha256": first["sha256"]})
    assert Path(ex.workdir, "f").read_bytes() == b"two"


def test_read_limits_and_errors(ex: Executor) -> None:
    Path(ex.workdir, "big").write_bytes(b"x" * 2000)
    with pytest.raises(ResourceExhausted, match="payload limit of 1024"):
        ex.handle("read_file", {"path": "big"})
    assert len(ex.handle("read_file", {"path": "big", "offset": 1000})["data"]) == 1000
    with pytest.raises(NotFound, match="no such file"):
        ex.handle("read_file", {"path": "missing"})
    with pytest.raises(InvalidArgument, match="is a directory"):
        ex.handle("read_file", {"path": "."})
    with pytest.raises(InvalidArgument, match="must not be negative"):
        ex.handle("read_file", {"path": "big", "offset": -1})
    with pytest.raises(InvalidArgument, match="NUL"):
        ex.handle("read_file", {"path": "a\x00b"})
    with pytest.raises(InvalidArgument, match="non-empty"):
        ex.handle("read_file", {"path": ""})


def test_stat_list_exists_mkdir_remove(ex: Executor) -> None:
    ex.handle("make_dir", {"path": "d/e", "parents": True})
    with pytest.raises(AlreadyExists):
        ex.handle("make_dir", {"path": "d/e", "parents": True})
    assert ex.handle("make_dir", {"path": "d/e", "exist_ok": True}) == {"created": False}
    Path(ex.workdir, "d/file").write_text("hi")
    os.symlink("file", os.path.join(ex.workdir, "d/link"))
    names = [(e["name"], e["type"]) for e in ex.handle("list_dir", {"path": "d"})["entries"]]
    assert names == [("e", "directory"), ("file", "file"), ("link", "symlink")]
    assert ex.handle("stat", {"path": "d/link"})["symlink_target"] == "file"
    assert ex.handle("stat", {"path": "d/link", "follow_symlinks": True})["type"] == "file"
    assert ex.handle("exists", {"path": "d/file"}) == {"exists": True, "type": "file"}
    assert ex.handle("exists", {"path": "d/file/x"}) == {"exists": False, "type": None}
    with pytest.raises(InvalidArgument, match="non-empty directory"):
        ex.handle("remove", {"path": "d"})
    assert ex.handle("remove", {"path": "d", "recursive": True}) == {"removed": True}
    assert ex.handle("remove", {"path": "d", "missing_ok": True}) == {"removed": False}
    with pytest.raises(NotFound):
        ex.handle("remove", {"path": "d"})
    with pytest.raises(InvalidArgument, match="workspace root"):
        ex.handle("remove", {"path": ".", "recursive": True})


def test_exec_captures_streams_exit_code_and_env(ex: Executor) -> None:
    result = ex.handle(
        "exec",
        {"shell": "echo out; echo err >&2; echo $FOO; exit 7", "env": {"FOO": "bar"}},
    )
    assert result["stdout"] == b"out\nbar\n"
    assert result["stderr"] == b"err\n"
    assert result["exit_code"] == 7
    assert result["timed_out"] is False
    assert ex.handle("exec", {"argv": ["cat"], "stdin": b"piped"})["stdout"] == b"piped"


def test_exec_timeout_kills_the_whole_group_and_returns(ex: Executor) -> None:
    started = time.monotonic()
    result = ex.handle("exec", {"shell": "sleep 30 & sleep 30; echo never", "timeout_ms": 300})
    assert result["timed_out"] is True
    assert result["exit_code"] < 0
    assert time.monotonic() - started < 5


def test_exec_returns_when_a_background_child_holds_the_pipe(ex: Executor) -> None:
    started = time.monotonic()
    result = ex.handle("exec", {"shell": "sleep 5 & echo started"})
    assert result["stdout"] == b"started\n"
    assert time.monotonic() - started < 3


def test_exec_output_is_bounded(ex: Executor) -> None:
    ex.max_output_bytes = 1000
    result = ex.handle("exec", {"shell": "head -c 100000 /dev/zero"})
    assert len(result["stdout"]) == 1000
    assert result["stdout_truncated"] is True


def test_exec_cancel_stops_the_process(ex: Executor) -> None:
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    result = ex.handle("exec", {"shell": "sleep 30"}, cancel)
    assert time.monotonic() - started < 5
    assert result["timed_out"] is False
    assert result["exit_code"] < 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "exactly one of argv and shell"),
        ({"argv": ["a"], "shell": "b"}, "exactly one of argv and shell"),
        ({"argv": []}, "non-empty list"),
        ({"argv": [1]}, "non-empty list"),
        ({"shell": "a\x00b"}, "NUL"),
        ({"argv": ["no-such-program-xyz"]}, "program not found"),
        ({"shell": "true", "cwd": "missing"}, "does not exist"),
        ({"shell": "true", "env": {"A": 1}}, "map strings to strings"),
    ],
)
def test_exec_bad_input(ex: Executor, args: dict[str, object], message: str) -> None:
    with pytest.raises((InvalidArgument, NotFound), match=message):
        ex.handle("exec", args)


def test_unknown_operation(ex: Executor) -> None:
    with pytest.raises(InvalidArgument, match="unknown operation"):
        ex.handle("format_disk", {})


def test_read_far_past_the_end_is_empty_not_an_error(ex: Executor) -> None:
    # Found by the RPC fuzzer: offset + length past 2**63 made pread fail (INTERNAL).
    Path(ex.workdir, "f.txt").write_text("abc")
    result = ex.handle(
        "read_file", {"path": "f.txt", "offset": 9223372036854775000, "length": 1000}
    )
    assert result == {"data": b"", "size": 3, "eof": True}

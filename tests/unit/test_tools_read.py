"""read/write/edit beyond the conformance cases: huge files, limits, races."""

from __future__ import annotations

import errno
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.tools import TOOL_NAMES
from sandboxd.executor.tools import ToolSession
from sandboxd.executor.tools import read as read_module
from sandboxd.executor.tools import write as write_module


@pytest.fixture
def tools(tmp_path: Path) -> Iterator[ToolSession]:
    s = ToolSession(str(tmp_path / "w"), state_dir=str(tmp_path / "s"))
    yield s
    s.close()


def test_tool_names() -> None:
    assert TOOL_NAMES == (
        "read", "write", "edit", "bash", "grep", "glob", "bash_output", "kill_shell"
    )  # fmt: skip


def test_unknown_tool_raises(tools: ToolSession) -> None:
    with pytest.raises(InvalidArgument):
        tools.run("cat", {})


def test_first_page_of_1_gib_file_is_fast(tools: ToolSession) -> None:
    big = Path(tools.workdir) / "big.txt"
    with open(big, "wb") as fh:
        fh.write(b"".join(b"%d\n" % i for i in range(1, 5001)))
        fh.truncate(1024**3)  # sparse: no disk, but a 1 GiB file
    started = time.monotonic()
    result = tools.run("read", {"file_path": "big.txt"})
    assert time.monotonic() - started < 1.0
    text = result["text"]
    assert isinstance(text, str)
    assert text.startswith("     1\t1\n")
    assert text.endswith(
        "[Showing lines 1-2000 of a file too large to count its lines. Use offset=2001 to "
        "read more.]"
    )
    assert result["fields"] == {
        "path": "big.txt",
        "total_lines": None,
        "start_line": 1,
        "end_line": 2000,
        "truncated": True,
        "next_offset": 2001,
        "cut_lines": [],
    }
    edit = tools.run("edit", {"file_path": "big.txt", "old_string": "1", "new_string": "x"})
    assert edit["is_error"] and "too large for edit" in str(edit["text"])


def test_large_file_read_state_is_hashed_in_background(tools: ToolSession) -> None:
    big = Path(tools.workdir) / "big.txt"
    big.write_bytes(b"x\n" * (10 * 1024 * 1024))  # 20 MiB
    assert not tools.run("read", {"file_path": "big.txt", "limit": 1})["is_error"]
    os.utime(big, (1, 1))  # a touch is not a change, even for a large file
    result = tools.run("write", {"file_path": "big.txt", "content": "small\n"})
    assert result["is_error"] is False, result["text"]


def test_write_over_size_limit(tools: ToolSession) -> None:
    tools.context.max_write_bytes = 1000
    result = tools.run("write", {"file_path": "huge.txt", "content": "x" * 1001})
    assert result["text"] == (
        "Error: content is 1001 bytes, over the limit of 1000 bytes. Nothing was written. "
        "Write the file in parts (write, then bash 'cat part2 >> file'), or generate it "
        "with bash."
    )
    assert not (Path(tools.workdir) / "huge.txt").exists()


def test_guard_can_be_turned_off(tmp_path: Path) -> None:
    s = ToolSession(str(tmp_path / "w"), state_dir=str(tmp_path / "s"), read_guard=False)
    (tmp_path / "w" / "a.txt").write_text("old\n")
    assert s.run("write", {"file_path": "a.txt", "content": "new\n"})["is_error"] is False
    assert (
        s.run("edit", {"file_path": "a.txt", "old_string": "new", "new_string": "x"})["is_error"]
        is False
    )


def test_concurrent_edits_to_one_file_all_apply(tools: ToolSession) -> None:
    tools.run("write", {"file_path": "log.txt", "content": "END\n"})

    def add(i: int) -> None:
        result = tools.run(
            "edit", {"file_path": "log.txt", "old_string": "END", "new_string": f"entry {i}\nEND"}
        )
        assert result["is_error"] is False, result["text"]

    threads = [threading.Thread(target=add, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = (Path(tools.workdir) / "log.txt").read_text().splitlines()
    assert sorted(lines) == sorted([f"entry {i}" for i in range(20)] + ["END"])


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (errno.EROFS, "the file system is read-only"),
        (errno.ENOSPC, "the file system is full (no space left on device)"),
        (errno.EACCES, "permission denied"),
    ],
)
def test_write_errors_are_results(
    tools: ToolSession, monkeypatch: pytest.MonkeyPatch, code: int, reason: str
) -> None:
    # Tests run as root, which no permission bit stops: fake the failure.
    def fail(path: str, data: bytes) -> None:
        raise OSError(code, os.strerror(code), path)

    monkeypatch.setattr(write_module, "atomic_write", fail)
    result = tools.run("write", {"file_path": "a.txt", "content": "x"})
    assert result["text"] == f"Error: cannot write a.txt: {reason}. Nothing was written."
    assert result["is_error"] is True


def test_read_permission_denied(tools: ToolSession, monkeypatch: pytest.MonkeyPatch) -> None:
    (Path(tools.workdir) / "secret.txt").write_text("x")

    def deny(path: str) -> object:
        raise PermissionError(errno.EACCES, "Permission denied", path)

    # read opens through open_regular (non-blocking, regular files only).
    monkeypatch.setattr(read_module, "open_regular", deny)
    result = tools.run("read", {"file_path": "secret.txt"})
    assert result["text"] == (
        "Error: permission denied: cannot read secret.txt. Check its permissions with bash "
        "(ls -l secret.txt)."
    )


def test_fifo_is_not_read(tools: ToolSession) -> None:
    subprocess.run(["mkfifo", os.path.join(tools.workdir, "pipe")], check=True)
    result = tools.run("read", {"file_path": "pipe"})
    assert result["is_error"] and "not a regular file" in str(result["text"])


def test_non_utf8_file_names_give_valid_text(tools: ToolSession) -> None:
    os.close(os.open(os.path.join(os.fsencode(tools.workdir), b"bad\xff.txt"), os.O_CREAT, 0o644))
    result = tools.run("glob", {"pattern": "*.txt"})
    assert result["text"] == "bad\ufffd.txt"
    assert result["fields"]["files"] == ["bad\ufffd.txt"]  # type: ignore[index]

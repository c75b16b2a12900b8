"""bash: the full log is made on disk only when the result is cut (``_LazyLog``)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from sandboxd.executor.tools.bash import Shell, _LazyLog


def test_cut_output_held_in_memory_is_logged_whole(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    shell = Shell(str(tmp_path / "w"), str(tmp_path / "s"))
    try:
        # 100,000 bytes: cut in the result, below the in-memory size of the log.
        result = shell.run({"command": "yes 123456789 | head -c 100000"}, threading.Event())
    finally:
        shell.close()
    assert result.fields["truncated"] is True
    log = tmp_path / "s" / "logs" / "bash-1.log"
    assert log.read_bytes() == b"123456789\n" * 10_000


def test_uncut_output_leaves_no_log(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    shell = Shell(str(tmp_path / "w"), str(tmp_path / "s"))
    try:
        for command in ("true", "echo hi", "yes | head -c 20000"):
            result = shell.run({"command": command}, threading.Event())
            assert result.fields["truncated"] is False
    finally:
        shell.close()
    assert os.listdir(tmp_path / "s" / "logs") == []


def test_lazy_log_spills_to_disk_past_its_memory(tmp_path: Path) -> None:
    log = _LazyLog(str(tmp_path), "x.log")
    chunk = b"a" * 100_000
    for _ in range(3):
        log.write(chunk)
    assert (tmp_path / "x.log").exists()  # past MEMORY: on disk already
    log.write(b"end")
    log.keep()
    assert (tmp_path / "x.log").read_bytes() == chunk * 3 + b"end"
    small = _LazyLog(str(tmp_path), "y.log")
    small.write(b"little")
    small.discard()
    assert not (tmp_path / "y.log").exists()

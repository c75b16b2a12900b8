"""Issue 23 item 15: a streamed exec's timeout holds while its output is not
taken (the pump blocked in emit, as behind a client that stops reading)."""

from __future__ import annotations

import secrets
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sandboxd.executor import process

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]


def test_the_deadline_holds_while_emit_is_blocked(tmp_path: Path) -> None:
    marker = f"flood-{secrets.token_hex(4)}"
    taken = threading.Event()
    release = threading.Event()

    def emit(stream: str, chunk: bytes) -> None:
        taken.set()
        release.wait()  # nobody reads

    result: dict[str, Any] = {}
    runner = threading.Thread(
        target=lambda: result.update(
            process.run(
                argv=["yes", marker], shell=None, cwd=str(tmp_path), env={}, stdin=b"",
                timeout_s=0.5, max_output=1024, cancel=threading.Event(), emit=emit,
            )
        )
    )  # fmt: skip
    runner.start()
    assert taken.wait(10)
    time.sleep(0.5 + process.KILL_GRACE_SECONDS + 1)
    alive = subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0
    release.set()
    runner.join(10)
    assert not alive, "the command outlived its timeout while its output was not taken"
    assert result["timed_out"] is True

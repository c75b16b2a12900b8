"""Issue 23 item 11: every way a named command can fail to start is a typed
error naming its cause (the executor's side; the service refuses most of
these before they reach it, contract.validation.command)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from sandboxd.contract import validation
from sandboxd.contract.errors import InvalidArgument, NotFound
from sandboxd.executor import process, spawn
from sandboxd.executor.processes import Processes
from sandboxd.executor.spawn import spawn_command

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]


def test_an_argument_past_the_kernels_limit_is_invalid_not_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"E2BIG: at most \d+ bytes in all, 131071 per"):
        spawn_command(["true", "x" * 200_000], cwd=str(tmp_path), env={})


def test_exec_and_processes_answer_the_same(tmp_path: Path) -> None:
    big = ["true", "x" * 200_000]
    with pytest.raises(InvalidArgument, match="E2BIG"):
        process.run(
            argv=big, shell=None, cwd=str(tmp_path), env={}, stdin=b"", timeout_s=5,
            max_output=1024, cancel=threading.Event(),
        )  # fmt: skip
    procs = Processes(str(tmp_path / "state"))
    with pytest.raises(InvalidArgument, match="E2BIG"):
        procs.start(command=big, cwd=str(tmp_path), env={}, pty=None)
    with pytest.raises(NotFound, match="working directory"):
        procs.start(command=["true"], cwd=str(tmp_path / "nowhere"), env={}, pty=None)


def test_the_services_limit_stays_under_what_this_kernel_takes() -> None:
    # The service refuses first (contract.validation.command), so the spawn
    # never meets E2BIG for a request it let through.
    assert os.sysconf("SC_ARG_MAX") // 2 >= validation.MAX_COMMAND_BYTES
    assert spawn._MAX_ARG_STRLEN == validation.MAX_ARG_STRLEN
    validation.command(None, "x" * (validation.MAX_ARG_STRLEN - 1), "", {})
    with pytest.raises(InvalidArgument, match="131071 bytes per argument"):
        validation.command(None, "x" * validation.MAX_ARG_STRLEN, "", {})
    with pytest.raises(InvalidArgument, match="at most 1048576 bytes are accepted"):
        validation.command(["true"], None, "", {f"V{i}": "x" for i in range(100_000)})

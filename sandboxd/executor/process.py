"""Run one process: bounded output, timeout, cancellation, optional streaming.

The process gets its own process group so a timeout or a cancel reaches every
child it started; reading stops soon after it exits even when background
children still hold the pipes open, so a call always returns.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandboxd.executor.spawn import spawn_command

#: Time between SIGTERM and SIGKILL for a process group that must stop.
KILL_GRACE_SECONDS = 2.0
#: After the main process exits, how long to wait for pipes held by orphans.
DRAIN_AFTER_EXIT_SECONDS = 0.2

Emit = Callable[[str, bytes], None]


@dataclass
class _Capture:
    limit: int
    data: bytearray
    truncated: bool = False

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if room >= len(chunk):
            self.data += chunk
        else:
            self.data += chunk[: max(room, 0)]
            self.truncated = True


def run(
    *,
    argv: Sequence[str] | None,
    shell: str | None,
    cwd: str,
    env: Mapping[str, str],
    stdin: bytes,
    timeout_s: float,
    max_output: int,
    cancel: threading.Event,
    emit: Emit | None = None,
) -> dict[str, Any]:
    """Run to completion; with ``emit``, output is streamed instead of captured."""
    command = list(argv) if argv is not None else ["bash", "-c", shell or ""]
    started = time.monotonic()
    proc = spawn_command(
        command, cwd=cwd, env=env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL
    )
    if stdin:
        threading.Thread(target=_feed, args=(proc, stdin), daemon=True).start()
    captures = {
        "stdout": _Capture(max_output, bytearray()),
        "stderr": _Capture(max_output, bytearray()),
    }
    timed_out = _pump(proc, captures, emit, started + timeout_s, cancel)
    exit_code = proc.wait()
    return {
        "stdout": bytes(captures["stdout"].data),
        "stderr": bytes(captures["stderr"].data),
        "exit_code": exit_code,
        "timed_out": timed_out,
        "duration_ms": int((time.monotonic() - started) * 1000),
        "stdout_truncated": captures["stdout"].truncated,
        "stderr_truncated": captures["stderr"].truncated,
    }


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(OSError):
        proc.stdin.write(data)
    with contextlib.suppress(OSError):
        proc.stdin.close()


def _pump(
    proc: subprocess.Popen[bytes],
    captures: dict[str, _Capture],
    emit: Emit | None,
    deadline: float,
    cancel: threading.Event,
) -> bool:
    """Move output until the process is done; return whether it timed out."""
    assert proc.stdout is not None and proc.stderr is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "stdout")
    selector.register(proc.stderr, selectors.EVENT_READ, "stderr")
    timed_out = False
    exited_at: float | None = None
    # A streaming client that stops reading holds this thread in emit (its
    # credits): the deadline is then kept by a watchdog of its own.
    watchdog = _Watchdog(proc, deadline, cancel) if emit is not None else None
    try:
        while selector.get_map():
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > DRAIN_AFTER_EXIT_SECONDS:
                break
            if exited_at is None and (now >= deadline or cancel.is_set()):
                timed_out = not cancel.is_set()
                stop_group(proc)
                exited_at = time.monotonic()
                continue
            for key, _ in selector.select(timeout=0.05):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                if emit is not None:
                    emit(key.data, chunk)
                else:
                    captures[key.data].add(chunk)
    finally:
        selector.close()
        proc.stdout.close()
        proc.stderr.close()
        if watchdog is not None:
            watchdog.close()
    return timed_out or (watchdog is not None and watchdog.fired)


class _Watchdog:
    """Stops the process group at the deadline (or a cancel) whatever the pump
    is doing. Issue 23 item 15: ExecStream's timeout was not enforced while
    the client read nothing."""

    def __init__(self, proc: subprocess.Popen[bytes], deadline: float, cancel: threading.Event):
        self.fired = False
        self._proc = proc
        self._deadline = deadline
        self._cancel = cancel
        self._done = threading.Event()
        threading.Thread(target=self._run, name="exec-deadline", daemon=True).start()

    def _run(self) -> None:
        while not self._done.wait(min(0.1, max(0.0, self._deadline - time.monotonic()))):
            if self._proc.poll() is not None:
                return
            if self._cancel.is_set() or time.monotonic() >= self._deadline:
                self.fired = not self._cancel.is_set()
                stop_group(self._proc)
                return

    def close(self) -> None:
        self._done.set()


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, then SIGKILL it after the grace period."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_SECONDS), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            # Children that outlived the leader still get the group signal.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return
        except subprocess.TimeoutExpired:
            continue

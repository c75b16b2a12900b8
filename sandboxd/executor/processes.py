"""Long-lived processes: stdin, a pseudo-terminal, re-attachable output.

A process started here lives in the executor, not in a call: clients come
and go (a dropped connection, a daemon restart) and re-attach by handle.
One reader thread per process moves its output into a bounded ring of
recent bytes (``RING_BYTES``) and a capped log file, and never waits for
anybody: output nobody is reading only ages out of the ring. An attach
replays from an offset (what is still in the ring), then follows live,
sending events against the stream's credits (see ``credits``); bytes that
aged out before a slow or late client got them are reported as ``missed``.

Offsets count every output byte of the process (stdout and stderr, or the
terminal) from 0, so a client that saw up to offset N asks for N.

Everything a process sends is untrusted: it is only ever bytes in a ring
of fixed size and a log of capped size.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import itertools
import os
import select
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sandboxd.contract.errors import (
    Conflict,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
)
from sandboxd.executor import identity, logs
from sandboxd.executor.spawn import spawn_command

#: Recent output kept per process for re-attaching clients.
RING_BYTES = 1 << 20
#: The per-process log file stops growing here.
LOG_CAP_BYTES = 64 << 20
#: Processes remembered per workspace (running ones are never forgotten).
MAX_PROCESSES = 64
#: Clients attached at once per workspace: each holds one of the executor's
#: worker threads, which the other calls of the workspace need too.
MAX_ATTACHED = 32
#: Largest event sent to a client.
CHUNK = 64 * 1024
MAX_TERMINAL_SIZE = 10_000
#: After the process exits, how long to keep reading pipes held by its children.
DRAIN_AFTER_EXIT_S = 0.2
_STDIN_WAIT_S = 5.0
_POLL_S = 0.1

Emit = Callable[[dict[str, Any]], None]


@dataclass
class _Output:
    """A ring of recent (offset, stream, bytes) pieces, and the total so far."""

    pieces: collections.deque[tuple[int, str, bytes]] = field(default_factory=collections.deque)
    held: int = 0
    total: int = 0

    def add(self, stream: str, data: bytes) -> None:
        self.pieces.append((self.total, stream, data))
        self.total += len(data)
        self.held += len(data)
        while self.held > RING_BYTES and len(self.pieces) > 1:
            _, _, old = self.pieces.popleft()
            self.held -= len(old)

    @property
    def first(self) -> int:
        return self.pieces[0][0] if self.pieces else self.total

    def since(self, offset: int) -> list[tuple[int, str, bytes]]:
        """Pieces from ``offset`` on (the first one cut to start there)."""
        out = []
        for start, stream, data in self.pieces:
            end = start + len(data)
            if end <= offset:
                continue
            if start < offset:
                data, start = data[offset - start :], offset
            out.append((start, stream, data))
        return out


class Process:
    def __init__(
        self,
        handle: str,
        proc: subprocess.Popen[bytes],
        command: list[str],
        *,
        master: int | None,
        log_path: str,
        log_fd: int,
    ) -> None:
        self.handle = handle
        self.proc = proc
        self.command = command
        self.master = master
        self.log_path = log_path
        self._log_fd = log_fd  # created by the executor (logs.create), written here only
        self.started = time.time()
        self.output = _Output()
        self.cond = threading.Condition()
        self.done = False  # the process exited and its output is all in
        self.stdin_closed = False
        self.exit_code: int | None = None
        self.signal: int | None = None
        # Held by whatever uses the terminal or stdin descriptor, and by the
        # reader when it closes them: a number closed here may be reused by the
        # next process at once, and must never be written to after.
        self._stdin_lock = threading.Lock()
        self._fds_closed = False
        if master is not None:
            self._stdin_fd: int | None = master
        else:
            assert proc.stdin is not None
            self._stdin_fd = proc.stdin.fileno()
            os.set_blocking(self._stdin_fd, False)
        self._reader = threading.Thread(target=self._read, name=f"proc-{handle}", daemon=True)
        self._reader.start()

    # ------------------------------------------------------------ output

    def _sources(self) -> dict[int, str]:
        if self.master is not None:
            return {self.master: "stdout"}
        assert self.proc.stdout is not None and self.proc.stderr is not None
        return {self.proc.stdout.fileno(): "stdout", self.proc.stderr.fileno(): "stderr"}

    def _read(self) -> None:
        sources = self._sources()
        exited_at: float | None = None
        try:
            with open(self._log_fd, "wb") as log:
                logged = 0
                while sources:
                    if exited_at is None and self.proc.poll() is not None:
                        exited_at = time.monotonic()
                    if exited_at is not None and time.monotonic() - exited_at > DRAIN_AFTER_EXIT_S:
                        break
                    ready, _, _ = select.select(list(sources), [], [], _POLL_S)
                    for fd in ready:
                        try:
                            chunk = os.read(fd, CHUNK)
                        except OSError:  # EIO: every holder of the terminal closed it
                            chunk = b""
                        if not chunk:
                            del sources[fd]
                            continue
                        with self.cond:
                            self.output.add(sources[fd], chunk)
                            self.cond.notify_all()
                        if logged < LOG_CAP_BYTES:
                            with contextlib.suppress(OSError):
                                log.write(chunk[: LOG_CAP_BYTES - logged])
                                log.flush()
                            logged += len(chunk)
        except OSError:
            pass  # the log could not be opened (disk full): the ring still works
        finally:
            code = self.proc.wait()
            self._close_fds()
            with self.cond:
                if code < 0:
                    self.signal, self.exit_code = -code, 128 - code
                else:
                    self.exit_code = code
                self.done = True
                self.cond.notify_all()

    def _close_fds(self) -> None:
        with self._stdin_lock:
            self._fds_closed = True
            if self.master is not None:
                with contextlib.suppress(OSError):
                    os.close(self.master)
            for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()

    def attach(self, offset: int | None, cancel: threading.Event, emit: Emit) -> dict[str, Any]:
        """Send output from ``offset`` (None: all still held) until the process is done."""
        with self.cond:
            position = self.output.first if offset is None else offset
        if position < 0:
            raise InvalidArgument(f"offset must not be negative (got {position})")
        missed = 0
        while not cancel.is_set():
            with self.cond:
                if position > self.output.total:
                    raise InvalidArgument(
                        f"offset {position} is past the output of {self.handle} "
                        f"({self.output.total} bytes so far)"
                    )
                if position < self.output.first:
                    missed += self.output.first - position
                    position = self.output.first
                pieces = self.output.since(position)
                if not pieces:
                    if self.done:
                        return {**self.info(), "missed": missed, "offset": position}
                    self.cond.wait(_POLL_S)
                    continue
            for start, stream, data in pieces:
                # Waits for credits: only this client's stream slows down.
                emit({"offset": start, "stream": stream, "data": data})
                position = start + len(data)
                if cancel.is_set():
                    break
        return {**self.info(), "missed": missed, "offset": position}

    # ------------------------------------------------------------ input and control

    def write(self, data: bytes, close: bool) -> int:
        with self._stdin_lock:
            if self._fds_closed or self.done or self.proc.poll() is not None:
                raise Conflict(
                    f"process {self.handle} has exited ({self._ended()}); it reads no more input"
                )
            if self.stdin_closed:
                raise Conflict(f"the stdin of process {self.handle} is closed")
            fd = self._stdin_fd
            assert fd is not None
            written = 0
            deadline = time.monotonic() + _STDIN_WAIT_S
            while written < len(data):
                try:
                    written += os.write(fd, data[written:])
                    continue
                except BlockingIOError:
                    pass
                except OSError as exc:
                    raise Conflict(
                        f"process {self.handle} no longer reads its input: {exc}"
                    ) from exc
                if time.monotonic() > deadline:
                    raise ResourceExhausted(
                        f"process {self.handle} is not reading its input: {written} of "
                        f"{len(data)} bytes were written; send the rest later"
                    )
                select.select([], [fd], [], _POLL_S)
            if close:
                self._close_stdin()
            return written

    def _close_stdin(self) -> None:
        self.stdin_closed = True
        if self.master is not None:
            # A terminal has no end of file of its own: send the EOF character.
            with contextlib.suppress(OSError):
                os.write(self.master, b"\x04")
            return
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        self._stdin_fd = None

    def resize(self, rows: int, cols: int) -> None:
        if self.master is None:
            raise Conflict(f"process {self.handle} has no terminal to resize")
        if self.done:
            raise Conflict(f"process {self.handle} has exited ({self._ended()})")
        size = struct.pack("HHHH", rows, cols, 0, 0)
        with self._stdin_lock, contextlib.suppress(OSError):
            if not self._fds_closed:
                fcntl.ioctl(self.master, termios.TIOCSWINSZ, size)

    def send_signal(self, number: int) -> None:
        if self.proc.poll() is not None:
            raise Conflict(f"process {self.handle} has exited ({self._ended()})")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, number)

    def _ended(self) -> str:
        code = self.proc.returncode
        if code is not None and code < 0:
            return f"killed by signal {-code}"
        return f"exit code {code}"

    def info(self) -> dict[str, Any]:
        running = not self.done and self.proc.poll() is None
        code = None if running else self.proc.returncode
        return {
            "handle": self.handle,
            "pid": self.proc.pid,
            "command": list(self.command),
            "state": "running" if running else "exited",
            "exit_code": None if code is None else (128 - code if code < 0 else code),
            "signal": -code if code is not None and code < 0 else None,
            "pty": self.master is not None,
            "started": self.started,
            "output_bytes": self.output.total,
            "log_path": self.log_path,
        }

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def _positive(value: Any, name: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= maximum:
        raise InvalidArgument(f"{name} must be an integer from 1 to {maximum} (got {value!r})")
    return value


class Processes:
    """The long-lived processes of one workspace."""

    def __init__(self, state_dir: str) -> None:
        self.logs = os.path.join(state_dir, "processes")
        self._procs: dict[str, Process] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._attached = 0

    def attach(
        self, handle: Any, offset: int | None, cancel: threading.Event, emit: Emit
    ) -> dict[str, Any]:
        process = self.get(handle)
        with self._lock:
            if self._attached >= MAX_ATTACHED:
                raise ResourceExhausted(
                    f"{MAX_ATTACHED} clients are attached to processes of this sandbox; "
                    "detach some first"
                )
            self._attached += 1
        try:
            return process.attach(offset, cancel, emit)
        finally:
            with self._lock:
                self._attached -= 1

    def start(
        self,
        *,
        command: Sequence[str],
        cwd: str,
        env: Mapping[str, str],
        pty: tuple[int, int] | None,
    ) -> dict[str, Any]:
        if pty is not None:
            rows, cols = (_positive(n, name, MAX_TERMINAL_SIZE) for n, name in
                          zip(pty, ("rows", "cols"), strict=True))  # fmt: skip
        with self._lock:
            if sum(1 for p in self._procs.values() if not p.done) >= MAX_PROCESSES:
                raise ResourceExhausted(
                    f"{MAX_PROCESSES} processes are running in this sandbox; stop some first"
                )
            self._forget_finished()
            handle = f"proc_{next(self._ids)}"
        logs.prepare(self.logs)
        log_path = os.path.join(self.logs, f"{handle}.log")
        log_fd = logs.create(self.logs, f"{handle}.log")
        master: int | None = None
        slave: int | None = None
        try:
            if pty is not None:
                # Made as the executor: the terminal is root's (mode 0620, group
                # tty), so another process of the sandbox user cannot open
                # /dev/pts/N and write into this process's output.
                with identity.as_executor():
                    master, slave = os.openpty()
                fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
                proc = spawn_command(command, cwd=cwd, env=env, terminal=slave)
            else:
                proc = spawn_command(command, cwd=cwd, env=env, stdin=subprocess.PIPE)
        except BaseException:
            _close(master, log_fd)
            raise
        finally:
            _close(slave)
        process = Process(
            handle, proc, list(command), master=master, log_path=log_path, log_fd=log_fd
        )
        with self._lock:
            self._procs[handle] = process
        return process.info()

    def _forget_finished(self) -> None:
        finished = [h for h, p in self._procs.items() if p.done]
        for handle in finished[: max(0, len(self._procs) - MAX_PROCESSES + 1)]:
            del self._procs[handle]

    def get(self, handle: Any) -> Process:
        if not isinstance(handle, str) or not handle:
            raise InvalidArgument("handle must be a non-empty string")
        with self._lock:
            process = self._procs.get(handle)
            known = sorted(self._procs, key=lambda h: int(h.rpartition("_")[2] or 0))
        if process is None:
            listing = ", ".join(known[-20:]) if known else "none"
            raise NotFound(f"no process {handle[:100]!r} in this sandbox (processes: {listing})")
        return process

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            procs = list(self._procs.values())
        return [p.info() for p in procs]

    def close(self) -> None:
        with self._lock:
            procs = list(self._procs.values())
            self._procs.clear()
        for process in procs:
            process.stop()


def _close(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def check_signal(number: Any) -> int:
    if isinstance(number, bool) or not isinstance(number, int):
        raise InvalidArgument(f"signal must be an integer (got {number!r})")
    if number not in {int(s) for s in signal.valid_signals()} or number == 0:
        raise InvalidArgument(
            f"signal {number} is out of range: give a signal number from 1 to "
            f"{int(signal.SIGRTMAX)} (e.g. 2 for SIGINT, 15 for SIGTERM, 9 for SIGKILL)"
        )
    return number

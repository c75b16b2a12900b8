"""openai-agents' interactive processes (``pty_exec_start`` / ``pty_write_stdin``)
on sandboxd's process API.

A process the model starts lives in the workspace's executor, not in a socket
held by this client: its output is kept there and read over one attached
stream per process, which a pump task copies into the queue openai-agents'
``collect_pty_output`` drains. Output is collected until the caller's yield
time or the process ends; a process that ends is forgotten (its id with it),
as the SDK's own backends do.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from agents.sandbox.errors import ExecTimeoutError, ExecTransportError, PtySessionNotFoundError
from agents.sandbox.session.pty_output import collect_pty_output
from agents.sandbox.session.pty_types import (
    PTY_PROCESSES_MAX,
    PtyExecUpdate,
    allocate_pty_process_id,
    clamp_pty_yield_time_ms,
    process_id_to_prune_from_meta,
    resolve_pty_write_yield_time_ms,
)

from runtime_client.errors import SandboxdError
from runtime_client.processes import Process
from runtime_client.sandbox import Sandbox

#: The terminal a ``tty=True`` process gets (rows, columns).
TERMINAL_SIZE = (24, 80)
#: Times the pump attaches again to a process whose output stream ended before its exit.
REATTACHES = 3
#: What ``pty_exec_start`` waits for output by default, as openai-agents' own backends.
START_YIELD_MS = 10_000
WRITE_YIELD_MS = 250


@dataclass
class _Entry:
    sandbox: Sandbox
    process: Process
    tty: bool
    last_used: float = field(default_factory=time.monotonic)
    output_chunks: deque[bytes] = field(default_factory=deque)
    output_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    output_notify: asyncio.Event = field(default_factory=asyncio.Event)
    output_closed: asyncio.Event = field(default_factory=asyncio.Event)
    pump: asyncio.Task[None] | None = None
    exit_code: int | None = None


class PtyProcesses:
    """The interactive processes of one session, by openai-agents' process id."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._entries: dict[int, _Entry] = {}
        self._reserved: set[int] = set()

    async def start(
        self,
        sandbox: Sandbox,
        argv: Sequence[str],
        *,
        tty: bool,
        timeout: float | None,
        yield_time_s: float | None,
        max_output_tokens: int | None,
    ) -> PtyExecUpdate:
        try:
            async with asyncio.timeout(timeout):
                process = await sandbox.start_process(
                    list(argv), pty=TERMINAL_SIZE if tty else None
                )
                if not tty:
                    # As on any backend: a process without a terminal reads no input.
                    process = await _close_stdin(sandbox, process)
        except TimeoutError as exc:
            raise ExecTimeoutError(command=argv, timeout_s=timeout, cause=exc) from exc
        except SandboxdError as exc:
            raise ExecTransportError(command=argv, cause=exc, context={"retry_safe": True}) from exc
        entry = _Entry(sandbox=sandbox, process=process, tty=tty)
        entry.pump = asyncio.create_task(_pump(entry))
        async with self._lock:
            process_id = allocate_pty_process_id(self._reserved)
            self._reserved.add(process_id)
            pruned = self._prune_if_full()
            self._entries[process_id] = entry
        if pruned is not None:
            await _terminate(pruned)
        wait_ms = START_YIELD_MS if yield_time_s is None else int(yield_time_s * 1000)
        wait_ms = clamp_pty_yield_time_ms(wait_ms)
        return await self._collect(process_id, entry, wait_ms, max_output_tokens)

    async def write(
        self,
        session_id: int,
        chars: str,
        *,
        yield_time_s: float | None,
        max_output_tokens: int | None,
    ) -> PtyExecUpdate:
        async with self._lock:
            entry = self._entries.get(session_id)
        if entry is None:
            raise PtySessionNotFoundError(session_id=session_id)
        if chars:
            if not entry.tty:
                raise RuntimeError("stdin is not available for this process")
            if entry.exit_code is None and not entry.output_closed.is_set():
                # It may end meanwhile: the collect below then reports its exit.
                with contextlib.suppress(SandboxdError):
                    await entry.process.write(chars.encode())
        entry.last_used = time.monotonic()
        wait_ms = WRITE_YIELD_MS if yield_time_s is None else int(yield_time_s * 1000)
        wait_ms = resolve_pty_write_yield_time_ms(yield_time_ms=wait_ms, input_empty=chars == "")
        return await self._collect(session_id, entry, wait_ms, max_output_tokens)

    async def terminate_all(self) -> None:
        async with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
            self._reserved.clear()
        for entry in entries:
            await _terminate(entry)

    async def _collect(
        self, process_id: int, entry: _Entry, wait_ms: int, max_output_tokens: int | None
    ) -> PtyExecUpdate:
        output, original_tokens, closed = await collect_pty_output(
            output_chunks=entry.output_chunks,
            output_lock=entry.output_lock,
            output_notify=entry.output_notify,
            is_done=entry.output_closed.is_set,
            yield_time_ms=wait_ms,
            max_output_tokens=max_output_tokens,
        )
        exit_code = entry.exit_code if closed else None
        if exit_code is None:
            return PtyExecUpdate(process_id, output, None, original_tokens)
        async with self._lock:
            self._entries.pop(process_id, None)
            self._reserved.discard(process_id)
        await _terminate(entry)
        return PtyExecUpdate(None, output, exit_code, original_tokens)

    def _prune_if_full(self) -> _Entry | None:
        if len(self._entries) < PTY_PROCESSES_MAX:
            return None
        meta = [(pid, e.last_used, e.output_closed.is_set()) for pid, e in self._entries.items()]
        victim = process_id_to_prune_from_meta(meta)
        if victim is None:
            return None
        self._reserved.discard(victim)
        return self._entries.pop(victim, None)


async def _close_stdin(sandbox: Sandbox, process: Process) -> Process:
    """Close the process's stdin; the handle to read it from afterwards.

    A process that exits first reads no more input: the daemon ends the stream
    with Conflict, and the close itself may then fail on it (grpc.aio reports a
    send that races the end as INTERNAL). Then it is tried once more on a fresh
    attachment, where Conflict (exited) is the answer to expect; the pump reads
    the output and the exit from a fresh attachment either way.
    """
    try:
        await process.close_stdin()
        return process
    except SandboxdError:
        with contextlib.suppress(SandboxdError):
            await process.detach()
    again = await sandbox.connect_process(process.handle, offset=0)
    try:
        await again.close_stdin()
        return again
    except SandboxdError:
        with contextlib.suppress(SandboxdError):
            await again.detach()  # its stream ended with the refusal
    return await sandbox.connect_process(process.handle, offset=0)


async def _pump(entry: _Entry) -> None:
    try:
        for _ in range(REATTACHES + 1):
            with contextlib.suppress(SandboxdError):
                async for chunk in entry.process:
                    async with entry.output_lock:
                        entry.output_chunks.append(chunk.data)
                    entry.output_notify.set()
            if entry.process.exit is not None:
                break
            # The stream ended before the exit: closing the stdin of a process that
            # had already exited ends it with FAILED_PRECONDITION, and a daemon restart
            # drops it. The process lives in the executor: attach again where it stopped.
            try:
                entry.process = await entry.sandbox.connect_process(
                    entry.process.handle, offset=entry.process.offset
                )
            except SandboxdError:
                break  # gone with its sandbox: the output ends here, without an exit
    finally:
        if entry.process.exit is not None:
            entry.exit_code = entry.process.exit.info.exit_code
        entry.output_closed.set()
        entry.output_notify.set()


async def _terminate(entry: _Entry) -> None:
    if entry.exit_code is None and not entry.output_closed.is_set():
        with contextlib.suppress(SandboxdError):
            await entry.process.signal(signal.SIGKILL)  # its whole process group
    if entry.pump is not None:
        entry.pump.cancel()
        with contextlib.suppress(asyncio.CancelledError, SandboxdError):
            await entry.pump
    with contextlib.suppress(SandboxdError):
        await entry.process.detach()

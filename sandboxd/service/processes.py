"""Long-lived processes: start, attach to output, write stdin, resize, signal, list."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from sandboxd.contract import validation
from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.models import (
    ProcessChunk,
    ProcessEvent,
    ProcessExit,
    ProcessInfo,
    ProcessRequest,
)
from sandboxd.executor.processes import MAX_TERMINAL_SIZE
from sandboxd.service.core import ServiceCore


class Processes(ServiceCore):
    async def start_process(self, instance_id: str, request: ProcessRequest) -> ProcessInfo:
        validation.command(request.argv, request.shell, request.cwd, request.env)
        args: dict[str, Any] = {
            "argv": list(request.argv) if request.argv is not None else None,
            "shell": request.shell,
            "cwd": request.cwd,
            "env": dict(request.env),
        }
        if request.pty is not None:
            rows, cols = request.pty
            _check_terminal_size(rows, cols)
            args["pty"] = {"rows": rows, "cols": cols}
        workspace = await self._workspace(instance_id)
        return ProcessInfo.from_raw(await workspace.call("proc_start", args))

    async def process_output(
        self, instance_id: str, handle: str, offset: int | None = None
    ) -> AsyncIterator[ProcessEvent]:
        """The output of ``handle`` from ``offset`` (None: all still kept), live, then its exit."""
        _check_handle(handle)
        if offset is not None and offset < 0:
            raise InvalidArgument(f"offset must not be negative (got {offset})")
        workspace = await self._workspace(instance_id)
        args: dict[str, Any] = {"handle": handle}
        if offset is not None:
            args["offset"] = offset
        async for event in workspace.stream("proc_attach", args):
            result = event.get("result")
            if isinstance(result, dict):
                missed, end = result.get("missed"), result.get("offset")
                yield ProcessExit(
                    info=ProcessInfo.from_raw(result),
                    missed=missed if isinstance(missed, int) else 0,
                    offset=end if isinstance(end, int) else 0,
                )
                return
            data = event.get("data")
            if isinstance(data, bytes):
                stream = "stderr" if event.get("stream") == "stderr" else "stdout"
                start = event.get("offset")
                yield ProcessChunk(
                    stream=stream, data=data, offset=start if isinstance(start, int) else 0
                )

    def connect_process(
        self, instance_id: str, handle: str, offset: int | None = None
    ) -> InProcessConnection:
        """An attachment for in-process clients (the local factory); see ConnectProcess."""
        return InProcessConnection(self, instance_id, handle, offset)

    async def write_process(
        self, instance_id: str, handle: str, data: bytes, *, close: bool = False
    ) -> int:
        _check_handle(handle)
        self._check_payload(len(data), "data")
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("proc_write", {"handle": handle, "data": data, "eof": close})
        written = raw.get("written")
        return written if isinstance(written, int) else 0

    async def resize_process(
        self, instance_id: str, handle: str, rows: int, cols: int
    ) -> ProcessInfo:
        _check_handle(handle)
        _check_terminal_size(rows, cols)
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("proc_resize", {"handle": handle, "rows": rows, "cols": cols})
        return ProcessInfo.from_raw(raw)

    async def signal_process(self, instance_id: str, handle: str, signal: int) -> ProcessInfo:
        _check_handle(handle)
        if not 1 <= signal <= MAX_SIGNAL:
            raise InvalidArgument(
                f"signal {signal} is out of range: give a signal number from 1 to {MAX_SIGNAL} "
                "(e.g. 2 for SIGINT, 15 for SIGTERM, 9 for SIGKILL)"
            )
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("proc_signal", {"handle": handle, "signal": signal})
        return ProcessInfo.from_raw(raw)

    async def list_processes(self, instance_id: str) -> list[ProcessInfo]:
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("proc_list", {})
        entries = raw.get("processes")
        if not isinstance(entries, list):
            return []
        return [ProcessInfo.from_raw(e) for e in entries[:1000] if isinstance(e, dict)]


#: Linux's largest signal number (SIGRTMAX).
MAX_SIGNAL = 64


def _check_handle(handle: str) -> None:
    if not handle or len(handle) > 64 or "\x00" in handle:
        raise InvalidArgument("handle must be 1-64 characters without NUL, e.g. proc_1")


def _check_terminal_size(rows: int, cols: int) -> None:
    for name, value in (("rows", rows), ("cols", cols)):
        if not 1 <= value <= MAX_TERMINAL_SIZE:
            raise InvalidArgument(f"pty {name} must be from 1 to {MAX_TERMINAL_SIZE} (got {value})")


class InProcessConnection:
    """A process attachment without a wire: output and stdin are service calls."""

    def __init__(
        self, service: Processes, instance_id: str, handle: str, offset: int | None
    ) -> None:
        self._service = service
        self._instance_id = instance_id
        self._handle = handle
        self._output = service.process_output(instance_id, handle, offset)

    async def send(self, data: bytes, *, close: bool = False) -> None:
        await self._service.write_process(self._instance_id, self._handle, data, close=close)

    def events(self) -> AsyncIterator[ProcessEvent]:
        return self._output

    async def aclose(self) -> None:
        await self._output.aclose()  # type: ignore[attr-defined]

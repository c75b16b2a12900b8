"""The daemon's end of socket pipes (executor.pipes): byte streams across the wall.

Engine-neutral: a pipe is built from a workspace's ``call`` and ``stream``
alone, so every backend gets ``connect_port`` and ``accept_pipes`` by mixing
in ``PipeEndpoints``. Memory per pipe is bounded both ways: towards the
daemon by the stream's credit window (executor.credits) of ``CHUNK``-byte
events, towards the sandbox by one awaited write of at most ``MAX_WRITE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sandboxd.contract.errors import SandboxdError, SandboxUnavailable
from sandboxd.executor.pipes import CHUNK, MAX_WRITE

__all__ = ["CHUNK", "MAX_WRITE", "Listener", "Pipe", "PipeEndpoints", "accept_pipes", "connect"]


class Pipe(Protocol):
    """One TCP-like byte stream across the sandbox wall."""

    #: The sandbox's side is connected (a pipe is handed out only once it is).
    opened: bool

    async def read(self) -> bytes:
        """The next chunk; b"" at the end of the sandbox's side."""
        ...

    @property
    def at_eof(self) -> bool:
        """The sandbox's side has ended: the next read gives b""."""
        ...

    async def write(self, data: bytes) -> None:
        """Returns when the sandbox's socket took the bytes (backpressure)."""
        ...

    async def shutdown_write(self) -> None:
        """Half-close towards the sandbox (its reader sees the end)."""
        ...

    async def close(self) -> None:
        """Abort both directions; idempotent."""
        ...


@dataclass(frozen=True, slots=True)
class Listener:
    """A loopback listener in the sandbox (``port`` 0: any free port)."""

    name: str
    host: str
    port: int


class _Calls(Protocol):
    async def call(self, op: str, args: Mapping[str, Any]) -> dict[str, Any]: ...

    def stream(self, op: str, args: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]: ...


class ChannelPipe:
    """A pipe whose sandbox side is a streamed executor operation."""

    def __init__(self, calls: _Calls, pipe_id: str, events: AsyncIterator[dict[str, Any]]) -> None:
        self._calls = calls
        self.pipe_id = pipe_id
        self._events = events
        self._eof = False
        self._closed = False
        self._write_lock = asyncio.Lock()
        # Reads and closes come from different tasks; an async generator
        # cannot be closed while another task is inside it, so one task owns
        # it and hands events over one at a time (no buffer beyond the window).
        self._handover: asyncio.Queue[dict[str, Any] | BaseException] = asyncio.Queue(maxsize=1)
        self._pump: asyncio.Task[None] | None = None
        self.opened = False

    async def wait_opened(self) -> None:
        """Wait for the sandbox side's socket; raise what its open raised."""
        try:
            first = await anext(aiter(self._events))
        except StopAsyncIteration:
            raise SandboxUnavailable("the pipe ended before it opened") from None
        if not first.get("connected"):
            await self._finish()
            raise SandboxUnavailable("the pipe did not open")
        self._pump = asyncio.create_task(self._run_pump(), name=f"pipe-{self.pipe_id}")
        self.opened = True

    async def _run_pump(self) -> None:
        try:
            async for event in self._events:
                await self._handover.put(event)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            await self._handover.put(exc)

    @property
    def at_eof(self) -> bool:
        return self._eof or self._closed

    async def read(self) -> bytes:
        if self._eof or self._closed:
            return b""
        item = await self._handover.get()
        if isinstance(item, BaseException):
            self._eof = True
            raise item
        data = item.get("data")
        if "result" in item or item.get("eof"):
            # The end may ride with the last bytes (executor.pipes).
            self._eof = True
            return data if isinstance(data, bytes) and "result" not in item else b""
        if not isinstance(data, bytes):
            return await self.read()
        return data

    async def write(self, data: bytes) -> None:
        if self._closed:
            raise SandboxUnavailable("the pipe is closed")
        async with self._write_lock:
            for start in range(0, len(data), MAX_WRITE):
                await self._calls.call(
                    "pipe_write",
                    {"pipe": self.pipe_id, "data": bytes(data[start : start + MAX_WRITE])},
                )

    async def shutdown_write(self) -> None:
        if self._closed:
            return
        async with self._write_lock:
            await self._calls.call("pipe_shutdown", {"pipe": self.pipe_id})

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._finish()

    async def _finish(self) -> None:
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._pump
        # Closing the stream cancels the executor's side (its socket closes).
        with contextlib.suppress(Exception):
            await self._events.aclose()  # type: ignore[attr-defined]


def _new_id() -> str:
    return secrets.token_hex(8)


async def connect(
    calls: _Calls, port: int, host: str = "127.0.0.1", data: bytes = b""
) -> ChannelPipe:
    """A pipe to ``host:port`` on the sandbox's loopback.

    ``data``: the first bytes towards the sandbox, sent with the connect (no
    round trip of their own); up to ``MAX_WRITE`` go with it, the rest after.
    """
    pipe_id = _new_id()
    args: dict[str, Any] = {"pipe": pipe_id, "host": host, "port": port}
    if data:
        args["data"] = bytes(data[:MAX_WRITE])
    events = calls.stream("pipe_connect", args)
    pipe = ChannelPipe(calls, pipe_id, events)
    try:
        await pipe.wait_opened()
    except BaseException:
        await pipe.close()
        raise
    if len(data) > MAX_WRITE:
        await pipe.write(data[MAX_WRITE:])
    return pipe


async def accept_pipes(
    calls: _Calls, listeners: Sequence[Listener]
) -> AsyncIterator[tuple[str, ChannelPipe]]:
    """Listen on the sandbox's loopback; yield (listener name, pipe) per connection.

    The listeners close when the iteration ends. A connection the caller is
    too slow to take waits in the executor (bounded, then closed).
    """
    args = {"listeners": [{"name": x.name, "host": x.host, "port": x.port} for x in listeners]}
    events = calls.stream("pipe_listen", args)
    try:
        async for event in events:
            conn = event.get("accepted")
            name = event.get("listener")
            if not isinstance(conn, str) or not isinstance(name, str):
                continue
            pipe_id = _new_id()
            attached = calls.stream("pipe_attach", {"pipe": pipe_id, "conn": conn})
            pipe = ChannelPipe(calls, pipe_id, attached)
            try:
                await pipe.wait_opened()
            except SandboxdError:
                await pipe.close()
                continue  # the connection went away before it was taken
            yield name, pipe
    finally:
        with contextlib.suppress(Exception):
            await events.aclose()  # type: ignore[attr-defined]


class PipeEndpoints:
    """``Workspace.connect_port`` / ``accept_pipes`` for any workspace with call and stream."""

    async def connect_port(
        self: _Calls, port: int, host: str = "127.0.0.1", data: bytes = b""
    ) -> Pipe:
        return await connect(self, port, host, data)

    def accept_pipes(
        self: _Calls, listeners: Sequence[Listener]
    ) -> AsyncIterator[tuple[str, Pipe]]:
        return accept_pipes(self, listeners)  # type: ignore[return-value]

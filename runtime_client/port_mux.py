"""The client end of ``OpenPorts``: connections to ports inside sandboxes over shared streams.

A connection of its own ``OpenPort`` stream costs grpc-aio a call on each
end, most of what a small GET through a forwarded port cost beyond the GET.
Here a few long-lived streams carry every connection of a transport; each
connection has windows of its own both ways (``sandboxd.contract.port_mux``),
so a slow reader on either side holds back its own connection only. A
stream that breaks fails the connections on it (as a dropped ``OpenPort``
would) and the next connection opens a new one. A daemon without
``OpenPorts`` says so in its first answer, before any connection rides it:
the caller falls back to ``OpenPort``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
from collections.abc import Callable
from typing import Any

import grpc

from runtime_client._status import CallEnd, error_from_status
from sandboxd.contract.errors import SandboxdError, SandboxUnavailable
from sandboxd.contract.port_mux import CHUNK, CONNECTIONS_PER_STREAM, INPUT_WINDOW
from sandboxd.contract.v1 import sandbox_pb2 as pb

#: Bytes of a connection's output the daemon may send before this client
#: has read them; more are granted once half of it was read (a small
#: response costs no grant).
OUTPUT_WINDOW = 1 << 20
_GRANT_AT = OUTPUT_WINDOW // 2


class MuxUnsupported(Exception):
    """The daemon has no OpenPorts RPC; nothing was opened."""


class MuxConnection:
    """One connection on a shared stream (runtime_client.transport.PortConnection)."""

    def __init__(self, stream: PortStream, conn_id: int) -> None:
        self._stream = stream
        self.id = conn_id
        #: The daemon has answered (opened, or the server's first bytes).
        self.opened = False
        self._inbox: collections.deque[bytes] = collections.deque()
        self._eof = False
        self._error: SandboxdError | None = None
        self._arrived = asyncio.Event()
        #: Bytes read and not yet granted back to the daemon.
        self._ungranted = 0
        #: Bytes the daemon still takes towards the server.
        self._window = INPUT_WINDOW
        self._window_opened = asyncio.Event()
        self._write_shut = False
        self._closed = False

    # ------------------------------------------------------------ from the stream's reader

    def deliver(self, answer: pb.PortsOutput) -> None:
        if not answer.HasField("error"):
            self.opened = True  # a connection that could not open never was
        if answer.window:
            self._window += answer.window
            self._window_opened.set()
        if answer.data:
            self._inbox.append(bytes(answer.data))
        if answer.eof:
            self._eof = True
        if answer.HasField("error"):
            self.fail(error_from_status(answer.error.code, answer.error.message))
        self._arrived.set()

    def fail(self, error: SandboxdError) -> None:
        if self._error is None:
            self._error = error
        self._stream.forget(self)
        self._arrived.set()
        self._window_opened.set()

    async def wait_answered(self) -> None:
        while not self.opened and self._error is None:
            self._arrived.clear()
            await self._arrived.wait()
        if self._error is not None:
            raise self._error

    # ------------------------------------------------------------ PortConnection

    async def read(self) -> bytes:
        while True:
            if self._inbox:
                data = self._inbox.popleft()
                self._ungranted += len(data)
                if self._ungranted >= _GRANT_AT and not self._eof and self._error is None:
                    self._stream.send(pb.PortsInput(conn_id=self.id, window=self._ungranted))
                    self._ungranted = 0
                return data
            if self._error is not None:
                raise self._error
            if self._eof:
                return b""
            self._arrived.clear()
            await self._arrived.wait()

    async def write(self, data: bytes) -> None:
        for start in range(0, len(data), CHUNK):
            piece = data[start : start + CHUNK]
            while self._window < len(piece) and self._error is None:
                self._window_opened.clear()
                await self._window_opened.wait()
            if self._error is not None:
                raise self._error
            self._window -= len(piece)
            self._stream.send(pb.PortsInput(conn_id=self.id, data=piece))

    async def shutdown_write(self) -> None:
        if self._error is not None:
            raise self._error
        if not self._write_shut:
            self._write_shut = True
            self._stream.send(pb.PortsInput(conn_id=self.id, close_write=True))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # A connection ended both ways (the server's end read, this side's
        # half-close sent) the daemon has forgotten by the time it reads what
        # comes next; otherwise the reset tells it to.
        if self._error is None and not (self._eof and self._write_shut):
            self._stream.send(pb.PortsInput(conn_id=self.id, reset=True))
        # A read or write still waiting on it ends.
        self.fail(SandboxUnavailable("the connection was closed"))


class PortStream:
    """One ``OpenPorts`` call and the connections on it."""

    def __init__(self, call: Any, end: CallEnd) -> None:
        self._call = call
        #: What the daemon ended the call with (grpc may lose it to a write's INTERNAL).
        self._end = end
        self._connections: dict[int, MuxConnection] = {}
        self._ids = itertools.count(1)
        self._outbox: asyncio.Queue[pb.PortsInput] = asyncio.Queue()
        self.broken: SandboxdError | None = None
        self._writer = asyncio.create_task(self._write(), name="open-ports-writer")
        self._reader = asyncio.create_task(self._read(), name="open-ports-reader")

    @classmethod
    async def start(cls, open_call: Callable[[], Any]) -> PortStream:
        call = open_call()
        end = CallEnd(call)
        # The daemon answers with its headers at once; one without the RPC,
        # or refusing the caller, ends the call instead.
        with contextlib.suppress(grpc.RpcError):
            # Asked after the call already ended (a refused token on a loaded
            # machine), core answers INTERNAL: the call's own status is below.
            await call.initial_metadata()
        if call.done():
            code = await call.code()
            name, details = await end.instead_of((code.name, await call.details() or ""))
            await _end_call(call)
            if name == grpc.StatusCode.UNIMPLEMENTED.name:
                raise MuxUnsupported()
            raise error_from_status(name, details or "the port stream ended")
        return cls(call, end)

    @property
    def has_room(self) -> bool:
        return self.broken is None and len(self._connections) < CONNECTIONS_PER_STREAM

    def open(
        self, instance_id: str, port: int, host: str, data: bytes, *, wait: bool
    ) -> MuxConnection:
        conn = MuxConnection(self, next(self._ids))
        self._connections[conn.id] = conn
        first = pb.PortInput(
            instance_id=instance_id, port=port, host=host, data=data[:CHUNK], compact=not wait
        )
        self.send(pb.PortsInput(conn_id=conn.id, open=first, window=OUTPUT_WINDOW))
        return conn

    def send(self, message: pb.PortsInput) -> None:
        if self.broken is None:
            self._outbox.put_nowait(message)

    def forget(self, conn: MuxConnection) -> None:
        if self._connections.get(conn.id) is conn:
            del self._connections[conn.id]

    async def close(self) -> None:
        self._break(SandboxUnavailable("the port stream was closed"))
        for task in (self._writer, self._reader):
            task.cancel()
        for task in (self._writer, self._reader):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await _end_call(self._call)

    def _break(self, error: SandboxdError) -> None:
        if self.broken is None:
            self.broken = error
        for conn in list(self._connections.values()):
            conn.fail(error)

    async def _write(self) -> None:
        try:
            while True:
                await self._call.write(await self._outbox.get())
        except asyncio.CancelledError:
            raise
        except grpc.RpcError as exc:
            self._break(await self._end.error(exc))
        except Exception as exc:  # the call ended under it (cancelled, closed)
            self._break(SandboxUnavailable(f"the port stream failed: {exc!r}"))

    async def _read(self) -> None:
        try:
            while True:
                answer = await self._call.read()
                if answer is grpc.aio.EOF:
                    break
                conn = self._connections.get(answer.conn_id)
                if conn is not None:
                    conn.deliver(answer)
            self._break(SandboxUnavailable("the daemon ended the port stream"))
        except asyncio.CancelledError:
            raise
        except grpc.RpcError as exc:
            self._break(await self._end.error(exc))
        except Exception as exc:
            self._break(SandboxUnavailable(f"the port stream failed: {exc!r}"))


async def _end_call(call: Any) -> None:
    # With interceptors (a token) grpc feeds writes through an async generator
    # of its own; ending it before the cancel keeps it from being finalized
    # while it still waits for a write.
    with contextlib.suppress(Exception):
        await call.done_writing()
    call.cancel()


class PortStreams:
    """The streams a transport's connections ride: as many as their number needs."""

    def __init__(self, open_call: Callable[[], Any]) -> None:
        self._open_call = open_call
        self._streams: list[PortStream] = []
        self._lock = asyncio.Lock()
        #: None until the first stream says whether the daemon has OpenPorts.
        self.supported: bool | None = None

    async def open(
        self, instance_id: str, port: int, host: str, data: bytes, *, wait: bool
    ) -> MuxConnection:
        """Raises ``MuxUnsupported`` when the daemon has no OpenPorts (nothing opened)."""
        stream = await self._stream_with_room()
        conn = stream.open(instance_id, port, host, data, wait=wait)
        if wait:
            try:
                await conn.wait_answered()
            except BaseException:
                await conn.close()
                raise
        if len(data) > CHUNK:
            await conn.write(data[CHUNK:])
        return conn

    async def _stream_with_room(self) -> PortStream:
        async with self._lock:  # many connections at once open one stream, not many
            self._streams = [s for s in self._streams if s.broken is None]
            for stream in self._streams:
                if stream.has_room:
                    return stream
            try:
                stream = await PortStream.start(self._open_call)
            except MuxUnsupported:
                self.supported = False
                raise
            self.supported = True
            self._streams.append(stream)
            return stream

    async def close(self) -> None:
        streams, self._streams = self._streams, []
        for stream in streams:
            await stream.close()

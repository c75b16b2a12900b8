"""``OpenPorts``: a forwarder's connections to servers inside sandboxes, many over one stream.

``OpenPort`` pays for a gRPC stream per connection (its HTTP/2 stream,
headers, authentication, and grpc-aio's per-call work on both ends: most of
what a small GET through a forwarded port cost beyond the GET itself). Here
one long-lived stream carries them all; each connection is named by the
client's ``conn_id`` and runs as ``OpenPort`` would.

HTTP/2's flow control is the stream's, so it cannot hold back one connection
without the others: each direction of each connection has a window of its
own (``sandboxd.contract.port_mux``). The daemon reads a connection's server
only while the client's window for it is open, and takes at most
``INPUT_WINDOW`` bytes of its input beyond what it wrote to the server,
granting more as it writes. A server that never reads, or a local client
that never reads, holds back its own connection only. Answers leave through
one bounded queue: a client that stops reading the stream stops every
connection of that stream (and nothing else), and the daemon holds at most
the queue and a chunk per connection for it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING

from sandboxd.contract.errors import InvalidArgument, ResourceExhausted
from sandboxd.contract.port_mux import (
    CHUNK,
    CONNECTIONS_PER_CALLER,
    CONNECTIONS_PER_STREAM,
    INPUT_WINDOW,
)
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.observability.calls import mark_failed, observe
from sandboxd.service.ports import Pipe
from sandboxd.transports.grpc.budgets import Callers, Outstanding
from sandboxd.transports.grpc.status import describe

if TYPE_CHECKING:
    from typing_extensions import Self

OpenPort = Callable[[str, int, str, bytes], Awaitable[Pipe]]

#: Answers waiting for the client to read the stream.
_QUEUED_ANSWERS = 16


def port_callers() -> Callers:
    return Callers(lambda: CONNECTIONS_PER_CALLER)


def _failed(conn_id: int, error: BaseException) -> pb.PortsOutput:
    code, message = describe(error)
    return pb.PortsOutput(conn_id=conn_id, error=pb.CallError(code=code.name, message=message))


class _Connection:
    """One connection's state between the stream's reader and its relay."""

    def __init__(self, conn_id: int, first: pb.PortInput, window: int) -> None:
        self.id = conn_id
        self.first = first
        #: The client's bytes not yet written to the server, and their total
        #: with the chunk being written (what the window bounds).
        self.inbox: collections.deque[bytes] = collections.deque()
        self.unwritten = 0
        self.write_closed = first.close_write
        #: The server's end (or its last bytes) is on its way to the client.
        self.server_ended = False
        self.input = asyncio.Event()
        #: Bytes of output the client still takes.
        self.window = window
        self.window_opened = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def take(self, data: bytes) -> None:
        if len(data) > CHUNK:
            raise InvalidArgument(f"a message carries at most {CHUNK} bytes (got {len(data)})")
        if self.unwritten + len(data) > INPUT_WINDOW:
            raise ResourceExhausted(
                f"connection {self.id} was sent {self.unwritten + len(data)} bytes beyond what "
                f"the server took; its window is {INPUT_WINDOW} (wait for window grants)"
            )
        self.unwritten += len(data)
        self.inbox.append(data)
        self.input.set()

    def close_write(self) -> None:
        self.write_closed = True
        self.input.set()

    def grant(self, window: int) -> None:
        self.window += window
        self.window_opened.set()


class PortMuxStream:
    """One ``OpenPorts`` stream: its connections, their windows, one queue of answers."""

    def __init__(self, open_port: OpenPort, caller: Outstanding) -> None:
        self._open_port = open_port
        self._answers: asyncio.Queue[pb.PortsOutput | None] = asyncio.Queue(_QUEUED_ANSWERS)
        self._connections: dict[int, _Connection] = {}
        #: Every connection's relay until it has unwound (a reset one too).
        self._tasks: set[asyncio.Task[None]] = set()
        self._mine = Outstanding(lambda: CONNECTIONS_PER_STREAM)
        self._caller = caller

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # The stream ended: whatever is still open is reset inside.
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def serve(self, requests: AsyncIterator[pb.PortsInput]) -> AsyncIterator[pb.PortsOutput]:
        reader = asyncio.create_task(self._read(requests), name="open-ports-reader")
        try:
            while (answer := await self._answers.get()) is not None:
                yield answer
            await reader  # its failure, if any, is the stream's
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def _read(self, requests: AsyncIterator[pb.PortsInput]) -> None:
        try:
            async for message in requests:
                await self._take(message)
            # The client ended its side: no new connection; the open ones go on.
            await asyncio.gather(*self._tasks, return_exceptions=True)
        except BaseException:
            self._end()
            raise
        await self._answers.put(None)

    def _end(self) -> None:
        """The serving loop's last item. A failing stream does not wait for
        room the client may never make: its answers are moot."""
        while True:
            try:
                self._answers.put_nowait(None)
                return
            except asyncio.QueueFull:
                self._answers.get_nowait()

    async def _take(self, message: pb.PortsInput) -> None:
        conn = self._connections.get(message.conn_id)
        if message.HasField("open"):
            if conn is not None:
                await self._send(
                    _failed(message.conn_id, InvalidArgument("conn_id is already open"))
                )
                return
            conn = await self._start(message)
            if conn is None:
                return
        elif conn is None:
            return  # a connection that ended; what was in flight for it is moot
        try:
            if message.data:
                conn.take(message.data)
        except Exception as exc:
            if conn.task is not None:
                conn.task.cancel()
            await self._send(_failed(conn.id, exc))
            return
        if message.close_write:
            conn.close_write()
            self._forget_if_ended(conn)
        if message.window:
            conn.grant(message.window)
        if message.reset:
            # Forgotten at once, not when its task has unwound: the client may
            # open the next connection in its place in the very next message.
            self._forget(conn)
            if conn.task is not None:
                conn.task.cancel()

    async def _start(self, message: pb.PortsInput) -> _Connection | None:
        first = message.open
        refusal: Exception | None = None
        if not first.instance_id or not first.port:
            refusal = InvalidArgument("an open must name instance_id and port")
        elif len(first.data) > CHUNK:
            refusal = InvalidArgument(f"an open carries at most {CHUNK} bytes")
        elif self._mine.count >= CONNECTIONS_PER_STREAM:
            refusal = ResourceExhausted(
                f"this stream has {CONNECTIONS_PER_STREAM} connections open; open another stream"
            )
        elif self._caller.count >= CONNECTIONS_PER_CALLER:
            refusal = ResourceExhausted(
                f"this caller has {CONNECTIONS_PER_CALLER} port connections open"
            )
        if refusal is not None:
            # Awaited: a client that opens and never reads stops being read.
            await self._send(_failed(message.conn_id, refusal))
            return None
        conn = _Connection(message.conn_id, first, message.window)
        self._connections[conn.id] = conn
        self._mine.add(1)
        self._caller.add(1)
        conn.task = asyncio.create_task(self._run(conn), name=f"open-ports-{conn.id}")
        self._tasks.add(conn.task)
        conn.task.add_done_callback(self._tasks.discard)
        return conn

    async def _send(self, answer: pb.PortsOutput) -> None:
        await self._answers.put(answer)

    async def _run(self, conn: _Connection) -> None:
        pipe: Pipe | None = None
        first = conn.first
        try:
            # Counted as OpenPort: the same connection, whichever RPC carried it.
            with observe("grpc", "OpenPort", instance_id=first.instance_id[:128]):
                try:
                    pipe = await self._open_port(
                        first.instance_id, first.port, first.host, first.data
                    )
                    if not first.compact:
                        await self._send(pb.PortsOutput(conn_id=conn.id, opened=True))
                    writer = asyncio.create_task(self._to_server(conn, pipe))
                    try:
                        await self._from_server(conn, pipe)
                        await writer  # the client's direction may go on after the server's
                    finally:
                        writer.cancel()
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await writer
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    mark_failed(exc)
                    # Forgotten before the client hears: it may reuse the room at once.
                    self._forget(conn)
                    await self._send(_failed(conn.id, exc))
        finally:
            self._forget(conn)
            if pipe is not None:
                await pipe.close()

    def _forget_if_ended(self, conn: _Connection) -> None:
        """Both directions have ended as the client sees them: it forgets the
        connection without a reset, and may open another in its room at once
        (what is left here, the half-close inside, finishes on its own)."""
        if conn.server_ended and conn.write_closed:
            self._forget(conn)

    def _forget(self, conn: _Connection) -> None:
        if self._connections.get(conn.id) is conn:
            del self._connections[conn.id]
            self._mine.done(1)
            self._caller.done(1)

    async def _from_server(self, conn: _Connection, pipe: Pipe) -> None:
        while True:
            while conn.window <= 0:
                conn.window_opened.clear()
                await conn.window_opened.wait()
            data = await pipe.read()
            conn.window -= len(data)
            # The end rides the last bytes: a small response is one message.
            done = not data or pipe.at_eof
            await self._send(pb.PortsOutput(conn_id=conn.id, data=data, eof=done))
            if done:
                conn.server_ended = True
                self._forget_if_ended(conn)
                return

    async def _to_server(self, conn: _Connection, pipe: Pipe) -> None:
        while True:
            if conn.inbox:
                data = conn.inbox.popleft()
                await pipe.write(data)
                conn.unwritten -= len(data)
                await self._send(pb.PortsOutput(conn_id=conn.id, window=len(data)))
            elif conn.write_closed:
                await pipe.shutdown_write()
                return
            else:
                conn.input.clear()
                await conn.input.wait()

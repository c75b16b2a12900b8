"""A sandbox's port on this machine: ``Sandbox.forward_port`` (and ``sandboxctl port-forward``).

Like ``kubectl port-forward``: a local listener, and for each connection it
accepts one stream to the port inside the sandbox (``open_port``), bytes
relayed both ways with each direction ending on its own, until the forward
is closed. The sandbox's network stays off: the bytes ride the daemon's
channel to the executor.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType

from runtime_client.transport import PortConnection, SandboxTransport

#: Bytes read from a local connection at a time.
CHUNK = 256 << 10
#: How long a new connection's first bytes are waited for before its stream
#: opens: they go with the open (a client that speaks first, as HTTP does,
#: saves a round trip to the sandbox). A server that speaks first (SSH, SMTP)
#: waits this once per connection.
FIRST_BYTES_WAIT_S = 0.002


class PortForward:
    """A local listener whose connections reach ``remote_port`` in the sandbox.

    ``async with`` it, or ``await start()`` / ``await close()``; ``port`` is
    the local port (given, or picked by the system when 0).
    """

    def __init__(
        self,
        transport: SandboxTransport,
        instance_id: str,
        remote_port: int,
        *,
        local_port: int = 0,
        local_host: str = "127.0.0.1",
        remote_host: str = "localhost",
    ) -> None:
        self._transport = transport
        self.instance_id = instance_id
        self.remote_port = remote_port
        self.remote_host = remote_host
        self.local_host = local_host
        self._local_port = local_port
        self._server: asyncio.Server | None = None
        self._relays: set[asyncio.Task[None]] = set()
        #: Connections accepted, and those whose stream could not open.
        self.accepted = 0
        self.failed = 0

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the forward is not started")
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> PortForward:
        self._server = await asyncio.start_server(
            self._accept, self.local_host, self._local_port, reuse_address=True
        )
        return self

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self) -> None:
        """Stop listening and end every open connection."""
        if self._server is not None:
            self._server.close()
        # The relays go first: since Python 3.12 wait_closed() waits for every
        # connection, and a client or server that says nothing keeps its own open.
        while self._relays:
            relays = list(self._relays)
            for task in relays:
                task.cancel()
            for task in relays:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
                self._relays.discard(task)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def __aenter__(self) -> PortForward:
        return await self.start()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        self.accepted += 1
        conn: PortConnection | None = None
        try:
            first = await _first_bytes(reader)
            try:
                # Not waiting for the connection inside: its first answer is
                # the server's bytes (one message less each way).
                conn = await self._transport.open_port(
                    self.instance_id, self.remote_port, self.remote_host, first, wait=False
                )
                try:
                    await relay(reader, writer, conn)
                finally:
                    await conn.close()
            except Exception:
                if conn is not None and conn.opened:
                    raise
                # Nothing listens inside (or the sandbox is gone): the local
                # client sees its connection closed, as with a refused one.
                self.failed += 1
        except asyncio.CancelledError:
            # close() ends it. Not raised on: Python 3.11's listener takes a
            # cancelled connection task for a failed one and logs it.
            pass
        finally:
            self._relays.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def _first_bytes(reader: asyncio.StreamReader) -> bytes:
    try:
        # A timeout scope where there is one (3.11+): no task of its own per connection.
        if hasattr(asyncio, "timeout"):
            async with asyncio.timeout(FIRST_BYTES_WAIT_S):
                return await reader.read(CHUNK)
        return await asyncio.wait_for(reader.read(CHUNK), FIRST_BYTES_WAIT_S)
    except (asyncio.TimeoutError, TimeoutError):
        return b""


async def relay(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: PortConnection
) -> None:
    """Bytes both ways until both directions ended, or either side failed."""

    async def outward() -> None:
        while data := await reader.read(CHUNK):
            await conn.write(data)
        await conn.shutdown_write()

    # The server's direction runs here, the client's beside it: one task per
    # connection, not two and a watcher. Either failing (a reset, the
    # sandbox gone) ends both.
    here = asyncio.current_task()
    assert here is not None
    beside = asyncio.ensure_future(outward())

    waiting_beside = False

    def stop_here_on_failure(done: asyncio.Future[None]) -> None:
        # Awaiting it, this task hears of the failure from the await itself.
        if not waiting_beside and not done.cancelled() and done.exception() is not None:
            here.cancel()

    beside.add_done_callback(stop_here_on_failure)
    try:
        while data := await conn.read():
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        waiting_beside = True
        await beside
    except asyncio.CancelledError:
        if beside.done() and not beside.cancelled() and beside.exception() is not None:
            raise beside.exception() from None  # type: ignore[misc]
        raise
    finally:
        beside.remove_done_callback(stop_here_on_failure)
        beside.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await beside

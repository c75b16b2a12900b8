"""``Process``: a handle on a long-lived process in a sandbox.

    proc = await sandbox.start_process(["python3", "-i", "-q"])
    await proc.write("print(6 * 7)\\n")
    print(await proc.read_until(b"42"))
    await proc.close_stdin()
    done = await proc.wait()

The process lives in the sandbox, not in the handle: ``detach`` (or losing
the connection, or the daemon restarting) leaves it running, and
``sandbox.connect_process(handle, offset=...)`` picks it up again with the
output it produced meanwhile (what the sandbox still keeps of it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from runtime_client.errors import Conflict
from runtime_client.transport import ProcessConnection, SandboxTransport
from sandboxd.contract.models import ProcessChunk, ProcessExit, ProcessInfo


class Process:
    def __init__(
        self,
        transport: SandboxTransport,
        instance_id: str,
        info: ProcessInfo,
        *,
        offset: int | None = None,
    ) -> None:
        self._transport = transport
        self.instance_id = instance_id
        self.info = info
        self._offset = offset
        self._connection: ProcessConnection | None = None
        self._events: AsyncIterator[ProcessChunk | ProcessExit] | None = None
        self.exit: ProcessExit | None = None
        #: Offset just past the last byte this handle has received.
        self.offset = offset or 0
        self._pending = b""

    def __repr__(self) -> str:
        return f"Process({self.instance_id!r}, {self.handle!r})"

    @property
    def handle(self) -> str:
        return self.info.handle

    def _connect(self) -> ProcessConnection:
        if self._connection is None:
            self._connection = self._transport.connect_process(
                self.instance_id, self.handle, self._offset
            )
        return self._connection

    # ------------------------------------------------------------ input

    async def write(self, data: bytes | str) -> None:
        """Send ``data`` to the process's stdin (or its terminal)."""
        if self.exit is not None:
            raise Conflict(f"process {self.handle} has exited; it reads no more input")
        payload = data.encode() if isinstance(data, str) else data
        await self._connect().send(payload)

    async def close_stdin(self) -> None:
        """End the input (on a terminal: the EOF character, ^D)."""
        if self.exit is not None:
            raise Conflict(f"process {self.handle} has exited; its input is closed")
        await self._connect().send(b"", close=True)

    # ------------------------------------------------------------ output

    def __aiter__(self) -> AsyncIterator[ProcessChunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[ProcessChunk]:
        if self._pending:
            data, self._pending = self._pending, b""
            yield ProcessChunk("stdout", data, self.offset - len(data))
        while True:
            event = await self._next_event()
            if event is None:
                return
            yield event

    async def _next_event(self) -> ProcessChunk | None:
        if self.exit is not None:
            return None
        if self._events is None:
            self._events = aiter(self._connect().events())
        event = await anext(self._events, None)
        if event is None:
            return None
        if isinstance(event, ProcessExit):
            self.exit = event
            self.info = event.info
            self.offset = event.offset
            return None
        self.offset = event.offset + len(event.data)
        return event

    async def read_until(self, marker: bytes | str, *, limit: int = 1 << 20) -> bytes:
        """Output up to and including ``marker`` (all of it if the process ends first)."""
        wanted = marker.encode() if isinstance(marker, str) else marker
        seen = self._pending
        self._pending = b""
        while wanted not in seen:
            if len(seen) > limit:
                raise Conflict(f"{limit} bytes of output came without {wanted!r}")
            event = await self._next_event()
            if event is None:
                return seen
            seen += event.data
        cut = seen.index(wanted) + len(wanted)
        self._pending = seen[cut:]
        return seen[:cut]

    async def wait(self) -> ProcessExit:
        """Read (and drop) the output until the process ends; its exit."""
        self._pending = b""
        while await self._next_event() is not None:
            pass
        if self.exit is None:
            raise Conflict(f"the connection to process {self.handle} ended before its exit")
        return self.exit

    # ------------------------------------------------------------ control

    async def resize(self, rows: int, cols: int) -> ProcessInfo:
        self.info = await self._transport.resize_process(self.instance_id, self.handle, rows, cols)
        return self.info

    async def signal(self, signal: int) -> ProcessInfo:
        self.info = await self._transport.signal_process(self.instance_id, self.handle, signal)
        return self.info

    async def detach(self) -> None:
        """Drop the connection; the process keeps running."""
        connection, self._connection, self._events = self._connection, None, None
        self._offset = self.offset  # a later read picks up where this one stopped
        if connection is not None:
            await connection.aclose()

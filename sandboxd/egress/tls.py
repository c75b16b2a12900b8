"""TLS over any byte stream (a sandbox pipe, an upstream socket), with memory BIOs.

asyncio's own TLS needs a transport; a sandbox connection is an executor
pipe (read/write/shutdown_write/close), so the record layer is driven by
hand: ``ssl.SSLObject`` on two ``MemoryBIO`` s, fed from ``read`` and flushed
to ``write``. One lock orders every flush, so records from the reading and
the writing task never interleave on the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Protocol

READ_SIZE = 64 * 1024
#: Most plaintext one ``TlsStream.read`` returns (a sandbox pipe's largest write).
BATCH = 256 * 1024


class ByteStream(Protocol):
    """What both ends of a relay offer (``backends.shared.pipes.Pipe`` is one)."""

    async def read(self) -> bytes: ...

    async def write(self, data: bytes) -> None: ...

    async def shutdown_write(self) -> None: ...

    async def close(self) -> None: ...


class SocketStream:
    """A ``ByteStream`` over an asyncio stream pair (the upstream's connection)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self) -> bytes:
        return await self._reader.read(BATCH)

    async def write(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def shutdown_write(self) -> None:
        if self._writer.can_write_eof() and not self._writer.is_closing():
            self._writer.write_eof()

    async def close(self) -> None:
        self._writer.close()


class TlsStream:
    """The plaintext side of TLS spoken over ``raw``."""

    def __init__(
        self,
        raw: ByteStream,
        context: ssl.SSLContext,
        *,
        server_side: bool,
        server_hostname: str | None = None,
        initial: bytes = b"",
    ) -> None:
        self._raw = raw
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        if initial:  # bytes the gateway already read (the ClientHello it checked)
            self._incoming.write(initial)
        self._tls = context.wrap_bio(
            self._incoming, self._outgoing, server_side=server_side, server_hostname=server_hostname
        )
        self._flush_lock = asyncio.Lock()

    async def handshake(self) -> None:
        while True:
            try:
                self._tls.do_handshake()
            except ssl.SSLWantReadError:
                await self._flush()
                if not await self._fill():
                    raise ConnectionError("the peer closed during the TLS handshake") from None
                continue
            await self._flush()
            return

    async def read(self) -> bytes:
        """Plaintext; b"" at the peer's close (close_notify or the stream's end)."""
        ended = False
        while True:
            try:
                data = self._tls.read(READ_SIZE)
            except ssl.SSLWantReadError:
                await self._flush()  # a key update or ticket may want an answer
                if ended:
                    return b""
                ended = not await self._fill()
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""
            await self._flush()
            return self._more(data)

    def _more(self, first: bytes) -> bytes:
        """``first`` and every further whole record already received, up to
        ``BATCH``: one read of the raw stream carries several TLS records (16 KiB
        each at most), and each write towards a sandbox is a round trip."""
        parts, size = [first], len(first)
        while size < BATCH:
            try:
                more = self._tls.read(BATCH - size)
            except ssl.SSLError:  # no whole record left (or the end: the next read says)
                break
            if not more:
                break
            parts.append(more)
            size += len(more)
        return b"".join(parts) if len(parts) > 1 else first

    async def write(self, data: bytes) -> None:
        # All of it into records, then one write of the raw stream.
        view = memoryview(data)
        while view:
            written = self._tls.write(view[:READ_SIZE])
            view = view[written:]
        await self._flush()

    async def shutdown_write(self) -> None:
        # close_notify is queued; the peer's own need not be waited for.
        with contextlib.suppress(ssl.SSLError):
            self._tls.unwrap()
        await self._flush()
        await self._raw.shutdown_write()

    async def close(self) -> None:
        await self._raw.close()

    def selected_alpn(self) -> str | None:
        return self._tls.selected_alpn_protocol()

    async def _fill(self) -> bool:
        data = await self._raw.read()
        if not data:
            self._incoming.write_eof()
            return False
        self._incoming.write(data)
        return True

    async def _flush(self) -> None:
        async with self._flush_lock:
            data = self._outgoing.read()
            if data:
                await self._raw.write(data)

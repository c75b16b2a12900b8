"""Buffered reads over a pipe: whole heads and exact lengths, bounded."""

from __future__ import annotations

from typing import Protocol

from sandboxd.contract.errors import InvalidArgument

__all__ = ["Buffered", "Source"]


class Source(Protocol):
    async def read(self) -> bytes: ...


class Buffered:
    """Reads a source in chunks; keeps what was read past a head for the relay."""

    def __init__(self, source: Source) -> None:
        self._source = source
        self.buffer = bytearray()

    async def fill(self) -> bool:
        """One more chunk into the buffer; False at the end of the source."""
        chunk = await self._source.read()
        if not chunk:
            return False
        self.buffer += chunk
        return True

    async def exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            if not await self.fill():
                raise InvalidArgument("the connection ended in the middle of a request")
        out = bytes(self.buffer[:n])
        del self.buffer[:n]
        return out

    async def until(self, separator: bytes, limit: int) -> bytes:
        """Everything up to and including ``separator``, at most ``limit`` bytes."""
        start = 0
        while True:
            at = self.buffer.find(separator, start)
            if at >= 0:
                end = at + len(separator)
                if end > limit:
                    break
                out = bytes(self.buffer[:end])
                del self.buffer[:end]
                return out
            if len(self.buffer) > limit:
                break
            start = max(0, len(self.buffer) - len(separator) + 1)
            if not await self.fill():
                raise InvalidArgument("the connection ended in the middle of a request")
        raise InvalidArgument(f"the request head is longer than {limit} bytes")

    def take(self) -> bytes:
        """What is buffered, emptying the buffer."""
        out = bytes(self.buffer)
        self.buffer.clear()
        return out

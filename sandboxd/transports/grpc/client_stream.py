"""A client-streaming call's error is sent after the client stops sending.

grpc's asyncio client loses the server's status when the server ends a
client-streaming call while the client is still writing: the server sends
its trailers and resets the stream, a client write then fails, and grpc
(``_StreamRequestMixin._write``, grpc/grpc#36066) replaces the status it
received with ``INTERNAL: Internal error from Core``. An upload of 32 MiB
into a full disk answered that in 6 of 15 tries instead of
RESOURCE_EXHAUSTED (issue 23 item 11). So when such a call fails, the
daemon first reads and drops what the client still sends, until it
half-closes, for at most ``DRAIN_SECONDS``; memory stays one message. A
client that keeps sending longer than that may still meet grpc's bug.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio

#: Longest a failed call waits for its client to finish sending.
DRAIN_SECONDS = 10.0


@contextlib.asynccontextmanager
async def answered_after_the_stream(messages: AsyncIterator[Any]) -> AsyncIterator[None]:
    try:
        yield
    except Exception:
        with anyio.move_on_after(DRAIN_SECONDS), contextlib.suppress(Exception):
            async for _ in messages:
                pass
        raise

"""The guard itself (sandboxd.transports.http.guard) under uvicorn, with small ASGI apps of its own.

tests/http/test_slow_clients.py drives it through the daemon; here the cases
that need an application to behave in a particular way (slow to read), and
the check that the installed uvicorn still has what the guard relies on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from uvicorn.protocols.http.h11_impl import H11Protocol

from sandboxd.contract.errors import SandboxUnavailable
from sandboxd.transports.http.connection_limits import ConnectionLimits
from sandboxd.transports.http.errors import error_response
from sandboxd.transports.http.guard import (
    GuardedH11Protocol,
    _raw_response,
    check_uvicorn,
    guarded_protocol,
)
from sandboxd.transports.http.server import HttpServer

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

IDLE_S = 0.5
BOUND_S = 30.0
MiB = 1 << 20


async def _slow_reader(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads its body only after several idle timeouts, then answers with its size."""
    assert scope["type"] == "http"
    await asyncio.sleep(4 * IDLE_S)
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
        await asyncio.sleep(IDLE_S / 20)  # a slow consumer all along
    body = str(size).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def _serving(app: Any, limits: ConnectionLimits) -> AsyncIterator[int]:
    server = HttpServer(app, "127.0.0.1:0", drain_seconds=1, limits=limits)
    await server.start()
    try:
        yield server.port
    finally:
        await server.stop()


async def test_time_the_application_takes_to_read_is_not_the_clients_idle_time() -> None:
    # uvicorn stops reading while the application holds unread body; the client
    # then cannot send, and the idle timer must not count that against it.
    limits = ConnectionLimits(header_timeout_s=BOUND_S, body_idle_timeout_s=IDLE_S)
    size = 8 * MiB
    async with _serving(_slow_reader, limits) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            f"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n\r\n".encode() + b"y" * size
        )
        async with asyncio.timeout(BOUND_S):
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 "), head
            expected = str(size).encode()
            assert await reader.readexactly(len(expected)) == expected
        writer.close()


async def _continue(port: int, size: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A request that waits for ``100 Continue`` before its body, as curl sends large ones."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        + f"Content-Length: {size}\r\n\r\n".encode()
    )
    async with asyncio.timeout(BOUND_S):
        informational = await reader.readuntil(b"\r\n\r\n")
    # Sent only once the application reads, after several idle timeouts.
    assert informational.startswith(b"HTTP/1.1 100 "), informational
    return reader, writer


async def test_a_client_waiting_for_100_continue_is_not_idle() -> None:
    limits = ConnectionLimits(header_timeout_s=BOUND_S, body_idle_timeout_s=IDLE_S)
    async with _serving(_slow_reader, limits) as port:
        reader, writer = await _continue(port, 1000)
        writer.write(b"z" * 1000)
        async with asyncio.timeout(BOUND_S):
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 "), head
            assert await reader.readexactly(4) == b"1000"
        writer.close()


async def test_a_body_that_stalls_after_100_continue_gets_408() -> None:
    limits = ConnectionLimits(header_timeout_s=BOUND_S, body_idle_timeout_s=IDLE_S)
    async with _serving(_slow_reader, limits) as port:
        reader, writer = await _continue(port, 1000)  # then not a byte of the body
        async with asyncio.timeout(BOUND_S):
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408 "), head
            with contextlib.suppress(ConnectionResetError):
                while await reader.read(65536):
                    pass  # to the close
        writer.close()


def test_the_guards_error_bodies_have_the_apis_error_shape() -> None:
    # Written past h11 and FastAPI, so held here to sandboxd.transports.http.errors' shape.
    ours = _raw_response(408, "Request Timeout", "DEADLINE_EXCEEDED", "m", retry_after=1)
    head, _, body = ours.partition(b"\r\n\r\n")
    assert b"content-length: %d" % len(body) in head.split(b"\r\n")
    api = error_response(408, "DEADLINE_EXCEEDED", "m")
    assert json.loads(body) == json.loads(bytes(api.body))
    assert b"content-type: " + api.headers["content-type"].encode() in head.split(b"\r\n")


def test_the_installed_uvicorn_has_what_the_guard_relies_on() -> None:
    check_uvicorn()
    protocol = guarded_protocol(ConnectionLimits(max_connections=3))
    assert issubclass(protocol, GuardedH11Protocol) and issubclass(protocol, H11Protocol)
    assert protocol.limits.max_connections == 3  # type: ignore[attr-defined]


def test_a_uvicorn_without_the_overridden_hooks_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(H11Protocol, "on_response_complete")
    with pytest.raises(SandboxUnavailable, match="on_response_complete"):
        guarded_protocol(ConnectionLimits())

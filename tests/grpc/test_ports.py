"""Ports over gRPC (SandboxPorts): OpenPort, ListPorts, the client's forward.

Local backend behind a real gRPC server: the "sandbox's loopback" is this
host's; tests/docker/test_ports.py runs the same on real containers.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time

import anyio
import grpc
import pytest

from runtime_client import GrpcSandboxFactory, Sandbox
from runtime_client.errors import InvalidArgument, NotFound, PermissionDenied, SandboxUnavailable
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.daemon.assembly import Daemon
from tests.grpc.test_auth import ACME, ADMIN, BETA, TEAM_A, tcp_server

pytestmark = [pytest.mark.inproc, pytest.mark.anyio, pytest.mark.timeout(120)]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def start_http_server(box: Sandbox, port: int, bind: str = "127.0.0.1") -> None:
    """python -m http.server, started through the process API; waits until it listens."""
    await box.write_file("index.html", b"<h1>hello from the sandbox</h1>")
    await box.start_process([sys.executable, "-m", "http.server", "--bind", bind, str(port)])
    deadline = time.monotonic() + 20
    while port not in {p.port for p in await box.list_ports()}:
        assert time.monotonic() < deadline, "http.server did not come up"
        await asyncio.sleep(0.1)


async def http_get(host: str, port: int, path: str = "/index.html") -> bytes:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


async def test_open_port_reaches_a_server_and_half_closes(factory: GrpcSandboxFactory) -> None:
    box = await factory.create_sandbox("ports-a")
    port = free_port()
    await start_http_server(box, port)
    conn = await box.open_port(port)
    await conn.write(b"GET /index.html HTTP/1.0\r\n\r\n")
    await conn.shutdown_write()
    answer = bytearray()
    while chunk := await conn.read():
        answer += chunk
    assert answer.startswith(b"HTTP/1.0 200 OK")
    assert answer.endswith(b"<h1>hello from the sandbox</h1>")
    await conn.close()
    await box.delete()


async def test_open_port_carries_the_first_bytes(factory: GrpcSandboxFactory) -> None:
    # They go in OpenPort's first message; the daemon sends them with the connect.
    box = await factory.create_sandbox("ports-first")
    port = free_port()
    await start_http_server(box, port)
    conn = await box.open_port(port, data=b"GET /index.html HTTP/1.0\r\n\r\n")
    await conn.shutdown_write()
    answer = bytearray()
    while chunk := await conn.read():
        answer += chunk
    assert answer.startswith(b"HTTP/1.0 200 OK")
    await conn.close()
    await box.delete()


async def test_open_port_without_waiting(factory: GrpcSandboxFactory) -> None:
    # A compact stream (the forwarders'): no opened message, the server's
    # bytes are the first answer; a port where nothing listens fails the read.
    box = await factory.create_sandbox("ports-lazy")
    port = free_port()
    await start_http_server(box, port)
    conn = await box.open_port(port, data=b"GET /index.html HTTP/1.0\r\n\r\n", wait=False)
    assert not conn.opened
    answer = bytearray()
    while chunk := await conn.read():
        answer += chunk
    assert answer.startswith(b"HTTP/1.0 200 OK")
    assert answer.endswith(b"<h1>hello from the sandbox</h1>")
    assert conn.opened
    await conn.close()
    missing = await box.open_port(free_port(), data=b"hi", wait=False)
    with pytest.raises(NotFound, match="nothing listens"):
        await missing.read()
    assert not missing.opened
    await missing.close()
    async with box.forward_port(free_port()) as forward:
        assert await http_get("127.0.0.1", forward.port) == b""
    assert forward.accepted == 1 and forward.failed == 1
    await box.delete()


async def test_a_compact_stream_has_no_opened_message(factory: GrpcSandboxFactory) -> None:
    box = await factory.create_sandbox("ports-compact")
    port = free_port()
    await start_http_server(box, port)
    request = b"GET /index.html HTTP/1.0\r\n\r\n"
    for compact in (False, True):
        call = box._transport.ports_stub.OpenPort()  # type: ignore[attr-defined]
        await call.write(
            pb.PortInput(instance_id="ports-compact", port=port, data=request, compact=compact)
        )
        messages = []
        while not (messages and messages[-1].eof):
            messages.append(await call.read())
        await call.done_writing()
        assert await call.read() is grpc.aio.EOF
        assert messages[0].opened is not compact
        assert b"".join(m.data for m in messages).endswith(b"hello from the sandbox</h1>")
    await box.delete()


async def test_forward_port_serves_many_connections_at_once(
    factory: GrpcSandboxFactory,
) -> None:
    box = await factory.create_sandbox("ports-b")
    port = free_port()
    await start_http_server(box, port)
    async with box.forward_port(port) as forward:
        answers = await asyncio.gather(*(http_get("127.0.0.1", forward.port) for _ in range(100)))
    assert all(a.endswith(b"<h1>hello from the sandbox</h1>") for a in answers)
    assert forward.accepted == 100 and forward.failed == 0
    await box.delete()


async def test_closing_a_forward_ends_a_connection_that_says_nothing(
    factory: GrpcSandboxFactory,
) -> None:
    """close() returns at once with a connection open whose client sends nothing
    (the server waits for it): on Python 3.12+ waiting for the listener first hung."""
    box = await factory.create_sandbox("ports-quiet")
    port = free_port()
    await start_http_server(box, port)
    forward = await box.forward_port(port).start()
    reader, writer = await asyncio.open_connection("127.0.0.1", forward.port)
    # Served only after the forward has taken up the silent connection before it.
    assert (await http_get("127.0.0.1", forward.port)).endswith(b"hello from the sandbox</h1>")
    assert forward.accepted == 2
    with anyio.fail_after(20):
        await forward.close()
        assert await reader.read() == b""
    writer.close()
    await box.delete()


async def test_ports_lists_listeners_and_bad_requests_are_typed(
    factory: GrpcSandboxFactory,
) -> None:
    box = await factory.create_sandbox("ports-c")
    with socket.socket(socket.AF_INET6) as listener:
        listener.bind(("::1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert any(p.port == port and p.host == "::1" for p in await box.list_ports())
        conn = await box.open_port(port, "::1")
        await conn.close()
    with pytest.raises(NotFound, match="nothing listens"):
        await box.open_port(free_port())
    with pytest.raises(InvalidArgument, match="loopback"):
        await box.open_port(80, "192.0.2.1")
    with pytest.raises(InvalidArgument, match="port must be"):
        await box.open_port(70000)
    await box.delete()


async def test_a_deleted_sandbox_ends_its_streams(factory: GrpcSandboxFactory) -> None:
    box = await factory.create_sandbox("ports-d")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        conn = await box.open_port(listener.getsockname()[1])
        await box.delete()
        with pytest.raises(SandboxUnavailable), anyio.fail_after(10):
            while await conn.read():
                pass
        await conn.close()


async def test_a_narrow_token_reaches_no_other_tenants_ports(tcp_server: Daemon) -> None:
    target = f"127.0.0.1:{tcp_server.tcp_port}"
    async with (
        GrpcSandboxFactory(target, token=ADMIN) as admin,
        GrpcSandboxFactory(target, token=TEAM_A) as team,
    ):
        await admin.create_sandbox("team-b-1")
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            with pytest.raises(PermissionDenied):
                await team.transport.open_port("team-b-1", port)
            with pytest.raises(PermissionDenied):
                await team.transport.list_ports("team-b-1")
            # The admin token may.
            conn = await admin.transport.open_port("team-b-1", port)
            await conn.close()
        await admin.transport.delete_sandbox("team-b-1")


async def test_another_tenants_ports_are_not_found(tcp_server: Daemon) -> None:
    target = f"127.0.0.1:{tcp_server.tcp_port}"
    async with (
        GrpcSandboxFactory(target, token=ACME) as acme,
        GrpcSandboxFactory(target, token=BETA) as beta,
    ):
        theirs = await acme.create_sandbox("box-1")
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            with pytest.raises(NotFound):
                await beta.transport.open_port("box-1", port)
            with pytest.raises(NotFound):
                await beta.transport.list_ports("box-1")
            conn = await theirs.open_port(port)
            await conn.close()
        await theirs.delete()


__all__ = ["tcp_server"]  # the fixture, shared with test_auth


async def test_create_preview_signs_one_port(factory: GrpcSandboxFactory) -> None:
    box = await factory.create_sandbox("ports-p")
    preview = await box.create_preview(8000, ttl_s=120)
    assert (
        preview.path == f"/v1/sandboxes/ports-p/ports/8000/?sandboxd_preview_token={preview.token}"
    )
    assert preview.host == ""  # no preview domain on this daemon
    assert 100 < preview.expires_at - time.time() <= 120
    with pytest.raises(InvalidArgument, match="ttl_s"):
        await box.create_preview(8000, ttl_s=10**6)
    with pytest.raises(InvalidArgument, match="port"):
        await box.create_preview(0)
    await box.delete()

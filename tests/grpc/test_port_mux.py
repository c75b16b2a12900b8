"""OpenPorts: many connections over one stream, each held back only by its own peers.

Local backend behind a real gRPC server (the "sandbox's loopback" is this
host's). What each bad message gets: a connection-level error in band
(INVALID_ARGUMENT for a second open of a conn_id or a message over the
chunk, RESOURCE_EXHAUSTED for bytes past the window or a connection past a
cap), and the stream and its other connections go on.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import grpc
import pytest

from runtime_client import GrpcSandboxFactory, Sandbox
from runtime_client.errors import ResourceExhausted, Unauthenticated
from sandboxd.contract.port_mux import CHUNK, CONNECTIONS_PER_STREAM
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.contract.v1 import sandbox_pb2_grpc as pb_grpc
from sandboxd.daemon.assembly import Daemon
from sandboxd.daemon.settings import Settings
from sandboxd.transports.grpc import port_mux
from sandboxd.transports.grpc.port_stream import PortsServicer
from tests.grpc.test_auth import tcp_server as tcp_server  # a fixture
from tests.grpc.test_ports import free_port, http_get, start_http_server

pytestmark = [pytest.mark.inproc, pytest.mark.anyio, pytest.mark.timeout(120)]

HELLO = b"<h1>hello from the sandbox</h1>"


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port inside (the host's loopback, for the local backend) whose server
    never reads: connections wait in its backlog, their bytes in the kernel's buffers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        yield listener.getsockname()[1]


def _streams(box: Sandbox) -> list[object]:
    return box._transport._port_streams._streams  # type: ignore[attr-defined,no-any-return]


async def test_a_hundred_connections_ride_two_streams(factory: GrpcSandboxFactory) -> None:
    box = await factory.create_sandbox("mux-many")
    port = free_port()
    await start_http_server(box, port)
    async with box.forward_port(port) as forward:
        answers = await asyncio.gather(*(http_get("127.0.0.1", forward.port) for _ in range(100)))
        assert all(a.endswith(HELLO) for a in answers)
        # At most CONNECTIONS_PER_STREAM at once on one stream.
        most = -(-100 // CONNECTIONS_PER_STREAM)
        assert 1 <= len(_streams(box)) <= most
        for _ in range(20):  # one after another, they share the streams there are
            assert (await http_get("127.0.0.1", forward.port)).endswith(HELLO)
        assert 1 <= len(_streams(box)) <= most
    assert forward.accepted == 120 and forward.failed == 0
    await box.delete()


async def test_a_server_that_never_reads_holds_back_its_own_connection_only(
    factory: GrpcSandboxFactory, silent_server: int
) -> None:
    box = await factory.create_sandbox("mux-silent")
    port = free_port()
    await start_http_server(box, port)
    stuck = await box.open_port(silent_server)
    writing = asyncio.create_task(stuck.write(b"x" * (64 << 20)))
    await asyncio.sleep(1)
    # The server's socket buffers and the window hold a few MiB, not 64.
    assert not writing.done()
    # The same stream serves another connection meanwhile.
    other = await box.open_port(port, data=b"GET /index.html HTTP/1.0\r\n\r\n")
    assert len(_streams(box)) == 1
    answer = bytearray()
    with anyio.fail_after(10):
        while chunk := await other.read():
            answer += chunk
    assert answer.endswith(HELLO)
    await other.close()
    await stuck.close()
    with pytest.raises(Exception):  # noqa: B017 (the connection is gone, however it says so)
        await writing
    await box.delete()


async def test_a_client_that_never_reads_holds_back_its_own_connection_only(
    factory: GrpcSandboxFactory,
) -> None:
    box = await factory.create_sandbox("mux-unread")
    port = free_port()
    await start_http_server(box, port)
    await box.exec('head -c 20971520 /dev/zero | tr "\\\\0" b > big.bin')
    unread = await box.open_port(port, data=b"GET /big.bin HTTP/1.0\r\n\r\n")
    await asyncio.sleep(0.5)  # its window fills; it is not read
    for _ in range(5):
        assert (await _get_over(box, port)).endswith(HELLO)
    body = bytearray()
    with anyio.fail_after(30):
        while chunk := await unread.read():
            body += chunk
    assert body.endswith(b"b" * (1 << 20)) and body.count(b"b") == 20 << 20
    await unread.close()
    await box.delete()


async def _get_over(box: Sandbox, port: int) -> bytes:
    conn = await box.open_port(port, data=b"GET /index.html HTTP/1.0\r\n\r\n")
    answer = bytearray()
    with anyio.fail_after(10):
        while chunk := await conn.read():
            answer += chunk
    await conn.close()
    return bytes(answer)


class RawStream:
    """OpenPorts spoken by hand: what a client that breaks the rules gets."""

    def __init__(self, call: grpc.aio.StreamStreamCall) -> None:  # type: ignore[type-arg]
        self.call = call

    async def send(self, **fields: object) -> None:
        await self.call.write(pb.PortsInput(**fields))  # type: ignore[arg-type]

    async def next_for(self, conn_id: int) -> pb.PortsOutput:
        with anyio.fail_after(10):
            while True:
                answer = await self.call.read()
                assert answer is not grpc.aio.EOF
                if answer.conn_id == conn_id and not answer.window:
                    return answer  # type: ignore[no-any-return]


@pytest.fixture
async def raw(factory: GrpcSandboxFactory) -> AsyncIterator[RawStream]:
    channel = factory.transport.ports_stub  # type: ignore[attr-defined]
    call = channel.OpenPorts()
    yield RawStream(call)
    call.cancel()


def _open(instance_id: str, port: int, data: bytes = b"") -> pb.PortInput:
    return pb.PortInput(instance_id=instance_id, port=port, host="127.0.0.1", data=data)


async def test_what_breaks_the_rules_fails_its_connection_not_the_stream(
    factory: GrpcSandboxFactory,
    raw: RawStream,
    silent_server: int,
) -> None:
    box = await factory.create_sandbox("mux-rules")
    port = free_port()
    await start_http_server(box, port)
    silent = silent_server

    # Bytes past the window (no grant waited for), to a server that does not
    # read: once its socket's buffers are full, what is unwritten passes it.
    await raw.send(conn_id=1, open=_open("mux-rules", silent), window=1 << 20)
    assert (await raw.next_for(1)).opened
    for _ in range((32 << 20) // CHUNK):
        await raw.send(conn_id=1, data=b"x" * CHUNK)
    refused = await raw.next_for(1)
    assert refused.error.code == "RESOURCE_EXHAUSTED"
    assert "window" in refused.error.message

    # A message over the chunk.
    await raw.send(conn_id=2, open=_open("mux-rules", silent), window=1 << 20)
    assert (await raw.next_for(2)).opened
    await raw.send(conn_id=2, data=b"x" * (CHUNK + 1))
    assert (await raw.next_for(2)).error.code == "INVALID_ARGUMENT"

    # A second open of a conn_id that is open.
    await raw.send(conn_id=3, open=_open("mux-rules", silent), window=1 << 20)
    assert (await raw.next_for(3)).opened
    await raw.send(conn_id=3, open=_open("mux-rules", port), window=1 << 20)
    again = await raw.next_for(3)
    assert again.error.code == "INVALID_ARGUMENT" and "already open" in again.error.message

    # An open that names no port.
    await raw.send(conn_id=4, open=pb.PortInput(instance_id="mux-rules"), window=1)
    assert (await raw.next_for(4)).error.code == "INVALID_ARGUMENT"

    # The stream goes on: a GET on it works.
    request = b"GET /index.html HTTP/1.0\r\n\r\n"
    await raw.send(conn_id=5, open=_open("mux-rules", port, request), window=1 << 20)
    body = b""
    while True:
        answer = await raw.next_for(5)
        body += answer.data
        if answer.eof:
            break
    assert body.endswith(HELLO)
    await box.delete()


async def test_connections_past_a_cap_are_refused_and_a_close_frees_the_room(
    factory: GrpcSandboxFactory,
    raw: RawStream,
    silent_server: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(port_mux, "CONNECTIONS_PER_STREAM", 2)
    monkeypatch.setattr(port_mux, "CONNECTIONS_PER_CALLER", 3)
    box = await factory.create_sandbox("mux-caps")
    silent = silent_server
    for conn_id in (1, 2):
        await raw.send(conn_id=conn_id, open=_open("mux-caps", silent), window=1)
        assert (await raw.next_for(conn_id)).opened
    await raw.send(conn_id=3, open=_open("mux-caps", silent), window=1)
    refused = await raw.next_for(3)
    assert refused.error.code == "RESOURCE_EXHAUSTED"
    assert "2 connections open" in refused.error.message

    # Another stream of the same caller: one more, then the caller's cap.
    second = RawStream(factory.transport.ports_stub.OpenPorts())  # type: ignore[attr-defined]
    await second.send(conn_id=1, open=_open("mux-caps", silent), window=1)
    assert (await second.next_for(1)).opened
    await second.send(conn_id=2, open=_open("mux-caps", silent), window=1)
    capped = await second.next_for(2)
    assert capped.error.code == "RESOURCE_EXHAUSTED"
    assert "caller has 3" in capped.error.message

    # A reset frees the room at once: an open right behind it is taken.
    await raw.send(conn_id=1, reset=True)
    await raw.send(conn_id=4, open=_open("mux-caps", silent), window=1)
    assert (await raw.next_for(4)).opened
    second.call.cancel()
    await box.delete()


async def test_a_client_sees_the_cap_of_a_stream_as_a_typed_error(
    factory: GrpcSandboxFactory,
    silent_server: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(port_mux, "CONNECTIONS_PER_CALLER", 1)
    box = await factory.create_sandbox("mux-typed")
    first = await box.open_port(silent_server)
    with pytest.raises(ResourceExhausted, match="port connections open"):
        await box.open_port(silent_server)
    await first.close()
    await box.delete()


@pytest.fixture
async def old_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[GrpcSandboxFactory]:
    """A daemon that predates OpenPorts (the generated servicer's UNIMPLEMENTED)."""
    monkeypatch.setattr(PortsServicer, "OpenPorts", pb_grpc.SandboxPortsServicer.OpenPorts)
    old = Daemon(
        Settings(backend="local", local_root=tmp_path / "old", socket=tmp_path / "old.sock")
    )
    await old.start()
    try:
        async with GrpcSandboxFactory(f"unix://{old.settings.socket}") as factory:
            yield factory
    finally:
        await old.stop()


async def test_a_daemon_without_open_ports_gets_a_stream_per_connection(
    old_daemon: GrpcSandboxFactory,
) -> None:
    box = await old_daemon.create_sandbox("mux-old")
    port = free_port()
    await start_http_server(box, port)
    async with box.forward_port(port) as forward:
        for _ in range(3):
            assert (await http_get("127.0.0.1", forward.port)).endswith(HELLO)
    assert old_daemon.transport._port_streams.supported is False  # type: ignore[attr-defined]
    assert _streams(box) == []
    await box.delete()


async def test_a_wrong_token_is_unauthenticated_on_the_stream(tcp_server: Daemon) -> None:
    target = f"127.0.0.1:{tcp_server.tcp_port}"
    async with GrpcSandboxFactory(target, token="not-a-token") as wrong:
        for _ in range(20):  # a refused stream, each time a new one
            with pytest.raises(Unauthenticated):
                await wrong.transport.open_port("any-box", 8000)

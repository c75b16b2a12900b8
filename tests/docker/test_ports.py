"""Ports on real containers (runc and runsc), network off: a real daemon
process, servers started through the process API, the client's forward."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from runtime_client import GrpcSandboxFactory, Sandbox
from runtime_client.errors import SandboxUnavailable
from sandboxd.contract.models import NetworkPolicy, Runtime, SandboxOptions
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(300)]

RUNTIMES = [Runtime.RUNC, Runtime.RUNSC]
MB = 1 << 20

#: A server in the sandbox, one mode per port: "sink" counts what it gets
#: until the client's end and answers the count; "source N" sends N bytes
#: and closes (a failed send leaves /tmp/peer-gone); "deaf" never reads and
#: leaves /tmp/peer-gone when its client is gone.
SERVER = r"""
import select, socket, sys, threading
host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
family = socket.AF_INET6 if ":" in host else socket.AF_INET
srv = socket.socket(family)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((host, port))
srv.listen(128)
def gone():
    open("/tmp/peer-gone", "w").close()
def serve(conn):
    if mode == "sink":
        n = 0
        while data := conn.recv(1 << 20):
            n += len(data)
        conn.sendall(b"%d" % n)
        conn.close()
    elif mode == "source":
        left, block = int(sys.argv[4]), b"s" * (1 << 20)
        try:
            while left > 0:
                left -= conn.send(block[:left])
        except OSError:
            gone()
        conn.close()
    else:
        poll = select.poll()
        poll.register(conn, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
        while not poll.poll(50):
            pass
        gone()
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


async def _sandbox(factory: GrpcSandboxFactory, instance_id: str, runtime: Runtime) -> Sandbox:
    await factory.transport.create_sandbox(instance_id, SandboxOptions(runtime=runtime))
    box = Sandbox(factory.transport, instance_id)
    assert (await box.info()).options.network == NetworkPolicy()
    return box


async def _eventually(check: Callable[[], Awaitable[bool]], seconds: float = 30) -> None:
    with anyio.fail_after(seconds):
        for _ in itertools.count():
            if await check():
                return
            await asyncio.sleep(0.1)


async def _listening(box: Sandbox, port: int, host: str = "127.0.0.1") -> None:
    async def up() -> bool:
        return any(p.port == port and p.host == host for p in await box.list_ports())

    await _eventually(up)


async def _peer_gone(box: Sandbox) -> bool:
    return (await box.exists("/tmp/peer-gone")).exists


async def _serve(box: Sandbox, port: int, *mode: str, host: str = "127.0.0.1") -> None:
    await box.write_file("/tmp/server.py", SERVER.encode())
    await box.start_process(["python3", "/tmp/server.py", host, str(port), *mode])
    await _listening(box, port, host)


async def _http_get(port: int, path: str = "/") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


def _rss_kib(daemon: Daemon) -> int:
    assert daemon.proc is not None
    for line in Path(f"/proc/{daemon.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_a_static_server_through_a_forwarded_port(
    factory: GrpcSandboxFactory, instance_id: str, runtime: Runtime
) -> None:
    box = await _sandbox(factory, instance_id, runtime)
    try:
        await box.write_file("site/index.html", b"<h1>served from inside</h1>")
        await box.start_process(
            ["python3", "-m", "http.server", "--bind", "::1", "8000"], cwd="site"
        )
        await _listening(box, 8000, "::1")
        async with box.forward_port(8000, remote_host="::1") as forward:
            answers = await asyncio.gather(*(_http_get(forward.port) for _ in range(100)))
        assert all(a.startswith(b"HTTP/1.0 200") for a in answers)
        assert all(a.endswith(b"<h1>served from inside</h1>") for a in answers)
        assert forward.accepted == 100 and forward.failed == 0
    finally:
        await box.delete()


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_100_mb_each_way(
    factory: GrpcSandboxFactory, instance_id: str, runtime: Runtime
) -> None:
    box = await _sandbox(factory, instance_id, runtime)
    try:
        await _serve(box, 7000, "sink")
        await _serve(box, 7001, "source", str(100 * MB))
        conn = await box.open_port(7000)
        started = time.monotonic()
        block = b"u" * MB
        for _ in range(100):
            await conn.write(block)
        await conn.shutdown_write()
        answer = b""
        while chunk := await conn.read():
            answer += chunk
        up = time.monotonic() - started
        assert answer == b"%d" % (100 * MB)
        await conn.close()

        conn = await box.open_port(7001)
        started = time.monotonic()
        received = 0
        while chunk := await conn.read():
            received += len(chunk)
        down = time.monotonic() - started
        assert received == 100 * MB
        await conn.close()
        print(f"\n{runtime.value}: upload {100 / up:.0f} MB/s, download {100 / down:.0f} MB/s")
    finally:
        await box.delete()


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_a_client_that_goes_away_mid_body_closes_the_sandbox_side(
    factory: GrpcSandboxFactory, instance_id: str, runtime: Runtime
) -> None:
    box = await _sandbox(factory, instance_id, runtime)
    try:
        await _serve(box, 7001, "source", str(1000 * MB))
        conn = await box.open_port(7001)
        assert await conn.read()
        await conn.close()
        await _eventually(lambda: _peer_gone(box), 20)
    finally:
        await box.delete()


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_a_server_that_never_reads(
    daemon: Daemon, factory: GrpcSandboxFactory, instance_id: str, runtime: Runtime
) -> None:
    box = await _sandbox(factory, instance_id, runtime)
    try:
        await _serve(box, 7002, "deaf")
        conn = await box.open_port(7002)
        before = _rss_kib(daemon)
        sent = 0

        async def flood() -> None:
            nonlocal sent
            block = b"d" * MB
            while True:
                await conn.write(block)
                sent += len(block)

        writer = asyncio.create_task(flood())
        await asyncio.sleep(3)
        during = _rss_kib(daemon)
        # The writer waits on its own connection: the bytes are held back by
        # the client (flow control), not buffered in the daemon.
        assert not writer.done()
        assert sent < 64 * MB, sent
        assert during - before < 48 * 1024, (before, during)
        # Other calls on the instance go on.
        with anyio.fail_after(10):
            assert (await box.exec("echo alive")).stdout == b"alive\n"
            assert (await box.read_file("/tmp/server.py")).data.startswith(b"\nimport")
        writer.cancel()
        await conn.close()
        await _eventually(lambda: _peer_gone(box), 20)
        print(f"\n{runtime.value}: daemon RSS {before} KiB -> {during} KiB; {sent >> 20} MiB sent")
    finally:
        await box.delete()


async def test_a_deleted_sandbox_ends_its_streams_and_forwards(
    factory: GrpcSandboxFactory, instance_id: str
) -> None:
    box = await _sandbox(factory, instance_id, Runtime.RUNC)
    await _serve(box, 7002, "deaf")
    conn = await box.open_port(7002)
    async with box.forward_port(7002) as forward:
        await box.delete()
        with pytest.raises(SandboxUnavailable), anyio.fail_after(30):
            while await conn.read():
                pass
        # New connections to the forward are closed at once.
        reader, writer = await asyncio.open_connection("127.0.0.1", forward.port)
        with anyio.fail_after(30):
            assert await reader.read() == b""
        writer.close()
    await conn.close()

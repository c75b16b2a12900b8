"""Socket pipes on a real engine (runc and runsc), with the network off:
servers and clients run inside the container, the bytes ride the channel."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from sandboxd.backends.docker.workspace import DockerWorkspace
from sandboxd.backends.shared.pipes import MAX_WRITE, Listener, Pipe
from sandboxd.contract.errors import NotFound
from sandboxd.contract.models import Runtime
from tests.docker_fixtures import OpenWorkspace

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(240)]

RUNTIMES = [Runtime.RUNC, Runtime.RUNSC]

#: A server in the sandbox: "echo" answers with the byte count after the
#: client's half-close; "deaf" never reads and records when its peer is gone.
SERVER = r"""
import socket, sys, threading, select
host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
family = socket.AF_INET6 if ":" in host else socket.AF_INET
srv = socket.socket(family); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((host, port)); srv.listen(64)
def serve(conn):
    if mode == "echo":
        n = 0
        while data := conn.recv(65536):
            n += len(data)
        conn.sendall(b"got %d bytes" % n); conn.close()
    else:
        poll = select.poll()
        poll.register(conn, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
        while not poll.poll(50): pass
        open("/tmp/peer-gone", "w").close()
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""

CLIENT = r"""
import socket, sys, time
for _ in range(100):
    try:
        sock = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); break
    except OSError:
        time.sleep(0.05)
sock.sendall(b"ping"); sock.shutdown(socket.SHUT_WR)
print(sock.recv(100).decode())
"""


async def _serve(workspace: DockerWorkspace, host: str, port: int, mode: str) -> None:
    await workspace.call("write_file", {"path": "server.py", "data": SERVER.encode()})
    await workspace.call("proc_start", {"argv": ["python3", "server.py", host, str(port), mode]})
    deadline = time.monotonic() + 20
    while {"host": host, "port": port} not in (await workspace.call("ports_list", {}))["ports"]:
        assert time.monotonic() < deadline, "the server did not come up"
        await asyncio.sleep(0.1)


async def _read_all(pipe: Pipe) -> bytes:
    out = bytearray()
    while chunk := await pipe.read():
        out += chunk
    return bytes(out)


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_a_pipe_to_a_server_in_the_sandbox(
    open_workspace: OpenWorkspace, runtime: Runtime
) -> None:
    workspace = await open_workspace(runtime)
    await _serve(workspace, "127.0.0.1", 8000, "echo")
    await _serve(workspace, "::1", 8001, "echo")
    for host, port in (("127.0.0.1", 8000), ("::1", 8001)):
        pipe = await workspace.connect_port(port, host)
        payload = b"z" * (3 << 20)
        await pipe.write(payload)
        await pipe.shutdown_write()
        assert await _read_all(pipe) == b"got %d bytes" % len(payload)
        await pipe.close()
    with pytest.raises(NotFound, match="nothing listens"):
        await workspace.connect_port(8002)


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_a_server_that_never_reads_holds_back_only_its_pipe(
    open_workspace: OpenWorkspace, runtime: Runtime
) -> None:
    workspace = await open_workspace(runtime)
    await _serve(workspace, "127.0.0.1", 8000, "deaf")
    pipe = await workspace.connect_port(8000)

    async def flood() -> None:
        while True:
            await pipe.write(b"y" * MAX_WRITE)

    writer = asyncio.create_task(flood())
    await asyncio.sleep(1.5)
    assert not writer.done()
    # Other calls of the instance go on.
    started = time.monotonic()
    assert (await workspace.call("exec", {"argv": ["echo", "ok"]}))["stdout"] == b"ok\n"
    assert time.monotonic() - started < 5
    await pipe.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(writer, 10)
    assert writer.done()
    deadline = time.monotonic() + 10
    while not (await workspace.call("exists", {"path": "/tmp/peer-gone"}))["exists"]:
        assert time.monotonic() < deadline, "the sandbox's server never saw the pipe close"
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_connections_made_in_the_sandbox_become_pipes(
    open_workspace: OpenWorkspace, runtime: Runtime
) -> None:
    workspace = await open_workspace(runtime)
    await workspace.call("write_file", {"path": "client.py", "data": CLIENT.encode()})
    accepted = workspace.accept_pipes([Listener("http", "127.0.0.1", 3128)])
    client = asyncio.create_task(
        workspace.call("exec", {"argv": ["python3", "client.py", "3128"], "timeout_ms": 30_000})
    )
    name, pipe = await asyncio.wait_for(anext(aiter(accepted)), 30)
    assert name == "http"
    assert await _read_all(pipe) == b"ping"
    await pipe.write(b"pong")
    await pipe.shutdown_write()
    assert (await client)["stdout"] == b"pong\n"
    await pipe.close()
    await accepted.aclose()  # type: ignore[attr-defined]

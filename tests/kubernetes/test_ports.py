"""Ports on Kubernetes, the network off as on Docker: a forward (its
connections shared over OpenPorts streams through the executor channel,
which rides ``pods/exec``), the HTTP preview with a WebSocket whose Host is
the page's, and what listens inside. tests/docker/test_ports.py and
tests/docker/test_preview.py show the same under runc and runsc."""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx
import pytest

from runtime_client import GrpcSandboxFactory, Sandbox
from runtime_client.errors import SandboxUnavailable
from tests.docker.test_preview import SITE, _websocket
from tests.kubernetes.kube import Cluster
from tests.kubernetes_fixtures import KubeDaemon, drop_namespace, sandbox_namespace

pytestmark = [pytest.mark.kubernetes, pytest.mark.anyio, pytest.mark.timeout(300)]

DOMAIN = "preview.test"
TOKEN = f"kube-ports-{secrets.token_hex(16)}"
SITE_PORT = 5173


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def ports_daemon(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeDaemon]:
    folder = tmp_path_factory.mktemp("kube-ports")
    (folder / "tokens").write_text(f"{TOKEN}\n")
    name = sandbox_namespace(cluster)
    http_port = _free_port()
    daemon = KubeDaemon(
        folder / "sandboxd.sock",
        cluster,
        name,
        "--http", f"127.0.0.1:{http_port}",
        "--tokens-file", str(folder / "tokens"),
        "--preview-domain", DOMAIN,
    )  # fmt: skip
    daemon.http_port = http_port  # type: ignore[attr-defined]
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()
        drop_namespace(cluster, name)


@pytest.fixture
async def site(ports_daemon: KubeDaemon) -> AsyncIterator[tuple[Sandbox, str]]:
    """A sandbox serving tests/docker/preview_site.py on ::1 (a page and a WebSocket echo)."""
    name = f"kp-{secrets.token_hex(3)}"
    async with GrpcSandboxFactory(ports_daemon.target, token=TOKEN) as factory:
        box = await factory.create_sandbox(name)
        try:
            await box.write_file("/tmp/site.py", SITE.read_bytes())
            await box.start_process(["python3", "/tmp/site.py", "::1", str(SITE_PORT)])
            with anyio.fail_after(60):
                while not any(p.port == SITE_PORT for p in await box.list_ports()):  # noqa: ASYNC110
                    await asyncio.sleep(0.2)
            yield box, name
        finally:
            await box.delete()


async def _get(port: int, path: str = "/") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


#: Inside: counts what a connection sends until its half-close, answers the count.
COUNTER = """
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8001))
s.listen()
while True:
    c, _ = s.accept()
    n = 0
    while data := c.recv(1 << 16):
        n += len(data)
    c.sendall(str(n).encode())
    c.close()
"""


async def test_a_forward_serves_many_connections_and_large_bodies(
    site: tuple[Sandbox, str],
) -> None:
    box, _ = site
    await box.exec("head -c 8388608 /dev/zero > /tmp/big.bin")
    await box.start_process(
        ["python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", "/tmp", "8000"]
    )
    await box.start_process(["python3", "-c", COUNTER])
    with anyio.fail_after(60):
        while not {8000, 8001} <= {p.port for p in await box.list_ports()}:  # noqa: ASYNC110
            await asyncio.sleep(0.2)
    async with box.forward_port(SITE_PORT) as forward:
        for _ in range(5):
            assert b"served from inside" in await _get(forward.port)
        answers = await asyncio.gather(*(_get(forward.port) for _ in range(30)))
        assert all(b"served from inside" in a for a in answers)
        assert forward.accepted == 35 and forward.failed == 0
    async with box.forward_port(8000) as forward:
        answer = await _get(forward.port, "/big.bin")
        assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(b"\0" * (1 << 20))
        assert len(answer.partition(b"\r\n\r\n")[2]) == 8 << 20
    conn = await box.open_port(8001)
    await conn.write(b"z" * (8 << 20))
    await conn.shutdown_write()
    counted = bytearray()
    with anyio.fail_after(60):
        while chunk := await conn.read():
            counted += chunk
    await conn.close()
    assert counted == str(8 << 20).encode()


async def test_the_preview_serves_the_page_and_its_websocket(
    ports_daemon: KubeDaemon, site: tuple[Sandbox, str]
) -> None:
    box, name = site
    http_port: int = ports_daemon.http_port  # type: ignore[attr-defined]
    preview = await box.create_preview(SITE_PORT, ttl_s=300)
    base = f"http://127.0.0.1:{http_port}"
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        page = await client.get(preview.path)
        assert page.status_code == 200 and "served from inside" in page.text
    async with httpx.AsyncClient(base_url=base, timeout=60) as anonymous:
        assert (await anonymous.get(f"/v1/sandboxes/{name}/ports/{SITE_PORT}/")).status_code == 403
    cookie = f"sandboxd_preview={preview.token}"
    preview_host = f"{SITE_PORT}-{name}.{DOMAIN}"
    got = await _websocket(http_port, preview_host, "/ws", cookie)
    assert json.loads(got[0]) == {"host": preview_host} and got[1] == "echo:hi"


async def test_deleting_the_sandbox_ends_its_connections(ports_daemon: KubeDaemon) -> None:
    name = f"kp-{secrets.token_hex(3)}"
    async with GrpcSandboxFactory(ports_daemon.target, token=TOKEN) as factory:
        box = await factory.create_sandbox(name)
        await box.start_process(["python3", "-m", "http.server", "--bind", "127.0.0.1", "8000"])
        with anyio.fail_after(60):
            while not any(p.port == 8000 for p in await box.list_ports()):  # noqa: ASYNC110
                await asyncio.sleep(0.2)
        conn = await box.open_port(8000)  # open, says nothing: the server waits
        await box.delete()
        with pytest.raises(SandboxUnavailable), anyio.fail_after(60):
            while await conn.read():
                pass
        await conn.close()

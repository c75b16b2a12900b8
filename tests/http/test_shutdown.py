"""Start and stop with the daemon: ready only while serving, drained with gRPC."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
import pytest

from runtime_client import GrpcSandboxFactory
from sandboxd.contract.errors import InvalidArgument, SandboxUnavailable
from sandboxd.daemon.assembly import Daemon
from sandboxd.transports.http.server import parse_address
from tests.http.conftest import ADMIN, base_url, make_settings

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]


async def test_draining_is_not_ready_and_refuses_new_calls(tmp_path: Path) -> None:
    server = Daemon(make_settings(tmp_path))
    await server.start()
    url = base_url(server)
    async with (
        httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}) as client,
        GrpcSandboxFactory(f"unix://{server.settings.socket}") as factory,
    ):
        await client.post("/v1/sandboxes", json={"instance_id": "drain"})
        sandbox = await factory.create_sandbox("drain")
        # In flight when the stop begins: a gRPC call keeps the drain open for ~2 s.
        slow_grpc = asyncio.create_task(sandbox.exec("sleep 2; echo grpc-done"))
        slow_http = asyncio.create_task(
            client.post(
                "/v1/sandboxes/drain/tools/bash",
                json={"arguments": {"command": "sleep 1; echo http-done"}},
            )
        )
        await asyncio.sleep(0.5)
        stopping = asyncio.create_task(server.stop())
        await asyncio.sleep(0.3)

        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json() == {"status": "not ready"}
        assert (await client.get("/healthz")).status_code == 200  # alive, though
        refused = await client.post("/v1/sandboxes", json={"instance_id": "late"})
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "UNAVAILABLE"

        finished = await slow_http
        assert finished.status_code == 200
        assert "http-done" in finished.json()["text"]
        assert (await slow_grpc).stdout == b"grpc-done\n"
        await stopping
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as late:
            await late.get(f"{url}/healthz")


async def test_a_taken_port_fails_start_cleanly(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = Daemon(make_settings(tmp_path, http=f"127.0.0.1:{port}"))
        with pytest.raises(SandboxUnavailable, match=f"cannot listen for HTTP on 127.0.0.1:{port}"):
            await server.start()
    await server.backend.close()


def test_address_parsing() -> None:
    assert parse_address("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert parse_address("[::1]:0") == ("::1", 0)
    for bad in ("8080", "host:", ":80", "host:99999", "host:http"):
        with pytest.raises(InvalidArgument, match="host:port"):
            parse_address(bad)

"""In-process tier: a real grpc.aio server on a unix socket, local backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_client import GrpcSandboxFactory
from sandboxd.daemon.assembly import Daemon
from sandboxd.daemon.settings import Settings


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Daemon]:
    settings = Settings(
        backend="local",
        local_root=tmp_path / "root",
        socket=tmp_path / "sandboxd.sock",
        max_payload_bytes=64 * 1024,
        drain_seconds=5,
    )
    server = Daemon(settings)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def factory(server: Daemon) -> AsyncIterator[GrpcSandboxFactory]:
    async with GrpcSandboxFactory(f"unix://{server.settings.socket}") as factory:
        yield factory

"""In-process tier: a real grpc.aio server on a unix socket, local backend."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime_client import GrpcSandboxFactory
from sandboxd.contract.errors import Unauthenticated
from sandboxd.daemon.assembly import Daemon
from sandboxd.daemon.settings import Settings
from sandboxd.service.scope import Scope
from sandboxd.transports.auth import Authenticator


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


class Refusal:
    """The moment a write loses the race with the daemon's refusal of a call.

    ``passed()`` returns once the daemon has refused a token and its answer
    has reached the client's gRPC core (gRPC's own threads) but not yet the
    event loop: a write then fails for that end after the status came, as it
    does now and then on a loaded machine (grpc/grpc#36066).
    """

    def __init__(self) -> None:
        self.refused = asyncio.Event()

    async def passed(self) -> None:
        await self.refused.wait()
        # The handler that refused goes on to send its status without
        # waiting; the loop stands still while gRPC's threads carry it over.
        time.sleep(0.2)  # noqa: ASYNC251 (the point: the loop must not run)


@pytest.fixture
def refusal(monkeypatch: pytest.MonkeyPatch) -> Refusal:
    hook = Refusal()
    check = Authenticator.scope_for

    def scope_for(self: Authenticator, peer: str, metadata: Any) -> Scope:
        try:
            return check(self, peer, metadata)
        except Unauthenticated:
            hook.refused.set()
            raise

    monkeypatch.setattr(Authenticator, "scope_for", scope_for)
    return hook

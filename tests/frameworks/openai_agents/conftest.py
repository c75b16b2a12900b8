"""Fixtures of the openai-agents tests: a client of the frameworks tier's daemon and
sessions in its workspaces, deleted at the end of each test."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from agents.sandbox import Manifest
from agents.sandbox.session.sandbox_session import SandboxSession
from agents.sandbox.snapshot import SnapshotBase, SnapshotSpec

from runtime_client.contrib.openai_agents import SandboxdSandboxClient, SandboxdSandboxClientOptions
from tests.helpers import Daemon

OpenSession = Callable[..., Awaitable[SandboxSession]]


@pytest.fixture
def client(frameworks_daemon: Daemon) -> SandboxdSandboxClient:
    return SandboxdSandboxClient(frameworks_daemon.target)


@pytest.fixture
async def open_session(client: SandboxdSandboxClient) -> AsyncIterator[OpenSession]:
    """``await open_session(manifest=..., options=..., snapshot=..., start=True)``."""
    made: list[SandboxSession] = []

    async def open_one(
        manifest: Manifest | None = None,
        options: SandboxdSandboxClientOptions | None = None,
        snapshot: SnapshotSpec | SnapshotBase | None = None,
        *,
        start: bool = True,
    ) -> SandboxSession:
        session = await client.create(manifest=manifest, options=options, snapshot=snapshot)
        made.append(session)
        if start:
            await session.start()
        return session

    yield open_one
    for session in made:
        with contextlib.suppress(Exception):
            await client.delete(session)

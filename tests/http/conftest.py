"""HTTP tier: the real daemon (gRPC and HTTP listeners) in-process on the local
backend, reached with httpx, curl and schemathesis over a real TCP port."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from sandboxd.daemon.assembly import Daemon
from sandboxd.daemon.settings import Settings

ADMIN = "admin-token-0123456789abcdef"
TEAM_A = "team-a-token-0123456789abcdef"


def make_settings(tmp_path: Path, **overrides: object) -> Settings:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{ADMIN}\n{TEAM_A} team-a-\n")
    values: dict[str, object] = {
        "backend": "local",
        "local_root": tmp_path / "root",
        "socket": tmp_path / "sandboxd.sock",
        "state_dir": tmp_path / "state",  # the egress CA, when a test gives secrets
        "http": "127.0.0.1:0",
        "tokens_file": tokens,
        "max_payload_bytes": 64 * 1024,
        "drain_seconds": 5,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Daemon]:
    server = Daemon(make_settings(tmp_path))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def base_url(server: Daemon) -> str:
    return f"http://127.0.0.1:{server.http_port}"


@pytest.fixture
async def client(server: Daemon) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=base_url(server), headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30
    ) as client:
        yield client


@pytest.fixture
async def anonymous(server: Daemon) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=base_url(server), timeout=30) as client:
        yield client

"""Lifetimes over HTTP and gRPC: the end in what a create and a get say, ExtendSandbox."""

from __future__ import annotations

import time

import httpx
import pytest

from runtime_client import GrpcSandboxFactory, InvalidArgument, NotFound
from sandboxd.contract.models import SandboxOptions
from sandboxd.daemon.assembly import Daemon

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]


async def test_extend_over_http(client: httpx.AsyncClient) -> None:
    before = int(time.time() * 1000)
    created = await client.post(
        "/v1/sandboxes", json={"instance_id": "x1", "options": {"max_lifetime_seconds": 100}}
    )
    sandbox = created.json()["sandbox"]
    assert sandbox["options"]["max_lifetime_seconds"] == 100
    assert before + 100_000 <= sandbox["expires_at_ms"] <= int(time.time() * 1000) + 100_000
    assert sandbox["termination_reason"] == ""
    extended = await client.post("/v1/sandboxes/x1/extend", json={"seconds": 1000})
    assert extended.status_code == 200
    end = extended.json()["expires_at_ms"]
    assert end >= before + 1_000_000
    assert (await client.get("/v1/sandboxes/x1")).json()["expires_at_ms"] == end
    refused = await client.post("/v1/sandboxes/x1/extend", json={"seconds": 10**9})
    assert refused.status_code == 400
    assert "SANDBOXD_MAX_LIFETIME_CEILING_SECONDS" in refused.json()["error"]["message"]
    missing = await client.post("/v1/sandboxes/nope/extend", json={"seconds": 10})
    assert missing.status_code == 404


async def test_extend_over_grpc(server: Daemon) -> None:
    async with GrpcSandboxFactory(f"unix://{server.settings.socket}") as factory:
        info, _ = await factory.transport.create_sandbox(
            "g1", SandboxOptions(max_lifetime_seconds=100)
        )
        box = await factory.create_sandbox("g1")
        extended = await box.extend(3600)
        assert extended.expires_at_ms > info.expires_at_ms
        assert (await factory.transport.get_sandbox("g1")).expires_at_ms == extended.expires_at_ms
        with pytest.raises(InvalidArgument, match="maximum lifetime"):
            await box.extend(10**9)
        with pytest.raises(NotFound):
            await factory.transport.extend_sandbox("nope", 10)
        plain, _ = await factory.transport.create_sandbox("g2")
        assert plain.expires_at_ms == 0

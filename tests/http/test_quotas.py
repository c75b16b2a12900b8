"""Quotas per tenant, on gRPC (runtime_client) and HTTP: the N+1-th create refused
naming the quota, its limit and the use; a delete frees it; GetStatus and /metrics
show use against quota per tenant; the operator has none."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from runtime_client import GrpcSandboxFactory, InvalidArgument, ResourceExhausted
from sandboxd.contract.models import SandboxOptions
from sandboxd.daemon.assembly import Daemon
from tests.http.conftest import ADMIN, base_url, make_settings

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

ACME = "acme-token-0123456789abcdef"
BETA = "beta-token-0123456789abcdef"
GiB = 1 << 30


@pytest.fixture
async def quota_server(tmp_path: Path) -> AsyncIterator[Daemon]:
    settings = make_settings(
        tmp_path,
        tenant_max_sandboxes=2,
        tenant_max_memory_bytes=3 * GiB,
        tenant_max_creates_per_minute=4,
        tcp="127.0.0.1:0",
        lifetime_check_interval_s=0.2,
    )
    tokens = settings.tokens_file
    assert tokens is not None
    tokens.write_text(f"{ADMIN}\n{ACME} tenant=acme\n{BETA} tenant=beta\n")
    server = Daemon(settings)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _client(server: Daemon, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base_url(server), headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


async def test_the_n_plus_first_create_is_refused_and_a_delete_frees_it(
    quota_server: Daemon,
) -> None:
    target = f"127.0.0.1:{quota_server.tcp_port}"
    async with (
        GrpcSandboxFactory(target, token=ACME) as acme,
        GrpcSandboxFactory(target, token=BETA) as beta,
        GrpcSandboxFactory(target, token=ADMIN) as admin,
        _client(quota_server, ACME) as acme_http,
    ):
        await acme.create_sandbox("a1")
        await acme.create_sandbox("a2")
        await acme.create_sandbox("a2")  # an existing sandbox again: no new one
        with pytest.raises(
            ResourceExhausted,
            match=r"tenant 'acme' is at its sandboxes quota: limit 2, in use 2, this create "
            r"asks 1 \(SANDBOXD_TENANT_MAX_SANDBOXES\)",
        ):
            await acme.create_sandbox("a3")
        refused = await acme_http.post("/v1/sandboxes", json={"instance_id": "a3"})
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "RESOURCE_EXHAUSTED"
        assert "sandboxes quota: limit 2, in use 2" in refused.json()["error"]["message"]
        with pytest.raises(ResourceExhausted, match="sandboxes quota"):
            await acme.transport.fork_sandbox("a1", "a3")
        # Another tenant, and the operator, are not held by acme's quota.
        await beta.create_sandbox("b1")
        await admin.create_sandbox("op1")
        await admin.create_sandbox("op2")

        await acme.transport.delete_sandbox("a2")
        with pytest.raises(ResourceExhausted, match="memory_bytes quota: limit 3221225472"):
            await acme.transport.create_sandbox("a3", SandboxOptions(memory_bytes=3 * GiB))
        created = await acme_http.post(
            "/v1/sandboxes", json={"instance_id": "a3", "options": {"memory_bytes": GiB}}
        )
        assert created.status_code == 201
        await acme.transport.delete_sandbox("a3")
        # Four creates in this minute (a1, a2, a3, a4; deleted ones count): the rate's limit.
        await acme.create_sandbox("a4")
        await acme.transport.delete_sandbox("a4")
        with pytest.raises(ResourceExhausted, match="creates_per_minute quota: limit 4, in use 4"):
            await acme.create_sandbox("a5")

        status = await acme.transport.get_status()
        assert [t.tenant for t in status.tenants] == ["acme"]
        use = {q.name: (q.used, q.limit) for q in status.tenants[0].quotas}
        assert use["sandboxes"] == (1, 2)
        assert use["memory_bytes"] == (GiB, 3 * GiB)
        assert use["cpus"] == (1, 0)
        everyone = await admin.transport.get_status()
        assert [t.tenant for t in everyone.tenants] == ["acme", "beta"]


async def test_metrics_show_use_against_quota_per_tenant(quota_server: Daemon) -> None:
    async with _client(quota_server, ACME) as acme, _client(quota_server, ADMIN) as admin:
        await acme.post("/v1/sandboxes", json={"instance_id": "m1"})
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            text = (await admin.get("/metrics")).text
            samples = {
                (s.name, s.labels.get("tenant"), s.labels.get("quota")): s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
                if s.name.startswith("sandboxd_tenant_")
            }
            if samples.get(("sandboxd_tenant_use", "acme", "sandboxes")) == 1:
                break
            await anyio.sleep(0.1)
        assert samples[("sandboxd_tenant_quota", "acme", "sandboxes")] == 2
        assert samples[("sandboxd_tenant_use", "acme", "memory_bytes")] == GiB


async def test_a_tenants_own_quota_wins_over_every_tenants(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path,
        tenant_max_sandboxes=1,
        tenant_quotas={"beta": {"sandboxes": 2}},
        tcp="127.0.0.1:0",
    )
    assert settings.tokens_file is not None
    settings.tokens_file.write_text(f"{ADMIN}\n{ACME} tenant=acme\n{BETA} tenant=beta\n")
    server = Daemon(settings)
    await server.start()
    try:
        target = f"127.0.0.1:{server.tcp_port}"
        async with (
            GrpcSandboxFactory(target, token=ACME) as acme,
            GrpcSandboxFactory(target, token=BETA) as beta,
        ):
            await acme.create_sandbox("a1")
            with pytest.raises(ResourceExhausted, match=r"limit 1, .*TENANT_MAX_SANDBOXES"):
                await acme.create_sandbox("a2")
            await beta.create_sandbox("b1")
            await beta.create_sandbox("b2")
            with pytest.raises(ResourceExhausted, match=r"limit 2, .*\(SANDBOXD_TENANT_QUOTAS\)"):
                await beta.create_sandbox("b3")
            (usage,) = (await beta.transport.get_status()).tenants
            assert {q.name: q.limit for q in usage.quotas}["sandboxes"] == 2
    finally:
        await server.stop()
    with pytest.raises(InvalidArgument, match=r"tenant_quotas\['x'\]: sandbox is not a quota"):
        Daemon(make_settings(tmp_path, tenant_quotas={"x": {"sandbox": 1}}))

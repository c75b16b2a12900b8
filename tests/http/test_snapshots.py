"""Named snapshots on the local backend, over gRPC (runtime_client) and HTTP:
snapshot -> change -> restore three times across daemon restarts, a sandbox
from a snapshot, names per tenant, the disk quota counting snapshots, bad input."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from runtime_client import GrpcSandboxFactory, ResourceExhausted
from runtime_client.errors import AlreadyExists, InvalidArgument, NotFound
from sandboxd.daemon.assembly import Daemon
from sandboxd.daemon.settings import Settings
from tests.http.conftest import ADMIN, base_url, make_settings
from tests.snapshot_checks import round_trips

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

ACME = "acme-token-0123456789abcdef"
BETA = "beta-token-0123456789abcdef"
DISK = 16 << 20  # each sandbox's disk_bytes; the tenant may keep 1 MiB more


def _settings(tmp_path: Path) -> Settings:
    settings = make_settings(
        tmp_path, tcp="127.0.0.1:0", disk_bytes=DISK, tenant_max_disk_bytes=DISK + (1 << 20)
    )
    assert settings.tokens_file is not None
    settings.tokens_file.write_text(f"{ADMIN}\n{ACME} tenant=acme\n{BETA} tenant=beta\n")
    return settings


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Daemon]:
    server = Daemon(_settings(tmp_path))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _tcp(server: Daemon) -> str:
    return f"127.0.0.1:{server.tcp_port}"


async def test_snapshot_change_restore_three_times_across_restarts(tmp_path: Path) -> None:
    settings = Settings(backend="local", local_root=tmp_path / "root", socket=tmp_path / "s.sock")
    server = Daemon(settings)
    await server.start()
    factory = GrpcSandboxFactory(f"unix://{settings.socket}")
    try:
        box = await factory.create_sandbox("snap-1")

        async def restart() -> None:
            nonlocal server, factory
            await factory.aclose()
            await server.stop()
            server = Daemon(settings)
            await server.start()
            factory = GrpcSandboxFactory(f"unix://{settings.socket}")

        await round_trips(box, lambda: factory.transport, restart, "s", {"copy", "reflink"})
        await factory.transport.delete_snapshot("s-0")
    finally:
        await factory.aclose()
        await server.stop()


async def test_names_are_per_tenant_and_the_disk_quota_counts_snapshots(daemon: Daemon) -> None:
    async with (
        GrpcSandboxFactory(_tcp(daemon), token=ACME) as acme,
        GrpcSandboxFactory(_tcp(daemon), token=BETA) as beta,
    ):
        box = await acme.create_sandbox("box-a")
        assert (await box.exec("head -c 400000 /dev/zero > f.bin")).exit_code == 0
        taken = await box.snapshot("keep")
        assert taken.size_bytes == 400_000
        with pytest.raises(AlreadyExists, match="'keep' already exists"):
            await box.snapshot("keep")
        # Another tenant neither sees nor reaches it, and may use the name.
        assert await beta.transport.list_snapshots() == []
        other = await beta.create_sandbox("box-b")
        with pytest.raises(NotFound, match="no snapshot named 'keep'"):
            await other.restore("keep")
        with pytest.raises(NotFound, match="no snapshot named 'keep'"):
            await beta.transport.delete_snapshot("keep")
        with pytest.raises(NotFound, match="no snapshot named 'keep'"):
            await beta.transport.create_from_snapshot("keep", "box-c")
        assert (await other.snapshot("keep")).size_bytes == 0
        # 400,000 bytes kept of the 1 MiB beside the sandbox's disk: a second copy
        # fits, a third does not (and leaves nothing behind).
        await box.snapshot("second")
        with pytest.raises(
            ResourceExhausted,
            match=f"disk_bytes quota: limit {DISK + (1 << 20)}, in use {DISK + 800_000}, "
            "this snapshot asks 400000",
        ):
            await box.snapshot("third")
        assert [s.name for s in await acme.transport.list_snapshots()] == ["keep", "second"]
        status = await acme.transport.get_status()
        (usage,) = status.tenants
        disk = next(q for q in usage.quotas if q.name == "disk_bytes")
        assert disk.used == DISK + 800_000
        # /metrics says the same (the keeper publishes it on its next look).
        assert await _metric_disk_use(daemon, "acme", DISK + 800_000) == DISK + 800_000
        await acme.transport.delete_snapshot("second")
        assert (await box.snapshot("third")).name == "third"
        # From a snapshot: the new sandbox is the caller's tenant's (and its disk
        # counts: the source goes first to make room).
        await box.delete()
        made = await acme.transport.create_from_snapshot("keep", "box-a2")
        assert made.sandbox.options.labels["sandboxd.tenant"] == "acme"
        with pytest.raises(AlreadyExists):
            await acme.transport.create_from_snapshot("keep", "box-a2")


async def test_http_routes_and_bad_input(daemon: Daemon) -> None:
    async with httpx.AsyncClient(
        base_url=base_url(daemon), headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30
    ) as http:
        await http.post("/v1/sandboxes", json={"instance_id": "web-1"})
        upload = "/v1/sandboxes/web-1/files/upload"
        put = await http.put(upload, params={"path": "f"}, content=b"one")
        assert put.status_code == 200, put.text
        made = await http.post("/v1/sandboxes/web-1/snapshots", json={"name": "v1"})
        assert made.status_code == 201, made.text
        assert made.json()["size_bytes"] == 3
        listed = (await http.get("/v1/snapshots")).json()["snapshots"]
        assert [s["name"] for s in listed] == ["v1"]
        await http.put(upload, params={"path": "f"}, content=b"2")
        restored = await http.post("/v1/sandboxes/web-1/restore", json={"name": "v1"})
        assert restored.status_code == 200, restored.text
        got = await http.get("/v1/sandboxes/web-1/files/download", params={"path": "f"})
        assert got.content == b"one"
        copy = await http.post("/v1/snapshots/v1/sandboxes", json={"new_id": "web-2"})
        assert copy.status_code == 201, copy.text
        assert copy.json()["sandbox"]["instance_id"] == "web-2"
        bad = await http.post("/v1/sandboxes/web-1/snapshots", json={"name": "../x"})
        assert bad.status_code == 400
        assert "invalid snapshot name '../x'" in bad.json()["error"]["message"]
        # Templates are the Docker backend's: this one says so before any stream.
        refused = await http.put("/v1/templates", content=b"not a tar")
        assert refused.status_code == 400
        assert "templates are not supported on the local backend" in refused.text
        missing = await http.delete("/v1/snapshots/nope")
        assert missing.status_code == 404
        assert (await http.delete("/v1/snapshots/v1")).json() == {"deleted": True}
        assert (await http.get("/v1/snapshots")).json() == {"snapshots": []}
    async with GrpcSandboxFactory(_tcp(daemon), token=ADMIN) as admin:
        with pytest.raises(InvalidArgument, match="invalid snapshot name ''"):
            await admin.transport.create_snapshot("web-1", "")
        with pytest.raises(NotFound):
            await admin.transport.create_snapshot("nobody", "x")


async def _metric_disk_use(server: Daemon, tenant: str, wanted: float) -> float:
    """The tenant's disk use on /metrics: ``wanted`` once published, else the last seen."""
    found = 0.0
    async with httpx.AsyncClient(
        base_url=base_url(server), headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30
    ) as http:
        for _ in range(50):
            for family in text_string_to_metric_families((await http.get("/metrics")).text):
                for sample in family.samples:
                    if sample.name == "sandboxd_tenant_use" and sample.labels == {
                        "tenant": tenant,
                        "quota": "disk_bytes",
                    }:
                        found = sample.value
            if found == wanted:
                break
            await anyio.sleep(0.1)
    return found

"""Bearer tokens on the HTTP listener: the TCP gRPC rules, the same Authenticator."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from sandboxd.contract.errors import InvalidArgument
from sandboxd.daemon.assembly import Daemon
from sandboxd.daemon.settings import Settings
from tests.http.conftest import TEAM_A, base_url

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]


async def test_missing_or_wrong_token_is_401(anonymous: httpx.AsyncClient) -> None:
    missing = await anonymous.post("/v1/sandboxes", json={"instance_id": "x1"})
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["error"]["code"] == "UNAUTHENTICATED"
    assert "Bearer <token>" in missing.json()["error"]["message"]
    for header in ("Bearer wrong-token-0123456789", "Basic YWRtaW46YWRtaW4=", "Bearer"):
        wrong = await anonymous.get("/v1/sandboxes", headers={"Authorization": header})
        assert wrong.status_code == 401, header
        assert wrong.json()["error"]["code"] == "UNAUTHENTICATED"


async def test_unauthenticated_calls_change_nothing(
    anonymous: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    await anonymous.post("/v1/sandboxes", json={"instance_id": "x1"})
    await anonymous.delete("/v1/sandboxes/x1")
    assert (await client.get("/v1/sandboxes")).json() == {"sandboxes": []}


async def test_scoped_token_reaches_only_its_prefix(
    server: Daemon, client: httpx.AsyncClient
) -> None:
    await client.post("/v1/sandboxes", json={"instance_id": "team-b-1"})
    async with httpx.AsyncClient(
        base_url=base_url(server), headers={"Authorization": f"Bearer {TEAM_A}"}
    ) as team:
        assert (
            await team.post("/v1/sandboxes", json={"instance_id": "team-a-1"})
        ).status_code == 201
        denied = await team.post("/v1/sandboxes", json={"instance_id": "team-b-2"})
        assert denied.status_code == 403
        assert denied.json()["error"] == {
            "code": "PERMISSION_DENIED",
            "message": "this token may only use instance ids starting with 'team-a-'",
        }
        for response in (
            await team.get("/v1/sandboxes/team-b-1"),
            await team.delete("/v1/sandboxes/team-b-1"),
            await team.post("/v1/sandboxes/team-b-1/tools/read", json={"arguments": {}}),
            await team.get("/v1/sandboxes/team-b-1/files/stat", params={"path": "."}),
        ):
            assert response.status_code == 403
        listed = await team.get("/v1/sandboxes")
        assert [s["instance_id"] for s in listed.json()["sandboxes"]] == ["team-a-1"]
    everything = await client.get("/v1/sandboxes")
    assert [s["instance_id"] for s in everything.json()["sandboxes"]] == ["team-a-1", "team-b-1"]


async def test_http_without_tokens_refuses_to_start(tmp_path: Path) -> None:
    settings = Settings(
        backend="local", local_root=tmp_path, socket=tmp_path / "s", http="127.0.0.1:0"
    )
    with pytest.raises(InvalidArgument, match="an HTTP listener needs bearer tokens"):
        Daemon(settings)


async def test_a_token_from_the_environment_guards_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "env-token-0123456789abcdef"
    monkeypatch.setenv("SANDBOXD_TOKEN", token)
    settings = Settings(
        backend="local", local_root=tmp_path, socket=tmp_path / "s", http="127.0.0.1:0"
    )
    server = Daemon(settings)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=base_url(server), timeout=30) as http:
            assert (await http.get("/v1/status")).status_code == 401
            wrong = await http.get("/v1/status", headers={"Authorization": "Bearer nope-0123456"})
            assert wrong.status_code == 401
            good = await http.get("/v1/status", headers={"Authorization": f"Bearer {token}"})
            assert good.status_code == 200, good.text
    finally:
        await server.stop()

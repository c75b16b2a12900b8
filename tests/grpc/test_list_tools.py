"""ListTools over gRPC and GET /v1/tools over HTTP serve the tool contract:
the very schemas runtime_client and the MCP bridge give models."""

from __future__ import annotations

import httpx
import pytest

from runtime_client import GrpcSandboxFactory
from runtime_client.sandbox_tools import DESCRIPTIONS, SCHEMAS
from sandboxd.contract.tools import TOOL_NAMES

pytestmark = pytest.mark.anyio

EXPECTED = [(name, DESCRIPTIONS[name], SCHEMAS[name]) for name in TOOL_NAMES]


async def test_list_tools_over_grpc(factory: GrpcSandboxFactory) -> None:
    tools = await factory.transport.list_tools()
    assert [(t.name, t.description, dict(t.input_schema)) for t in tools] == EXPECTED
    assert tools[3].input_schema["properties"]["timeout"]["maximum"] == 600_000


async def test_list_tools_over_http(tmp_path: object) -> None:
    from sandboxd.daemon.assembly import Daemon
    from tests.http.conftest import ADMIN, base_url, make_settings

    daemon = Daemon(make_settings(tmp_path))  # type: ignore[arg-type]
    await daemon.start()
    try:
        async with httpx.AsyncClient(
            base_url=base_url(daemon), headers={"Authorization": f"Bearer {ADMIN}"}
        ) as client:
            response = await client.get("/v1/tools")
            assert (await client.get("/v1/tools", headers={"Authorization": ""})).status_code == 401
    finally:
        await daemon.stop()
    assert response.status_code == 200
    tools = response.json()["tools"]
    assert [(t["name"], t["description"], t["input_schema"]) for t in tools] == EXPECTED

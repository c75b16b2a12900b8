"""The OpenAPI document: valid, complete, and fuzzed by schemathesis."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import httpx
import pytest
from openapi_spec_validator import validate

from sandboxd.contract.tools import TOOL_NAMES, input_schema
from sandboxd.daemon.assembly import Daemon
from tests.http.conftest import ADMIN, base_url

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

OPERATIONS = {
    ("post", "/v1/sandboxes"),
    ("get", "/v1/sandboxes"),
    ("get", "/v1/sandboxes/{instance_id}"),
    ("delete", "/v1/sandboxes/{instance_id}"),
    ("post", "/v1/sandboxes/{instance_id}/extend"),
    ("put", "/v1/sandboxes/{instance_id}/network"),
    ("get", "/v1/sandboxes/{instance_id}/network/log"),
    ("get", "/v1/status"),
    ("get", "/v1/tools"),
    *(("post", f"/v1/sandboxes/{{instance_id}}/tools/{name}") for name in TOOL_NAMES),
    ("get", "/v1/sandboxes/{instance_id}/files/content"),
    ("put", "/v1/sandboxes/{instance_id}/files/content"),
    ("get", "/v1/sandboxes/{instance_id}/files/stat"),
    ("get", "/v1/sandboxes/{instance_id}/files/list"),
    ("get", "/v1/sandboxes/{instance_id}/files/exists"),
    ("post", "/v1/sandboxes/{instance_id}/files/mkdir"),
    ("post", "/v1/sandboxes/{instance_id}/files/remove"),
    ("post", "/v1/sandboxes/{instance_id}/exec"),
    ("post", "/v1/sandboxes/{instance_id}/exec/stream"),
    ("put", "/v1/sandboxes/{instance_id}/files/upload"),
    ("get", "/v1/sandboxes/{instance_id}/files/download"),
    ("put", "/v1/sandboxes/{instance_id}/tree/upload"),
    ("get", "/v1/sandboxes/{instance_id}/tree/download"),
    ("post", "/v1/sandboxes/{instance_id}/fork"),
    ("post", "/v1/sandboxes/{instance_id}/snapshots"),
    ("get", "/v1/snapshots"),
    ("delete", "/v1/snapshots/{name}"),
    ("post", "/v1/sandboxes/{instance_id}/restore"),
    ("post", "/v1/snapshots/{name}/sandboxes"),
    ("put", "/v1/templates"),
    ("post", "/v1/snapshots/{name}/template"),
    ("post", "/v1/sandboxes/{instance_id}/processes"),
    ("get", "/v1/sandboxes/{instance_id}/processes"),
    ("post", "/v1/sandboxes/{instance_id}/processes/{handle}/stdin"),
    ("post", "/v1/sandboxes/{instance_id}/processes/{handle}/resize"),
    ("post", "/v1/sandboxes/{instance_id}/processes/{handle}/signal"),
    ("get", "/v1/sandboxes/{instance_id}/processes/{handle}/output"),
    ("get", "/v1/sandboxes/{instance_id}/ports"),
    ("post", "/v1/sandboxes/{instance_id}/previews"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
}  # fmt: skip

# Never fuzzed: the local backend has no isolation, so these would run commands or
# change files on the host itself. They are exercised with fixed input in test_api.
HOST_CHANGING = (
    r"/(tools/(bash|write|edit)|exec(/stream)?|files/(mkdir|remove|upload)|tree/upload|fork"
    r"|processes(/.*)?|snapshots(/.*)?|restore)$"
)


async def test_the_document_is_valid_openapi(anonymous: httpx.AsyncClient) -> None:
    response = await anonymous.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    validate(document)  # raises on any violation of the OpenAPI 3.1 schema
    found = {
        (method, path)
        for path, item in document["paths"].items()
        for method in item
        if method in {"get", "post", "put", "delete"}
    }
    assert found == OPERATIONS
    schemas = document["components"]["schemas"]
    assert {
        "ReadToolCallRequest",
        "ToolCallResponse",
        "ErrorBody",
        "Sandbox",
        "ExecStreamEvent",
    } <= set(schemas)
    # Validation failures are documented as what they are: 400 with the error body.
    assert not any(
        "422" in op["responses"] for item in document["paths"].values() for op in item.values()
    )
    assert document["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    tool = document["paths"]["/v1/sandboxes/{instance_id}/tools/read"]["post"]
    assert tool["responses"]["404"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorBody"
    }


async def test_tool_routes_document_the_tools_own_argument_schemas(
    anonymous: httpx.AsyncClient,
) -> None:
    # Derived from the tools' specs, like runtime_client's and the MCP bridge's.
    document = (await anonymous.get("/openapi.json")).json()
    for name in TOOL_NAMES:
        body = document["paths"][f"/v1/sandboxes/{{instance_id}}/tools/{name}"]["post"]
        ref = body["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        request = document["components"]["schemas"][ref.rsplit("/", 1)[1]]
        documented, as_text = request["properties"]["arguments"]["anyOf"]
        assert documented == input_schema(name)
        assert as_text["type"] == "string"


def _schemathesis() -> str:
    beside = Path(sys.executable).with_name("schemathesis")
    found = str(beside) if beside.exists() else shutil.which("schemathesis")
    if found is None:
        pytest.fail("schemathesis is not installed (pip install -e '.[dev]')")
    return found


@pytest.mark.timeout(280)
async def test_schemathesis_finds_no_server_error(
    server: Daemon, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    # The schema's example id, so generated calls also reach a real workspace.
    await client.post("/v1/sandboxes", json={"instance_id": "agent-1"})
    await client.post(
        "/v1/sandboxes/agent-1/tools/write",
        json={"arguments": {"file_path": "a.txt", "content": "alpha\nbeta\n"}},
    )
    url = base_url(server)
    process = await asyncio.create_subprocess_exec(
        _schemathesis(), "run", f"{url}/openapi.json",
        "--header", f"Authorization: Bearer {ADMIN}",
        "--checks", "not_a_server_error",
        "--max-examples", "20",
        "--phases", "examples,coverage,fuzzing",
        "--exclude-path-regex", HOST_CHANGING,
        "--exclude-method", "PUT",  # writing files (PUT files/content)
        "--request-timeout", "20",
        "--seed", "7",
        "--no-color",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=tmp_path,  # its report folder lands here
    )  # fmt: skip
    out, _ = await process.communicate()
    text = out.decode(errors="replace")
    assert process.returncode == 0, text[-6000:]
    assert "Selected: 24/49" in text, text[-3000:]  # 49 with the two template routes
    assert " passed" in text
    # The daemon is still whole after the fuzzing.
    assert (await client.get("/readyz")).status_code == 200
    assert (await client.get("/v1/sandboxes")).status_code == 200

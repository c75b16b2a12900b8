"""Each error class becomes its HTTP status and the JSON body, as gRPC gives the code."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import grpc
import httpx
import pytest

from sandboxd.contract import errors
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.contract.v1 import sandbox_pb2_grpc as pb_grpc
from sandboxd.daemon.assembly import Daemon
from sandboxd.transports.http.errors import HTTP_STATUS

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

EXPECTED = {
    errors.InvalidArgument: 400,
    errors.Unauthenticated: 401,
    errors.PermissionDenied: 403,
    errors.NotFound: 404,
    errors.AlreadyExists: 409,
    errors.Conflict: 412,
    errors.ResourceExhausted: 413,
    errors.Internal: 500,
    errors.SandboxUnavailable: 503,
    errors.Timeout: 504,
}


def test_every_error_class_has_its_status() -> None:
    assert set(EXPECTED) == set(errors.ERROR_CLASSES)
    for cls, status in EXPECTED.items():
        assert HTTP_STATUS[cls.status_name] == status


@pytest.mark.parametrize("cls", errors.ERROR_CLASSES, ids=lambda c: c.__name__)
async def test_each_error_class_over_http(
    cls: type[errors.SandboxdError],
    server: Daemon,
    client: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def failing() -> None:
        raise cls(f"{cls.__name__} says why")

    monkeypatch.setattr(server.service, "get_status", failing)
    response = await client.get("/v1/status")
    assert response.status_code == EXPECTED[cls]
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "error": {"code": cls.status_name, "message": f"{cls.__name__} says why"}
    }


async def test_an_unexpected_exception_is_500_with_an_incident_id(
    server: Daemon, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken() -> None:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(server.service, "get_status", broken)
    response = await client.get("/v1/status")
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "INTERNAL"
    assert error["message"].startswith("internal error ")
    assert "secret detail" not in error["message"]


async def _both(
    server: Daemon, client: httpx.AsyncClient, grpc_call: object, http_call: object
) -> tuple[tuple[str, str], tuple[str, str]]:
    """The same bad request over gRPC and HTTP: (code, message) from each."""
    async with grpc.aio.insecure_channel(f"unix://{server.settings.socket}") as channel:
        stub = pb_grpc.SandboxServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await grpc_call(stub)  # type: ignore[operator]
    response = await http_call(client)  # type: ignore[operator]
    error = response.json()["error"]
    return (raised.value.code().name, raised.value.details() or ""), (
        error["code"],
        error["message"],
    )


async def test_real_errors_match_grpc(server: Daemon, client: httpx.AsyncClient) -> None:
    """Triggered for real, not stubbed: gRPC and HTTP give the same code and message."""
    await client.post("/v1/sandboxes", json={"instance_id": "box", "options": {"cpus": 0.5}})
    big = 64 * 1024 + 1
    cases = [
        (  # INVALID_ARGUMENT
            lambda s: s.GetSandbox(pb.GetSandboxRequest(instance_id="bad id")),
            lambda c: c.get("/v1/sandboxes/bad id"),
            400,
        ),
        (  # NOT_FOUND
            lambda s: s.DeleteSandbox(pb.DeleteSandboxRequest(instance_id="ghost")),
            lambda c: c.delete("/v1/sandboxes/ghost"),
            404,
        ),
        (  # ALREADY_EXISTS
            lambda s: s.CreateSandbox(
                pb.CreateSandboxRequest(instance_id="box", options=pb.SandboxOptions(cpus=1))
            ),
            lambda c: c.post("/v1/sandboxes", json={"instance_id": "box", "options": {"cpus": 1}}),
            409,
        ),
        (  # FAILED_PRECONDITION
            lambda s: s.WriteFile(
                pb.WriteFileRequest(
                    instance_id="box", path="f", data=b"x", expected_sha256="0" * 64
                )
            ),
            lambda c: c.put(
                "/v1/sandboxes/box/files/content",
                json={"path": "f", "data_base64": "eA==", "expected_sha256": "0" * 64},
            ),
            412,
        ),
        (  # RESOURCE_EXHAUSTED: over the payload limit, answered by the service
            lambda s: s.WriteFile(
                pb.WriteFileRequest(instance_id="box", path="f", data=b"x" * big)
            ),
            lambda c: c.put(
                "/v1/sandboxes/box/files/content",
                json={"path": "f", "data_base64": base64.b64encode(b"x" * big).decode()},
            ),
            413,
        ),
        (  # unknown tool: INVALID_ARGUMENT naming the tools
            lambda s: s.CallTool(pb.CallToolRequest(instance_id="box", name="rm")),
            lambda c: c.post("/v1/sandboxes/box/tools/rm", json={}),
            400,
        ),
        (  # malformed JSON arguments
            lambda s: s.CallTool(
                pb.CallToolRequest(instance_id="box", name="read", arguments_json="[1]")
            ),
            lambda c: c.post("/v1/sandboxes/box/tools/read", json={"arguments": "[1]"}),
            400,
        ),
    ]
    for grpc_call, http_call, status in cases:
        over_grpc, over_http = await _both(server, client, grpc_call, http_call)
        assert over_grpc[0] == over_http[0]
        assert HTTP_STATUS[over_http[0]] == status
        # The messages name the same rule; HTTP says `arguments` where gRPC says `arguments_json`.
        assert over_grpc[1].replace("arguments_json", "arguments") == over_http[1]


async def test_malformed_requests_are_400_invalid_argument(client: httpx.AsyncClient) -> None:
    for response in (
        await client.post(
            "/v1/sandboxes", content=b"{not json", headers={"content-type": "application/json"}
        ),
        await client.post("/v1/sandboxes", json={"instance_id": "x", "surprise": 1}),
        await client.post("/v1/sandboxes", json={"options": {}}),
        await client.get("/v1/sandboxes", params={"label": "no-equals"}),
        await client.get("/v1/sandboxes/x/files/content", params={"path": "f", "offset": "a"}),
        await client.put("/v1/sandboxes/x/files/content", json={"path": "f", "data_base64": "!!"}),
    ):
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "INVALID_ARGUMENT"


async def test_route_and_method_refusals_keep_the_error_shape(client: httpx.AsyncClient) -> None:
    missing = await client.get("/v1/nothing-here")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "NOT_FOUND"
    wrong_method = await client.patch("/v1/sandboxes")
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"]["code"] == "UNIMPLEMENTED"


async def test_a_body_over_the_limit_is_413_before_it_is_read(client: httpx.AsyncClient) -> None:
    limit = 2 * 64 * 1024 + (1 << 20)
    declared = await client.post("/v1/sandboxes", content=b"x" * (limit + 1))
    assert declared.status_code == 413
    assert declared.json()["error"]["code"] == "RESOURCE_EXHAUSTED"

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(limit // 65536 + 2):  # no content-length: counted as it arrives
            yield b"x" * 65536

    streamed = await client.post(
        "/v1/sandboxes", content=chunks(), headers={"content-type": "application/json"}
    )
    assert streamed.status_code == 413
    assert streamed.json()["error"]["code"] == "RESOURCE_EXHAUSTED"

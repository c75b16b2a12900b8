"""A generic gRPC client that knows nothing of sandboxd but what reflection says.

It imports none of the generated code: message types are built at run time
from the descriptors the server publishes, as grpcurl or Postman would.
"""

from __future__ import annotations

import json

import anyio
import grpc
import pytest
from google.protobuf import descriptor_pool, json_format, message_factory
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from sandboxd.daemon.assembly import Daemon

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

SERVICE = "sandboxd.v1.SandboxService"


def _call_by_reflection(target: str, method: str, body: dict[str, object]) -> dict[str, object]:
    with grpc.insecure_channel(target) as channel:
        pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
        service = pool.FindServiceByName(SERVICE)
        rpc = service.FindMethodByName(method)
        request_type = message_factory.GetMessageClass(rpc.input_type)
        response_type = message_factory.GetMessageClass(rpc.output_type)
        request = json_format.ParseDict(body, request_type())
        call = channel.unary_unary(
            f"/{SERVICE}/{method}",
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=response_type.FromString,
        )
        reply = call(request, timeout=30)
        return json_format.MessageToDict(reply, preserving_proto_field_name=True)


def _status_by_reflection(target: str) -> grpc.StatusCode:
    try:
        _call_by_reflection(target, "GetSandbox", {"instance_id": "no such id"})
    except grpc.RpcError as exc:
        return exc.code()  # type: ignore[no-any-return]
    raise AssertionError("an invalid id was accepted")


async def test_a_reflection_only_client_drives_a_sandbox(server: Daemon) -> None:
    target = f"unix://{server.settings.socket}"

    def session() -> list[dict[str, object]]:
        return [
            _call_by_reflection(target, "CreateSandbox", {"instance_id": "refl"}),
            _call_by_reflection(
                target,
                "CallTool",
                {
                    "instance_id": "refl",
                    "name": "write",
                    "arguments_json": json.dumps({"file_path": "hi.txt", "content": "hello\n"}),
                },
            ),
            _call_by_reflection(
                target, "Bash", {"instance_id": "refl", "command": "cat hi.txt; exit 3"}
            ),
            _call_by_reflection(target, "ListSandboxes", {}),
        ]

    created, written, ran, listed = await anyio.to_thread.run_sync(session)
    assert created["created"] is True and created["sandbox"]["instance_id"] == "refl"  # type: ignore[index]
    assert written["text"] == "Created hi.txt (1 line, 6 bytes)."
    assert ran["text"] == "hello\n\nExit code: 3" and ran["exit_code"] == "3"
    assert [s["instance_id"] for s in listed["sandboxes"]] == ["refl"]  # type: ignore[union-attr]
    code = await anyio.to_thread.run_sync(_status_by_reflection, target)
    assert code == grpc.StatusCode.INVALID_ARGUMENT

"""The six tools: ``POST /v1/sandboxes/{instance_id}/tools/{name}``.

Each tool has its own documented route (so clients and fuzzers can tell
them apart, e.g. to leave ``bash`` alone), whose body documents the tool's
own argument schema (derived from its spec, ``sandboxd.contract.tools``); a
hidden catch-all sends any other name to the service too, which answers it
as gRPC does: INVALID_ARGUMENT, listing the tools. A tool's own failure is a
200 with ``is_error: true``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter
from pydantic import Field, create_model

from sandboxd.contract import tools
from sandboxd.observability.calls import current_call
from sandboxd.service.sandbox_service import SandboxService
from sandboxd.transports.http.deps import Service
from sandboxd.transports.http.routes.params import InstanceId
from sandboxd.transports.http.routes.responses import errors
from sandboxd.transports.http.schemas import ToolCallRequest, ToolCallResponse

router = APIRouter(prefix="/v1/sandboxes/{instance_id}/tools", tags=["tools"])


async def _call(
    service: SandboxService, instance_id: str, name: str, body: ToolCallRequest
) -> ToolCallResponse:
    call = current_call()
    if call is not None:
        call.tool_call_id = body.tool_call_id or ""
    # "" is no id, as on gRPC, where an empty string cannot be told from an unset one.
    tool_call_id = body.tool_call_id or None
    result = await service.call_tool(
        instance_id, name, body.arguments, tool_call_id=tool_call_id, cwd=body.cwd or None
    )
    if call is not None:
        call.tool_error = result.is_error
    return ToolCallResponse(text=result.text, is_error=result.is_error, fields=dict(result.fields))


def request_model(name: str) -> type[ToolCallRequest]:
    """The tool's request body: ToolCallRequest, its ``arguments`` documented by the spec.

    Documented, not enforced: the tool itself judges the arguments (aliases,
    coercions, an ``is_error`` result naming the valid keys), as on gRPC.
    """
    arguments_schema: dict[str, Any] = {
        "anyOf": [
            tools.input_schema(name),
            {"type": "string", "description": "the same object as JSON text"},
        ]
    }
    model: type[ToolCallRequest] = create_model(
        f"{name.title().replace('_', '')}ToolCallRequest",
        __base__=ToolCallRequest,
        arguments=(
            dict[str, Any] | str,
            Field(
                default_factory=dict,
                description=f"the arguments of {name}, as the model produced them",
                json_schema_extra=arguments_schema,  # type: ignore[arg-type]
            ),
        ),
    )
    return model


def _tool_route(name: str) -> Callable[..., Awaitable[ToolCallResponse]]:
    async def call_tool(
        instance_id: InstanceId, body: ToolCallRequest, service: Service
    ) -> ToolCallResponse:
        return await _call(service, instance_id, name, body)

    call_tool.__doc__ = tools.description(name)
    # The body's type is made per tool at run time; FastAPI reads it from here.
    call_tool.__annotations__ = {**call_tool.__annotations__, "body": request_model(name)}
    return call_tool


for _name in tools.TOOL_NAMES:
    router.add_api_route(
        f"/{_name}",
        _tool_route(_name),
        methods=["POST"],
        name="CallTool",
        operation_id=f"call_tool_{_name}",
        response_model=ToolCallResponse,
        responses=errors(404),
        summary=f"Call {_name}",
    )


@router.post("/{name}", name="CallTool", include_in_schema=False)
async def call_unknown_tool(
    instance_id: InstanceId, name: str, body: ToolCallRequest, service: Service
) -> ToolCallResponse:
    return await _call(service, instance_id, name, body)

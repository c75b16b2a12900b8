"""Sandboxes: create (idempotent per id), get, list, delete; and the daemon's status.

Route names are the gRPC method names, so metrics and logs read the same
on both transports.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from sandboxd.contract.errors import InvalidArgument
from sandboxd.observability.calls import current_call
from sandboxd.transports.http.deps import Service
from sandboxd.transports.http.routes.params import InstanceId
from sandboxd.transports.http.routes.responses import errors
from sandboxd.transports.http.schemas import (
    CreateSandboxRequest,
    CreateSandboxResponse,
    DeleteSandboxResponse,
    ExtendSandboxRequest,
    ListSandboxesResponse,
    ListToolsResponse,
    Sandbox,
    ServerStatus,
)

router = APIRouter(prefix="/v1", tags=["sandboxes"])


@router.post(
    "/sandboxes",
    name="CreateSandbox",
    response_model=CreateSandboxResponse,
    status_code=201,
    responses={
        **errors(409, 429),
        200: {"model": CreateSandboxResponse, "description": "already existed"},
    },
)
async def create_sandbox(
    body: CreateSandboxRequest, service: Service, response: Response
) -> CreateSandboxResponse:
    """Create the sandbox, or return the existing one (201 created, 200 existed)."""
    call = current_call()
    if call is not None:  # the id is in the body here, not the path: tell the access log
        call.instance_id = body.instance_id
    options = body.options.to_model() if body.options else None
    info, created = await service.create_sandbox(body.instance_id, options)
    response.status_code = 201 if created else 200
    return CreateSandboxResponse(sandbox=Sandbox.from_model(info), created=created)


@router.get(
    "/sandboxes",
    name="ListSandboxes",
    response_model=ListSandboxesResponse,
    responses=errors(),
)
async def list_sandboxes(
    service: Service,
    label: Annotated[
        list[str], Query(description="key=value; repeat to require several labels")
    ] = [],  # noqa: B006 -- FastAPI reads the default, it is never mutated
) -> ListSandboxesResponse:
    """The sandboxes this token may see, optionally filtered by labels."""
    selector: dict[str, str] = {}
    for item in label:
        key, sep, value = item.partition("=")
        if not sep:
            raise InvalidArgument(f"label must be key=value (got {item!r})")
        selector[key] = value
    found = await service.list_sandboxes(selector)
    return ListSandboxesResponse(sandboxes=[Sandbox.from_model(info) for info in found])


@router.get(
    "/sandboxes/{instance_id}",
    name="GetSandbox",
    response_model=Sandbox,
    responses=errors(404),
)
async def get_sandbox(instance_id: InstanceId, service: Service) -> Sandbox:
    return Sandbox.from_model(await service.get_sandbox(instance_id))


@router.delete(
    "/sandboxes/{instance_id}",
    name="DeleteSandbox",
    response_model=DeleteSandboxResponse,
    responses=errors(404),
)
async def delete_sandbox(instance_id: InstanceId, service: Service) -> DeleteSandboxResponse:
    """Remove the sandbox's container and volume (files are gone)."""
    await service.delete_sandbox(instance_id)
    return DeleteSandboxResponse(deleted=True)


@router.post(
    "/sandboxes/{instance_id}/extend",
    name="ExtendSandbox",
    response_model=Sandbox,
    responses=errors(404),
)
async def extend_sandbox(
    instance_id: InstanceId, body: ExtendSandboxRequest, service: Service
) -> Sandbox:
    """Let the sandbox live `seconds` from now (within the daemon's maximum lifetime)."""
    return Sandbox.from_model(await service.extend_sandbox(instance_id, body.seconds))


@router.get("/status", name="GetStatus", response_model=ServerStatus, responses=errors())
async def get_status(service: Service) -> ServerStatus:
    return ServerStatus.from_model(await service.get_status())


@router.get(
    "/tools", name="ListTools", response_model=ListToolsResponse, responses=errors(), tags=["tools"]
)
async def list_tools(service: Service) -> ListToolsResponse:
    """Each tool's name, description and argument JSON schema (as given to models)."""
    return ListToolsResponse.from_models(service.list_tools())

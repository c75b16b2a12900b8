"""Ports over HTTP: what listens inside, and preview tokens (signed URLs).

The preview itself (``/v1/sandboxes/{id}/ports/{port}/...`` and preview
hosts) is served by ``transports.http.preview``, outside FastAPI's routing.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from sandboxd.service.forwarding import DEFAULT_PREVIEW_TTL_S
from sandboxd.transports.http.deps import Service
from sandboxd.transports.http.routes.params import InstanceId
from sandboxd.transports.http.routes.responses import errors

router = APIRouter(prefix="/v1/sandboxes/{instance_id}", tags=["ports"])


class ListeningPort(BaseModel):
    host: str
    port: int


class PortList(BaseModel):
    ports: list[ListeningPort]


class CreatePreviewRequest(BaseModel):
    port: int = Field(ge=1, le=65535)
    ttl_s: int = Field(DEFAULT_PREVIEW_TTL_S, ge=1, description="seconds the token lives")


class PreviewInfo(BaseModel):
    token: str = Field(description="X-Sandboxd-Preview-Token, or in a URL's query")
    expires_at: int = Field(description="unix seconds")
    path: str = Field(description="the signed URL's path on this listener")
    host: str = Field(description="{port}-{id}.<preview domain>, or empty without one")


@router.get("/ports", name="ListPorts", response_model=PortList, responses=errors(404))
async def list_ports(instance_id: InstanceId, service: Service) -> PortList:
    """The TCP ports something listens on inside the sandbox."""
    found = await service.list_ports(instance_id)
    return PortList(ports=[ListeningPort(host=p.host, port=p.port) for p in found])


@router.post(
    "/previews", name="CreatePreview", response_model=PreviewInfo, responses=errors(400, 404)
)
async def create_preview(
    instance_id: InstanceId, body: CreatePreviewRequest, service: Service
) -> PreviewInfo:
    """A preview token for one port: hand ``path`` (a signed URL) to a browser."""
    preview = await service.create_preview(instance_id, body.port, body.ttl_s)
    return PreviewInfo(
        token=preview.token, expires_at=preview.expires_at, path=preview.path, host=preview.host
    )

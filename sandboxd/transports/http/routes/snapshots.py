"""Named snapshots: take one of a sandbox, list, delete, restore one in place,
create a sandbox from one (the Snapshots service's RPCs, by the same names)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from fastapi import Path as PathParam
from pydantic import BaseModel, Field

from sandboxd.contract import models
from sandboxd.contract.models import SNAPSHOT_METHODS
from sandboxd.transports.http.deps import Service
from sandboxd.transports.http.routes.params import InstanceId
from sandboxd.transports.http.routes.responses import errors
from sandboxd.transports.http.schemas import (
    INSTANCE_ID_SCHEMA,
    Sandbox,
    SandboxOptions,
    _Request,
)

router = APIRouter(prefix="/v1", tags=["snapshots"])

# Snapshot names follow the instance id's pattern (validation.snapshot_name).
SnapshotName = Annotated[
    str, PathParam(description="a snapshot's name", json_schema_extra=INSTANCE_ID_SCHEMA)
]


class Snapshot(BaseModel):
    name: str
    source_id: str = Field(description="the sandbox it was taken of")
    size_bytes: int = Field(description="its files' bytes (the tenant's disk quota counts them)")
    created_at_ms: int
    method: str = Field(description=" | ".join(SNAPSHOT_METHODS))
    duration_ms: int
    options: SandboxOptions = Field(description="the source's; a sandbox made from it starts so")

    @classmethod
    def from_model(cls, snapshot: models.SnapshotInfo) -> Snapshot:
        return cls(
            name=snapshot.name,
            source_id=snapshot.source_id,
            size_bytes=snapshot.size_bytes,
            created_at_ms=snapshot.created_at_ms,
            method=snapshot.method,
            duration_ms=snapshot.duration_ms,
            options=SandboxOptions.from_model(snapshot.options),
        )


class CreateSnapshotRequest(_Request):
    name: str = Field(description="the snapshot's name", json_schema_extra=INSTANCE_ID_SCHEMA)


class ListSnapshotsResponse(BaseModel):
    snapshots: list[Snapshot]


class DeleteSnapshotResponse(BaseModel):
    deleted: bool


class RestoreSnapshotRequest(_Request):
    name: str = Field(description="the snapshot to restore", json_schema_extra=INSTANCE_ID_SCHEMA)


class CreateFromSnapshotRequest(_Request):
    new_id: str = Field(description="the new sandbox's id", json_schema_extra=INSTANCE_ID_SCHEMA)
    options: SandboxOptions | None = Field(
        default=None, description="fields set here replace the snapshot's options"
    )


class SnapshotCopyResponse(BaseModel):
    sandbox: Sandbox
    method: str = Field(description=" | ".join(SNAPSHOT_METHODS))
    duration_ms: int

    @classmethod
    def from_model(cls, result: models.ForkResult) -> SnapshotCopyResponse:
        return cls(
            sandbox=Sandbox.from_model(result.sandbox),
            method=result.method,
            duration_ms=result.duration_ms,
        )


@router.post(
    "/sandboxes/{instance_id}/snapshots",
    name="CreateSnapshot",
    response_model=Snapshot,
    status_code=201,
    responses=errors(404, 409, 429),
)
async def create_snapshot(
    instance_id: InstanceId, body: CreateSnapshotRequest, service: Service
) -> Snapshot:
    """Snapshot the sandbox's files (frozen while they are copied) and options."""
    return Snapshot.from_model(await service.create_snapshot(instance_id, body.name))


@router.get(
    "/snapshots", name="ListSnapshots", response_model=ListSnapshotsResponse, responses=errors()
)
async def list_snapshots(service: Service) -> ListSnapshotsResponse:
    """This token's tenant's snapshots, by name."""
    found = await service.list_snapshots()
    return ListSnapshotsResponse(snapshots=[Snapshot.from_model(s) for s in found])


@router.delete(
    "/snapshots/{name}",
    name="DeleteSnapshot",
    response_model=DeleteSnapshotResponse,
    responses=errors(404),
)
async def delete_snapshot(name: SnapshotName, service: Service) -> DeleteSnapshotResponse:
    await service.delete_snapshot(name)
    return DeleteSnapshotResponse(deleted=True)


@router.post(
    "/sandboxes/{instance_id}/restore",
    name="RestoreSnapshot",
    response_model=SnapshotCopyResponse,
    responses=errors(404),
)
async def restore_snapshot(
    instance_id: InstanceId, body: RestoreSnapshotRequest, service: Service
) -> SnapshotCopyResponse:
    """Replace the sandbox's files by the snapshot's; its processes restart."""
    return SnapshotCopyResponse.from_model(await service.restore_snapshot(instance_id, body.name))


@router.post(
    "/snapshots/{name}/sandboxes",
    name="CreateFromSnapshot",
    response_model=SnapshotCopyResponse,
    status_code=201,
    responses=errors(404, 409, 429),
)
async def create_from_snapshot(
    name: SnapshotName, body: CreateFromSnapshotRequest, service: Service
) -> SnapshotCopyResponse:
    """A new sandbox with the snapshot's options (or `options`' set fields) and files."""
    options = body.options.to_model() if body.options else None
    return SnapshotCopyResponse.from_model(
        await service.create_from_snapshot(name, body.new_id, options)
    )

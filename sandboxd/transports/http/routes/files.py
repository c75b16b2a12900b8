"""The low-level file verbs (bytes travel as base64).

Reads take query parameters (GET); writes take JSON bodies.
"""

from __future__ import annotations

from fastapi import APIRouter

from sandboxd.transports.http.deps import Service
from sandboxd.transports.http.routes.params import FilePath, InstanceId
from sandboxd.transports.http.routes.responses import errors
from sandboxd.transports.http.schemas import (
    ExistsResponse,
    FileInfo,
    ListDirResponse,
    MakeDirRequest,
    MakeDirResponse,
    ReadFileResponse,
    RemoveRequest,
    RemoveResponse,
    WriteFileRequest,
    WriteFileResponse,
    decode_base64,
    encode_base64,
)

router = APIRouter(prefix="/v1/sandboxes/{instance_id}", tags=["files"])


@router.get(
    "/files/content", name="ReadFile", response_model=ReadFileResponse, responses=errors(404)
)
async def read_file(
    instance_id: InstanceId,
    path: FilePath,
    service: Service,
    offset: int = 0,
    length: int | None = None,
) -> ReadFileResponse:
    result = await service.read_file(instance_id, path, offset, length)
    return ReadFileResponse(
        data_base64=encode_base64(result.data), size=result.size, eof=result.eof
    )


@router.put(
    "/files/content",
    name="WriteFile",
    response_model=WriteFileResponse,
    responses=errors(404, 409, 412),
)
async def write_file(
    instance_id: InstanceId, body: WriteFileRequest, service: Service
) -> WriteFileResponse:
    """Atomic write; ``expected_sha256`` makes it a compare-and-swap (412 on a mismatch)."""
    result = await service.write_file(
        instance_id,
        body.path,
        decode_base64(body.data_base64, "data_base64"),
        create_parents=body.create_parents,
        expected_sha256=body.expected_sha256,
        mode=body.mode,
    )
    return WriteFileResponse(size=result.size, sha256=result.sha256, created=result.created)


@router.get("/files/stat", name="Stat", response_model=FileInfo, responses=errors(404))
async def stat(
    instance_id: InstanceId, path: FilePath, service: Service, follow_symlinks: bool = False
) -> FileInfo:
    info = await service.stat(instance_id, path, follow_symlinks=follow_symlinks)
    return FileInfo.from_model(info)


@router.get("/files/list", name="ListDir", response_model=ListDirResponse, responses=errors(404))
async def list_dir(instance_id: InstanceId, path: FilePath, service: Service) -> ListDirResponse:
    entries = await service.list_dir(instance_id, path)
    return ListDirResponse(entries=[FileInfo.from_model(entry) for entry in entries])


@router.get("/files/exists", name="Exists", response_model=ExistsResponse, responses=errors(404))
async def exists(instance_id: InstanceId, path: FilePath, service: Service) -> ExistsResponse:
    result = await service.exists(instance_id, path)
    return ExistsResponse(exists=result.exists, type=result.type.value if result.type else None)


@router.post(
    "/files/mkdir", name="MakeDir", response_model=MakeDirResponse, responses=errors(404, 409)
)
async def make_dir(
    instance_id: InstanceId, body: MakeDirRequest, service: Service
) -> MakeDirResponse:
    created = await service.make_dir(
        instance_id, body.path, parents=body.parents, exist_ok=body.exist_ok
    )
    return MakeDirResponse(created=created)


@router.post("/files/remove", name="Remove", response_model=RemoveResponse, responses=errors(404))
async def remove(instance_id: InstanceId, body: RemoveRequest, service: Service) -> RemoveResponse:
    removed = await service.remove(
        instance_id, body.path, recursive=body.recursive, missing_ok=body.missing_ok
    )
    return RemoveResponse(removed=removed)

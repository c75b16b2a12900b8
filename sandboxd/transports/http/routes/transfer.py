"""Streamed transfers and fork: raw request and response bodies, never
buffered whole (the service moves 1 MiB chunks, at most 4 in flight).

Downloads open their file before the response starts, so a missing file is
a 404 with the error body; a failure after the first byte can only cut the
stream (the client sees a short body).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from sandboxd.contract.models import FORK_METHODS
from sandboxd.transports.http.deps import Service
from sandboxd.transports.http.routes.params import FilePath, InstanceId
from sandboxd.transports.http.routes.responses import errors
from sandboxd.transports.http.schemas import (
    INSTANCE_ID_SCHEMA,
    Sandbox,
    SandboxOptions,
    WriteFileResponse,
)

router = APIRouter(prefix="/v1/sandboxes/{instance_id}", tags=["transfers"])

_RAW_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}


def _streamed(media_type: str, what: str) -> dict[int | str, dict[str, Any]]:
    return {
        **errors(404),
        200: {"description": what, "content": {media_type: {"schema": {"type": "string"}}}},
    }


class SkippedLink(BaseModel):
    path: str = Field(description="relative to the target")
    target: str = Field(description="what the link says")
    reason: str


class UploadTreeResponse(BaseModel):
    files: int
    directories: int
    symlinks: int
    bytes: int
    skipped_links: list[SkippedLink] = Field(
        default_factory=list,
        description="symlinks left out (the first 100): out of the target, absolute, "
        "through another link, or a folder in their place",
    )
    links_skipped: int = Field(0, description="how many symlinks were left out in all")


class ForkSandboxRequest(BaseModel):
    new_id: str = Field(description="the fork's instance id", json_schema_extra=INSTANCE_ID_SCHEMA)
    options: SandboxOptions | None = Field(
        default=None, description="fields set here replace the source's options"
    )


class ForkSandboxResponse(BaseModel):
    sandbox: Sandbox
    method: str = Field(description=" | ".join(FORK_METHODS))
    duration_ms: int


async def _body(request: Request) -> AsyncIterator[bytes]:
    async for chunk in request.stream():
        if chunk:
            yield chunk


async def _primed(parts: AsyncIterator[Any]) -> AsyncIterator[bytes]:
    """Run the stream up to its first item now, so errors become statuses."""
    first = await anext(parts)

    async def rest() -> AsyncIterator[bytes]:
        item = first
        while True:
            if isinstance(item, bytes):
                yield item
            try:
                item = await anext(parts)
            except StopAsyncIteration:
                return

    return rest()


@router.put(
    "/files/upload",
    name="Upload",
    response_model=WriteFileResponse,
    responses=errors(404, 412),
    openapi_extra=_RAW_BODY,
)
async def upload(
    instance_id: InstanceId,
    path: FilePath,
    request: Request,
    service: Service,
    create_parents: bool = False,
    expected_sha256: str | None = None,
    mode: int | None = None,
) -> WriteFileResponse:
    """Write a file of any size from the raw body, atomically when the body ends
    (a cut upload leaves the previous content); ``expected_sha256`` as in WriteFile."""
    result = await service.upload_file(
        instance_id,
        path,
        _body(request),
        create_parents=create_parents,
        expected_sha256=expected_sha256,
        mode=mode,
    )
    return WriteFileResponse(size=result.size, sha256=result.sha256, created=result.created)


@router.get(
    "/files/download",
    name="Download",
    response_class=StreamingResponse,
    responses=_streamed("application/octet-stream", "the file's bytes"),
)
async def download(
    instance_id: InstanceId,
    path: FilePath,
    service: Service,
    offset: int = 0,
    length: int | None = None,
) -> StreamingResponse:
    """The file's bytes (from ``offset``, ``length`` of them), streamed."""
    parts = service.download_file(instance_id, path, offset, length)
    return StreamingResponse(await _primed(parts), media_type="application/octet-stream")


@router.put(
    "/tree/upload",
    name="UploadTree",
    response_model=UploadTreeResponse,
    responses=errors(404),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
async def upload_tree(
    instance_id: InstanceId, path: FilePath, request: Request, service: Service
) -> UploadTreeResponse:
    """Extract the raw tar body into the folder ``path`` (created). Entries that
    would land outside it (``..``, absolute names, devices, FIFOs) are refused
    with 400 naming the entry; symlinks that would resolve outside it are left
    out and listed."""
    result = await service.upload_tree(instance_id, path, _body(request))
    return UploadTreeResponse(
        files=result.files,
        directories=result.directories,
        symlinks=result.symlinks,
        bytes=result.bytes,
        skipped_links=[SkippedLink(**dataclasses.asdict(link)) for link in result.skipped_links],
        links_skipped=result.links_skipped,
    )


@router.get(
    "/tree/download",
    name="DownloadTree",
    response_class=StreamingResponse,
    responses=_streamed("application/x-tar", "the folder as a tar stream"),
)
async def download_tree(
    instance_id: InstanceId, path: FilePath, service: Service, gitignore: bool = False
) -> StreamingResponse:
    """The folder ``path`` as a tar stream; ``gitignore`` leaves out what its
    .gitignore files ignore."""
    parts = service.download_tree(instance_id, path, gitignore=gitignore)
    return StreamingResponse(await _primed(parts), media_type="application/x-tar")


@router.post(
    "/fork",
    name="ForkSandbox",
    response_model=ForkSandboxResponse,
    status_code=201,
    responses=errors(404, 409),
)
async def fork_sandbox(
    instance_id: InstanceId, body: ForkSandboxRequest, service: Service
) -> ForkSandboxResponse:
    """A new sandbox whose files start as a consistent copy of this one's."""
    options = body.options.to_model() if body.options else None
    result = await service.fork_sandbox(instance_id, body.new_id, options)
    return ForkSandboxResponse(
        sandbox=Sandbox.from_model(result.sandbox),
        method=result.method,
        duration_ms=result.duration_ms,
    )

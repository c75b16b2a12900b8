"""Templates over HTTP: build one from a tar body, or from a snapshot; the
build's log comes back as NDJSON lines (the Templates service's RPCs)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from sandboxd.contract import models
from sandboxd.contract.errors import SandboxdError
from sandboxd.observability.calls import mark_failed
from sandboxd.transports.http.deps import Service
from sandboxd.transports.http.routes.responses import errors
from sandboxd.transports.http.routes.snapshots import SnapshotName
from sandboxd.transports.http.schemas import ErrorDetail

router = APIRouter(prefix="/v1", tags=["templates"])

NDJSON = "application/x-ndjson"


class Template(BaseModel):
    image: str = Field(description="the tag to create sandboxes with (options.image)")
    cached: bool = Field(description="built before from the same content: nothing ran")
    duration_ms: int
    size_bytes: int

    @classmethod
    def from_model(cls, template: models.TemplateInfo) -> Template:
        return cls(
            image=template.image,
            cached=template.cached,
            duration_ms=template.duration_ms,
            size_bytes=template.size_bytes,
        )


class TemplateEvent(BaseModel):
    """One NDJSON line: a line of the build's log, the template (last), or an error."""

    log: str | None = None
    template: Template | None = None
    error: ErrorDetail | None = None


_STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "one TemplateEvent per line: the build's log, then the template",
        "content": {NDJSON: {"schema": {"$ref": "#/components/schemas/TemplateEvent"}}},
    }
}


async def _body(request: Request) -> AsyncIterator[bytes]:
    async for chunk in request.stream():
        if chunk:
            yield chunk


@router.put(
    "/templates",
    name="BuildTemplate",
    response_model=None,
    responses={**errors(413), **_STREAM},
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
async def build_template(
    request: Request,
    service: Service,
    dockerfile: Annotated[
        str, Query(description="the Dockerfile's path in the context")
    ] = "Dockerfile",
) -> StreamingResponse:
    """Build an image from the tar body (a Dockerfile and what it copies)."""
    return await _streamed(service.build_template(dockerfile, _body(request)))


@router.post(
    "/snapshots/{name}/template",
    name="TemplateFromSnapshot",
    response_model=None,
    responses={**errors(404), **_STREAM},
)
async def template_from_snapshot(name: SnapshotName, service: Service) -> StreamingResponse:
    """A template of the snapshot: its sandbox's image with its files in /workspace."""
    return await _streamed(service.template_from_snapshot(name))


async def _streamed(parts: AsyncIterator[str | models.TemplateInfo]) -> StreamingResponse:
    # The first part is awaited here, so a refused Dockerfile or a missing
    # snapshot answers with its own status rather than a 200 stream.
    first = await anext(aiter(parts))
    return StreamingResponse(_lines(first, parts), media_type=NDJSON)


async def _lines(
    first: str | models.TemplateInfo, rest: AsyncIterator[str | models.TemplateInfo]
) -> AsyncIterator[bytes]:
    yield _line(first)
    try:
        async for part in rest:
            yield _line(part)
    except SandboxdError as exc:
        mark_failed(exc)
        event = TemplateEvent(error=ErrorDetail(code=exc.status_name, message=exc.message))
        yield event.model_dump_json(exclude_none=True).encode() + b"\n"


def _line(part: str | models.TemplateInfo) -> bytes:
    event = (
        TemplateEvent(log=part)
        if isinstance(part, str)
        else TemplateEvent(template=Template.from_model(part))
    )
    return event.model_dump_json(exclude_none=True).encode() + b"\n"

"""Exec: run a process to completion, or stream its output as NDJSON lines."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from sandboxd.contract.errors import SandboxdError
from sandboxd.contract.models import ExecEvent
from sandboxd.observability.calls import mark_failed
from sandboxd.transports.http.deps import Service
from sandboxd.transports.http.routes.params import InstanceId
from sandboxd.transports.http.routes.responses import errors
from sandboxd.transports.http.schemas import (
    ErrorDetail,
    ExecRequest,
    ExecResponse,
    ExecStreamEvent,
)

router = APIRouter(prefix="/v1/sandboxes/{instance_id}", tags=["exec"])

NDJSON = "application/x-ndjson"


@router.post("/exec", name="Exec", response_model=ExecResponse, responses=errors(404))
async def exec_(instance_id: InstanceId, body: ExecRequest, service: Service) -> ExecResponse:
    """Run one process to completion (a string under ``bash -c``, a list as argv)."""
    return ExecResponse.from_model(await service.exec(instance_id, body.to_model()))


@router.post(
    "/exec/stream",
    name="ExecStream",
    response_model=None,
    responses={
        **errors(404),
        200: {
            "description": "one ExecStreamEvent per line: output chunks, then the exit",
            "content": {NDJSON: {"schema": {"$ref": "#/components/schemas/ExecStreamEvent"}}},
        },
    },
)
async def exec_stream(
    instance_id: InstanceId, body: ExecRequest, service: Service
) -> StreamingResponse:
    """Output as it is produced. A bad request fails with its HTTP status before
    the stream starts; a failure once streaming has begun is a final ``error`` line."""
    events = aiter(service.exec_stream(instance_id, body.to_model()))
    # The first event is awaited here so that validation, scope and a missing
    # sandbox still answer with their own status rather than a 200 stream.
    first = await anext(events)
    return StreamingResponse(_lines(first, events), media_type=NDJSON)


async def _lines(first: ExecEvent, rest: AsyncIterator[ExecEvent]) -> AsyncIterator[bytes]:
    yield _line(ExecStreamEvent.from_model(first))
    try:
        async for event in rest:
            yield _line(ExecStreamEvent.from_model(event))
    except SandboxdError as exc:
        mark_failed(exc)
        yield _line(ExecStreamEvent(error=ErrorDetail(code=exc.status_name, message=exc.message)))


def _line(event: ExecStreamEvent) -> bytes:
    return event.model_dump_json(exclude_none=True).encode() + b"\n"

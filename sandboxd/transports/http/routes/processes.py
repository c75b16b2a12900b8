"""Long-lived processes over HTTP.

Start one, list them, write its stdin, resize its terminal, signal it, and
follow its output as NDJSON lines (chunked): ``GET .../output?offset=N``
re-attaches from byte N (or from what the sandbox still keeps) and ends with
the exit. Input and output are separate requests, so any HTTP client can
drive a process; the output stream is bounded end to end, so a client that
stops reading holds back only its own response.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import StreamingResponse

from sandboxd.contract.errors import SandboxdError
from sandboxd.contract.models import ProcessEvent
from sandboxd.observability.calls import mark_failed
from sandboxd.transports.http.deps import Service
from sandboxd.transports.http.routes.params import InstanceId
from sandboxd.transports.http.routes.responses import errors
from sandboxd.transports.http.schemas import (
    ErrorDetail,
    ProcessInfo,
    ProcessInput,
    ProcessInputResult,
    ProcessList,
    ProcessOutputEvent,
    ProcessSignal,
    StartProcessRequest,
    TerminalSize,
    decode_base64,
)

router = APIRouter(prefix="/v1/sandboxes/{instance_id}/processes", tags=["processes"])

NDJSON = "application/x-ndjson"
Handle = Annotated[str, Path(min_length=1, max_length=64, description="e.g. proc_1")]


@router.post("", name="StartProcess", response_model=ProcessInfo, responses=errors(404))
async def start_process(
    instance_id: InstanceId, body: StartProcessRequest, service: Service
) -> ProcessInfo:
    """Start a process that lives on after this request (a string under ``bash -c``)."""
    return ProcessInfo.from_model(await service.start_process(instance_id, body.to_model()))


@router.get("", name="ListProcesses", response_model=ProcessList, responses=errors(404))
async def list_processes(instance_id: InstanceId, service: Service) -> ProcessList:
    infos = await service.list_processes(instance_id)
    return ProcessList(processes=[ProcessInfo.from_model(i) for i in infos])


@router.post(
    "/{handle}/stdin",
    name="WriteProcess",
    response_model=ProcessInputResult,
    responses=errors(404, 412),
)
async def write_process(
    instance_id: InstanceId, handle: Handle, body: ProcessInput, service: Service
) -> ProcessInputResult:
    """Write to the process's stdin; a process that has exited is 412 (FAILED_PRECONDITION)."""
    data = decode_base64(body.data_base64, "data_base64")
    written = await service.write_process(instance_id, handle, data, close=body.close)
    return ProcessInputResult(written=written)


@router.post(
    "/{handle}/resize", name="ResizeProcess", response_model=ProcessInfo, responses=errors(404, 412)
)
async def resize_process(
    instance_id: InstanceId, handle: Handle, body: TerminalSize, service: Service
) -> ProcessInfo:
    info = await service.resize_process(instance_id, handle, body.rows, body.cols)
    return ProcessInfo.from_model(info)


@router.post(
    "/{handle}/signal", name="SignalProcess", response_model=ProcessInfo, responses=errors(404, 412)
)
async def signal_process(
    instance_id: InstanceId, handle: Handle, body: ProcessSignal, service: Service
) -> ProcessInfo:
    info = await service.signal_process(instance_id, handle, body.signal)
    return ProcessInfo.from_model(info)


@router.get(
    "/{handle}/output",
    name="ConnectProcess",
    response_model=None,
    responses={
        **errors(404),
        200: {
            "description": "one ProcessOutputEvent per line: output chunks, then the exit",
            "content": {NDJSON: {"schema": {"$ref": "#/components/schemas/ProcessOutputEvent"}}},
        },
    },
)
async def process_output(
    instance_id: InstanceId,
    handle: Handle,
    service: Service,
    offset: Annotated[
        int | None, Query(ge=0, description="from this byte; unset: all the sandbox still keeps")
    ] = None,
) -> StreamingResponse:
    """Output as produced, from ``offset``, then the exit (re-attach at any time)."""
    events = aiter(service.process_output(instance_id, handle, offset))
    # Awaited here so an unknown handle answers 404 rather than a 200 stream.
    first = await anext(events)
    return StreamingResponse(_lines(first, events), media_type=NDJSON)


async def _lines(first: ProcessEvent, rest: AsyncIterator[ProcessEvent]) -> AsyncIterator[bytes]:
    yield _line(ProcessOutputEvent.from_model(first))
    try:
        async for event in rest:
            yield _line(ProcessOutputEvent.from_model(event))
    except SandboxdError as exc:
        mark_failed(exc)
        yield _line(
            ProcessOutputEvent(error=ErrorDetail(code=exc.status_name, message=exc.message))
        )


def _line(event: ProcessOutputEvent) -> bytes:
    return event.model_dump_json(exclude_none=True).encode() + b"\n"

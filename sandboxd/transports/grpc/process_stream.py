"""``ConnectProcess``: one client's attachment to a long-lived process.

Two flows share the RPC: the client's stdin going in (written in order, one
write at a time) and the process's output coming out. The output side is
bounded end to end (the executor sends against credits, see
``executor.credits``), so a client that stops reading holds back its own
attachment only; the process keeps running and its output goes to the
executor's ring and log, from where a later attach picks it up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from sandboxd.contract import convert
from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.models import ProcessEvent
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.service.sandbox_service import SandboxService

#: Output events between the attachment and the gRPC writer.
_BUFFER = 8


class ProcessConnection:
    def __init__(self, service: SandboxService) -> None:
        self._service = service
        self._out: asyncio.Queue[pb.ProcessOutput | BaseException | None] = asyncio.Queue(
            maxsize=_BUFFER
        )

    async def serve(
        self, requests: AsyncIterator[pb.ProcessInput]
    ) -> AsyncIterator[pb.ProcessOutput]:
        incoming = aiter(requests)
        first = await anext(incoming, None)
        if first is None:
            return
        if not first.instance_id or not first.handle:
            raise InvalidArgument(
                "the first ProcessInput must name instance_id and handle (from StartProcess)"
            )
        offset = first.offset if first.HasField("offset") else None
        # Checked before anything is written, so a bad handle is NOT_FOUND at once.
        output = self._service.process_output(first.instance_id, first.handle, offset)
        tasks = [
            asyncio.create_task(self._pump_output(output)),
            asyncio.create_task(self._pump_input(first, incoming)),
        ]
        try:
            while True:
                item = await self._out.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            with contextlib.suppress(Exception):
                await output.aclose()  # type: ignore[attr-defined]

    async def _pump_output(self, output: AsyncIterator[ProcessEvent]) -> None:
        try:
            async for event in output:
                await self._out.put(convert.process_event_to_pb(event))
            await self._out.put(None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._out.put(exc)

    async def _pump_input(
        self, first: pb.ProcessInput, incoming: AsyncIterator[pb.ProcessInput]
    ) -> None:
        instance_id, handle = first.instance_id, first.handle
        message: pb.ProcessInput | None = first
        try:
            while message is not None:
                if message.data or message.close_stdin:
                    await self._service.write_process(
                        instance_id, handle, message.data, close=message.close_stdin
                    )
                # None: the client is done sending; the output goes on.
                message = await anext(incoming, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._out.put(exc)

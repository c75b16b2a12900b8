"""``ToolCalls``: many CallTool calls multiplexed over one bidirectional stream.

A unary RPC pays for its own HTTP/2 stream, headers and authentication on
every call; a busy agent runtime makes thousands. Here one stream carries
them all: each request names a ``call_id``, calls run concurrently (like
separate unary calls would), and each answer — a result or the status the
call would have ended with — echoes its id as soon as it is ready.

The client cannot make the daemon hold unbounded work or answers: calls
accepted but not yet answered *and read* are capped per stream; past the cap
a call is refused at once with RESOURCE_EXHAUSTED.

Answers ready at the same moment leave in one message for a client that
reads batches, and a request may carry a batch (``sandboxd.grpc.batch``):
each call in it is taken, and counted, as if it had come alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Self

from sandboxd.errors import InvalidArgument, ResourceExhausted
from sandboxd.grpc.batch import BatchBudget
from sandboxd.grpc.status import describe
from sandboxd.observability.calls import mark_failed, observe
from sandboxd.v1 import sandbox_pb2 as pb

#: Calls a stream may have accepted and not yet had answered and read.
MAX_OUTSTANDING = 256

CallTool = Callable[[pb.CallToolRequest], Awaitable[pb.CallToolResponse]]


def _failed(call_id: int, error: BaseException) -> pb.ToolCallsResponse:
    code, message = describe(error)
    return pb.ToolCallsResponse(
        call_id=call_id, error=pb.CallError(code=code.name, message=message)
    )


class ToolCallStream:
    def __init__(self, call_tool: CallTool, *, batch_answers: bool = False) -> None:
        self._call_tool = call_tool
        self._batch_answers = batch_answers
        self._answers: asyncio.Queue[pb.ToolCallsResponse | None] = asyncio.Queue()
        self._running: dict[int, asyncio.Task[None]] = {}
        self._outstanding = 0

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # The client went away: what it can no longer hear about is stopped.
        for task in self._running.values():
            task.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def serve(
        self, requests: AsyncIterator[pb.ToolCallsRequest]
    ) -> AsyncIterator[pb.ToolCallsResponse]:
        reader = asyncio.create_task(self._read(requests), name="tool-calls-reader")
        try:
            #: An answer taken that did not fit the last batch: the next message's.
            carried: pb.ToolCallsResponse | None = None
            while True:
                answer = carried if carried is not None else await self._answers.get()
                carried = None
                if answer is None:
                    return
                if self._batch_answers and self._running:
                    # Calls still running may finish in this turn of the
                    # loop: they join. A lone call's answer leaves at once.
                    await asyncio.sleep(0)
                answers, carried = self._ready_with(answer)
                self._outstanding -= len(answers)
                yield answers[0] if len(answers) == 1 else pb.ToolCallsResponse(batch=answers)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    def _ready_with(
        self, first: pb.ToolCallsResponse
    ) -> tuple[list[pb.ToolCallsResponse], pb.ToolCallsResponse | None]:
        """``first`` and, for a client that reads batches, the answers ready
        behind it that fit one message; then the next one taken (the stream's
        end is None, and is put back)."""
        answers = [first]
        if not self._batch_answers:
            return answers, None
        budget = BatchBudget()
        budget.admits(first)
        while not self._answers.empty():
            answer = self._answers.get_nowait()
            if answer is None:
                self._answers.put_nowait(None)
                break
            if not budget.admits(answer):
                return answers, answer
            answers.append(answer)
        return answers, None

    async def _read(self, requests: AsyncIterator[pb.ToolCallsRequest]) -> None:
        try:
            async for request in requests:
                if request.batch:
                    self._accept_batch(request)
                else:
                    self._accept(request)
            # The client closed its side: answer what it already asked, then end.
            if self._running:
                await asyncio.gather(*self._running.values(), return_exceptions=True)
        finally:
            self._answers.put_nowait(None)

    def _accept_batch(self, carrier: pb.ToolCallsRequest) -> None:
        if carrier.call_id or carrier.WhichOneof("body") is not None:
            self._outstanding += 1
            self._answer(
                _failed(
                    carrier.call_id,
                    InvalidArgument("a ToolCalls request with a batch carries nothing else"),
                )
            )
        for request in carrier.batch:
            if request.batch:
                self._outstanding += 1
                self._answer(
                    _failed(request.call_id, InvalidArgument("batches nest one level only"))
                )
            else:
                self._accept(request)

    def _accept(self, request: pb.ToolCallsRequest) -> None:
        call_id = request.call_id
        body = request.WhichOneof("body")
        if body == "cancel":
            task = self._running.get(call_id)
            if task is not None:
                task.cancel()
            return
        self._outstanding += 1
        if body != "call":
            self._answer(_failed(call_id, InvalidArgument("a ToolCalls request needs a call")))
        elif call_id in self._running:
            self._answer(
                _failed(call_id, InvalidArgument(f"call_id {call_id} is already in flight"))
            )
        elif self._outstanding > MAX_OUTSTANDING:
            self._answer(
                _failed(
                    call_id,
                    ResourceExhausted(
                        f"this stream already has {MAX_OUTSTANDING} calls unanswered or unread; "
                        "read answers before sending more"
                    ),
                )
            )
        else:
            task = asyncio.create_task(self._run(call_id, request.call))
            self._running[call_id] = task

    def _answer(self, answer: pb.ToolCallsResponse) -> None:
        self._answers.put_nowait(answer)

    async def _run(self, call_id: int, call: pb.CallToolRequest) -> None:
        try:
            # Counted as CallTool: the same call, whichever RPC carried it.
            with observe(
                "grpc",
                "CallTool",
                instance_id=call.instance_id[:128],
                tool=call.name[:32],
                tool_call_id=call.tool_call_id[:256],
            ) as observed:
                try:
                    result = await self._call_tool(call)
                except asyncio.CancelledError:
                    self._outstanding -= 1  # a cancelled call gets no answer
                    raise
                except Exception as exc:
                    mark_failed(exc)
                    self._answer(_failed(call_id, exc))
                    return
                observed.tool_error = result.is_error
                self._answer(pb.ToolCallsResponse(call_id=call_id, result=result))
        finally:
            self._running.pop(call_id, None)

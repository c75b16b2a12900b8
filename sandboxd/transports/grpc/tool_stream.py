"""``ToolCalls``: many CallTool calls multiplexed over one bidirectional stream.

A unary RPC pays for its own HTTP/2 stream, headers and authentication on
every call; a busy agent runtime makes thousands. Here one stream carries
them all: each request names a ``call_id``, calls run concurrently (like
separate unary calls would), and each answer — a result or the status the
call would have ended with — echoes its id as soon as it is ready.

The client cannot make the daemon hold unbounded work or answers: calls
accepted but not yet answered *and read* are capped per stream and per
caller (the scope its credentials give). At a cap the daemon stops pulling
requests from the stream (flow control: what the client sends then waits in
HTTP/2's window and the client's own buffers) until answers are read; it
does not refuse, and so queue, an answer per request. A client that floods
a stream with tiny requests and never reads an answer took the daemon from
85 MiB to 3.7 GiB before (issue 23 item 1). Only the calls of one batch past
the cap are refused, with RESOURCE_EXHAUSTED: at most a batch's worth.

Answers ready at the same moment leave in one message for a client that
reads batches, and a request may carry a batch (``sandboxd.contract.batch``):
each call in it is taken, and counted, as if it had come alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING

from sandboxd.contract.batch import BatchBudget
from sandboxd.contract.errors import InvalidArgument, ResourceExhausted
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.observability.calls import mark_failed, observe
from sandboxd.transports.grpc.budgets import Callers, Outstanding
from sandboxd.transports.grpc.status import describe

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from 3.11; sandboxctl runs on 3.10

#: Calls a stream may have accepted and not yet had answered and read.
MAX_OUTSTANDING = 256
#: The same over every ToolCalls stream of one caller.
MAX_OUTSTANDING_PER_CALLER = 1024

CallTool = Callable[[pb.CallToolRequest], Awaitable[pb.CallToolResponse]]


def _failed(call_id: int, error: BaseException) -> pb.ToolCallsResponse:
    code, message = describe(error)
    return pb.ToolCallsResponse(
        call_id=call_id, error=pb.CallError(code=code.name, message=message)
    )


def tool_callers() -> Callers:
    # The cap read at each use (a test may lower it).
    return Callers(lambda: MAX_OUTSTANDING_PER_CALLER)


class ToolCallStream:
    def __init__(
        self,
        call_tool: CallTool,
        *,
        batch_answers: bool = False,
        caller: Outstanding | None = None,
    ) -> None:
        self._call_tool = call_tool
        self._batch_answers = batch_answers
        # Bounded by the caps: the reader stops while they are reached.
        self._answers: asyncio.Queue[pb.ToolCallsResponse | None] = asyncio.Queue()
        self._running: dict[int, asyncio.Task[None]] = {}
        self._mine = Outstanding(lambda: MAX_OUTSTANDING)
        self._caller = caller if caller is not None else Outstanding(lambda: 1 << 62)

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
        self._caller.done(self._mine.count)  # this stream's share, never to be read

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
                self._settled(len(answers))
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
            incoming = aiter(requests)
            while True:
                # Flow control: no next request while this stream, or its
                # caller, has as many calls unanswered or unread as allowed.
                await self._room()
                try:
                    request = await anext(incoming)
                except StopAsyncIteration:
                    break
                # Other streams of the caller may have filled it meanwhile:
                # this one request is held until there is room again.
                await self._room()
                if request.batch:
                    self._accept_batch(request)
                else:
                    self._accept(request)
            # The client closed its side: answer what it already asked, then end.
            if self._running:
                await asyncio.gather(*self._running.values(), return_exceptions=True)
        finally:
            self._answers.put_nowait(None)

    async def _room(self) -> None:
        await self._mine.room()  # only answers change it meanwhile
        await self._caller.room()  # and nothing between this and the accept

    def _counted(self) -> None:
        self._mine.add(1)
        self._caller.add(1)

    def _settled(self, n: int) -> None:
        self._mine.done(n)
        self._caller.done(n)

    def _accept_batch(self, carrier: pb.ToolCallsRequest) -> None:
        if carrier.call_id or carrier.WhichOneof("body") is not None:
            self._counted()
            self._answer(
                _failed(
                    carrier.call_id,
                    InvalidArgument("a ToolCalls request with a batch carries nothing else"),
                )
            )
        for request in carrier.batch:
            if request.batch:
                self._counted()
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
        self._counted()
        if body != "call":
            self._answer(_failed(call_id, InvalidArgument("a ToolCalls request needs a call")))
        elif call_id in self._running:
            self._answer(
                _failed(call_id, InvalidArgument(f"call_id {call_id} is already in flight"))
            )
        elif self._mine.over or self._caller.over:
            # Only past a cap inside one batch: the reader waits at the cap.
            self._answer(
                _failed(
                    call_id,
                    ResourceExhausted(
                        f"this stream already has {MAX_OUTSTANDING} calls (its caller "
                        f"{MAX_OUTSTANDING_PER_CALLER}) unanswered or unread; read answers "
                        "before sending more"
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
                    self._settled(1)  # a cancelled call gets no answer
                    raise
                except Exception as exc:
                    mark_failed(exc)
                    self._answer(_failed(call_id, exc))
                    return
                observed.tool_error = result.is_error
                self._answer(pb.ToolCallsResponse(call_id=call_id, result=result))
        finally:
            self._running.pop(call_id, None)

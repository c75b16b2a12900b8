"""The client end of ``ToolCalls``: tool calls multiplexed over one stream.

One long-lived bidirectional stream per transport carries every
``call_tool``; answers are matched to callers by ``call_id``. A stream that
breaks fails the calls waiting on it (like a dropped unary call would) and
the next call opens a new one. A daemon without ``ToolCalls`` answers
UNIMPLEMENTED before running anything, so the caller can safely fall back
to unary ``CallTool``.

Calls made while a request is being written leave together in the next one
(``batch``) once the daemon's headers say it reads batches; the stream is
opened saying this client reads batched answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from typing import Any

import grpc

from runtime_client._status import CallEnd, error_from_status
from sandboxd.contract.batch import BATCH_METADATA, BatchBudget, says_batches
from sandboxd.contract.errors import SandboxdError, SandboxUnavailable
from sandboxd.contract.v1 import sandbox_pb2 as pb


class StreamUnsupported(Exception):
    """The daemon has no ToolCalls RPC; nothing was run."""


class ToolCallStream:
    def __init__(self, open_stream: Callable[[tuple[tuple[str, str], ...]], Any]) -> None:
        #: Opens the RPC with the given metadata.
        self._open_stream = open_stream
        self._stream: Any = None
        #: How the current stream ended, as the daemon said.
        self._end: CallEnd | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[pb.CallToolResponse]] = {}
        self._write_lock: asyncio.Lock | None = None
        #: Requests waiting for the writer; it takes all it may at once.
        self._outbox: list[pb.ToolCallsRequest] = []
        #: The current stream's daemon said it reads batches.
        self._batching = False

    async def call(self, request: pb.CallToolRequest) -> pb.CallToolResponse:
        call_id = next(self._ids)
        future: asyncio.Future[pb.CallToolResponse] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        try:
            await self._send(pb.ToolCallsRequest(call_id=call_id, call=request))
            return await future
        except asyncio.CancelledError:
            # Cancelling the caller cancels the future too: no answer came.
            if future.cancelled() or not future.done():
                # The daemon stops the call (and its command); best effort.
                with contextlib.suppress(Exception):
                    await asyncio.shield(
                        self._send(pb.ToolCallsRequest(call_id=call_id, cancel=True), retry=False)
                    )
            raise
        finally:
            self._pending.pop(call_id, None)

    async def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.cancel()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
            self._reader = None

    # ------------------------------------------------------------ internals

    async def _send(self, message: pb.ToolCallsRequest, *, retry: bool = True) -> None:
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        self._outbox.append(message)
        async with self._write_lock:
            if all(waiting is not message for waiting in self._outbox):
                return  # the writer before this one took it along
            if self._batching and len(self._pending) > 1:
                # Other callers, answered in this turn of the loop, may call
                # again in it: they join. A lone caller's call leaves at once.
                await asyncio.sleep(0)
            message = self._next_message(message)
            for attempt in (1, 2):
                stream, end = self._ensure_open()
                try:
                    await stream.write(message)
                    return
                except (
                    grpc.RpcError,
                    grpc.aio.UsageError,
                    asyncio.InvalidStateError,  # grpc's "RPC already finished"
                    RuntimeError,
                ) as exc:
                    # Not sent: the stream had already ended. Once more on a new one.
                    self._drop(stream)
                    if not retry or attempt == 2:
                        if isinstance(exc, grpc.RpcError):
                            raise await self._classify(end, exc) from None
                        raise SandboxUnavailable(f"the ToolCalls stream failed: {exc}") from None

    def _next_message(self, mine: pb.ToolCallsRequest) -> pb.ToolCallsRequest:
        """``mine`` and, where the daemon reads batches, what waits behind it."""
        if not self._batching or len(self._outbox) == 1:
            self._outbox = [waiting for waiting in self._outbox if waiting is not mine]
            return mine
        budget = BatchBudget()
        taken: list[pb.ToolCallsRequest] = []
        for request in self._outbox:
            if not budget.admits(request):
                break
            taken.append(request)
        if all(request is not mine for request in taken):  # a big one ahead: alone
            taken = [mine]
        gone = {id(request) for request in taken}
        self._outbox = [waiting for waiting in self._outbox if id(waiting) not in gone]
        return taken[0] if len(taken) == 1 else pb.ToolCallsRequest(batch=taken)

    def _ensure_open(self) -> tuple[Any, CallEnd]:
        if self._stream is None or self._end is None:
            self._batching = False
            self._stream = self._open_stream((BATCH_METADATA,))
            self._end = CallEnd(self._stream)
            self._reader = asyncio.create_task(
                self._read(self._stream, self._end), name="tool-calls"
            )
        return self._stream, self._end

    def _drop(self, stream: Any) -> None:
        if self._stream is stream:
            self._stream = None
        stream.cancel()

    def _settle(self, answer: pb.ToolCallsResponse) -> None:
        future = self._pending.get(answer.call_id)
        if future is None or future.done():
            return  # a call its caller gave up
        if answer.WhichOneof("outcome") == "result":
            future.set_result(answer.result)
        else:
            future.set_exception(error_from_status(answer.error.code, answer.error.message))

    @staticmethod
    async def _classify(end: CallEnd, error: grpc.RpcError) -> Exception:
        code, message = await end.status(error)
        if code == "UNIMPLEMENTED":
            return StreamUnsupported()
        return error_from_status(code, message)

    async def _read(self, stream: Any, end: CallEnd) -> None:
        failure: Exception = SandboxUnavailable("the ToolCalls stream ended")
        try:
            try:
                headers = await stream.initial_metadata()
            except grpc.RpcError:
                # Headers that cannot be read mean no batches; the call's own
                # status comes from the loop below.
                headers = None
            if self._stream is stream and says_batches(headers):
                self._batching = True
            async for answer in stream:
                for one in answer.batch or (answer,):
                    self._settle(one)
        except grpc.RpcError as exc:
            failure = await self._classify(end, exc)
        except asyncio.CancelledError:
            failure = SandboxUnavailable("the ToolCalls stream was closed")
            raise
        except Exception as exc:  # a broken stream must fail its calls, not hang them
            failure = SandboxUnavailable(f"the ToolCalls stream failed: {exc!r}")
        finally:
            if self._stream is stream:
                self._stream = None
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(
                        failure
                        if not isinstance(failure, SandboxdError)
                        else type(failure)(failure.message)
                    )

"""What one ToolCalls message may carry (sandboxd.contract.batch) and how the
client fills it (runtime_client.tool_stream); the wire is in tests/grpc."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from runtime_client import Unauthenticated
from runtime_client.tool_stream import ToolCallStream
from sandboxd.contract import batch
from sandboxd.contract.batch import BatchBudget, says_batches
from sandboxd.contract.v1 import sandbox_pb2 as pb

pytestmark = [pytest.mark.unit]


def _request(call_id: int, content_bytes: int = 10) -> pb.ToolCallsRequest:
    call = pb.CallToolRequest(instance_id="i", name="write", arguments_json="x" * content_bytes)
    return pb.ToolCallsRequest(call_id=call_id, call=call)


def test_a_budget_stops_at_the_message_count() -> None:
    budget = BatchBudget()
    admitted = [budget.admits(_request(n)) for n in range(batch.MAX_BATCH_MESSAGES + 3)]
    assert admitted == [True] * batch.MAX_BATCH_MESSAGES + [False] * 3


def test_a_budget_stops_at_the_byte_count_but_always_takes_a_first() -> None:
    budget = BatchBudget()
    big = _request(1, batch.MAX_BATCH_BYTES + 1)
    assert budget.admits(big)  # alone, whatever its size
    assert not budget.admits(_request(2))
    half = batch.MAX_BATCH_BYTES // 2
    budget = BatchBudget()
    assert budget.admits(_request(3, half - 100)) and budget.admits(_request(4, half - 100))
    assert not budget.admits(_request(5, 200))


def test_only_the_exact_metadata_says_batches() -> None:
    assert says_batches([("x", "y"), ("sandboxd-batch", "1")])
    assert not says_batches([("sandboxd-batch", "0")])
    assert not says_batches(None)
    assert not says_batches([])


def _stream(batching: bool, *waiting: pb.ToolCallsRequest) -> ToolCallStream:
    stream = ToolCallStream(lambda metadata: None)
    stream._batching = batching
    stream._outbox = list(waiting)
    return stream


def test_the_writer_takes_what_waits_in_order_within_the_budget() -> None:
    waiting = [_request(n) for n in range(1, 5)]
    stream = _stream(True, *waiting)
    message = stream._next_message(waiting[2])
    assert [r.call_id for r in message.batch] == [1, 2, 3, 4]
    assert not message.call_id and message.WhichOneof("body") is None
    assert stream._outbox == []


def test_without_the_daemons_word_every_request_goes_alone() -> None:
    waiting = [_request(n) for n in range(1, 4)]
    stream = _stream(False, *waiting)
    assert stream._next_message(waiting[1]) is waiting[1]
    assert [r.call_id for r in stream._outbox] == [1, 3]


def test_a_request_past_the_budget_goes_alone_and_the_rest_wait() -> None:
    big = _request(1, batch.MAX_BATCH_BYTES)
    small = [_request(n) for n in (2, 3)]
    stream = _stream(True, big, *small)
    # The big one fills a message by itself; the next writer takes the rest.
    assert stream._next_message(small[0]) is small[0]
    assert [r.call_id for r in stream._outbox] == [1, 3]
    assert stream._next_message(big) is big
    assert [r.call_id for r in stream._outbox] == [3]


class _EndedStream:
    """A ToolCalls call the daemon already ended (a refused token): core
    answers INTERNAL when asked for headers after the end."""

    def __init__(self) -> None:
        self.cancelled = False

    async def write(self, message: pb.ToolCallsRequest) -> None:
        return None

    async def initial_metadata(self) -> None:
        raise grpc.aio.AioRpcError(
            grpc.StatusCode.INTERNAL,
            grpc.aio.Metadata(),
            grpc.aio.Metadata(),
            "Internal error from Core",
        )

    def __aiter__(self) -> _EndedStream:
        return self

    async def __anext__(self) -> pb.ToolCallsResponse:
        raise grpc.aio.AioRpcError(
            grpc.StatusCode.UNAUTHENTICATED,
            grpc.aio.Metadata(),
            grpc.aio.Metadata(),
            "the bearer token is not valid",
        )

    def cancel(self) -> None:
        self.cancelled = True

    def add_done_callback(self, callback: object) -> None:
        return None


@pytest.mark.anyio
async def test_headers_asked_after_the_end_do_not_hide_the_calls_status() -> None:
    stream = ToolCallStream(lambda metadata: _EndedStream())
    with pytest.raises(Unauthenticated, match="the bearer token is not valid"):
        await stream.call(pb.CallToolRequest(instance_id="i", name="read"))
    await stream.close()


def test_the_docs_state_the_batch_limits_the_code_has() -> None:
    # The limits live in sandboxd.contract.batch; docs/design.md repeats them for users.
    readme = (Path(__file__).resolve().parents[2] / "docs" / "design.md").read_text()
    stated = (
        f"A batch holds at most {batch.MAX_BATCH_MESSAGES} messages and "
        f"{batch.MAX_BATCH_BYTES // 1024} KiB"
    )
    assert stated in " ".join(readme.split())

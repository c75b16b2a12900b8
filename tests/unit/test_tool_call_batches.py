"""What one ToolCalls message may carry (sandboxd.grpc.batch) and how the
client fills it (runtime_client.tool_stream); the wire is in tests/grpc."""

from __future__ import annotations

from runtime_client.tool_stream import ToolCallStream
from sandboxd.grpc import batch
from sandboxd.grpc.batch import BatchBudget, says_batches
from sandboxd.v1 import sandbox_pb2 as pb


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

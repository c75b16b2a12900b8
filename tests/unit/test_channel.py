"""The daemon's end of the executor channel, against a scripted peer."""

from __future__ import annotations

import asyncio
import json

import pytest

from sandboxd.backends.shared.channel import MAX_BAD_FRAMES, STREAM_BUFFER, ExecutorChannel
from sandboxd.contract.errors import NotFound, SandboxUnavailable, Timeout
from sandboxd.executor import wire
from sandboxd.executor.credits import PIPE_WINDOW
from sandboxd.executor.pipes import CHUNK

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


class Peer:
    """Plays the executor: records requests, sends whatever bytes a test scripts."""

    def __init__(self) -> None:
        self.incoming: asyncio.Queue[bytes] = asyncio.Queue()
        self.sent: list[dict[str, object]] = []
        #: Raw payloads of the requests, by request id.
        self.raw: dict[object, tuple[str, bytes]] = {}
        self._deframer = wire.Deframer(max_line=1 << 30, max_raw=wire.REQUEST_RAW_MAX)

    async def read(self) -> bytes:
        return await self.incoming.get()

    def write(self, data: bytes) -> None:
        for frame in self._deframer.feed(data):
            assert isinstance(frame, wire.Frame), frame
            message = json.loads(frame.line)
            self.sent.append(message)
            if frame.payload is not None:
                self.raw[message["id"]] = (frame.raw_key, frame.payload)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None

    def reply(self, data: bytes) -> None:
        self.incoming.put_nowait(data)


async def _wait_for_request(peer: Peer, count: int = 1) -> None:
    for _ in range(200):
        if len(peer.sent) >= count:
            return
        await asyncio.sleep(0.001)
    raise AssertionError("no request reached the peer")


async def test_reply_split_across_chunks_resolves_the_call() -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    call = asyncio.create_task(channel.call("stat", {"path": "a"}))
    await _wait_for_request(peer)
    line = wire.encode({"id": peer.sent[0]["id"], "ok": {"data_base64": wire.b64(b"\x00\xff")}})
    peer.reply(line[:5])
    peer.reply(line[5:])
    assert await call == {"data": b"\x00\xff"}
    await channel.close()


async def test_error_reply_raises_the_domain_error() -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    call = asyncio.create_task(channel.call("stat", {"path": "a"}))
    await _wait_for_request(peer)
    peer.reply(
        wire.encode({"id": peer.sent[0]["id"], "err": {"kind": "not_found", "message": "gone"}})
    )
    with pytest.raises(NotFound, match="gone"):
        await call
    await channel.close()


@pytest.mark.parametrize(
    "garbage",
    [
        b"not json\n",
        b"[1,2]\n",
        b'{"id": "x", "ok": {}}\n',
        b'{"id": 1}\n',
        b'{"id": 1, "ok": 5}\n',
        b'{"id": 1, "err": {"kind": 3}}\n',
        b'{"id": 1, "ok": {"data_base64": "!!"}}\n',
        b"\xff\xfe\n",
    ],
)
async def test_garbage_frames_are_dropped_and_the_channel_keeps_working(garbage: bytes) -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    call = asyncio.create_task(channel.call("stat", {"path": "a"}))
    await _wait_for_request(peer)
    peer.reply(garbage)
    peer.reply(wire.encode({"id": peer.sent[0]["id"], "ok": {"fine": True}}))
    assert await call == {"fine": True}
    assert not channel.closed
    await channel.close()


async def test_oversize_line_is_discarded_up_to_its_newline() -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=100)
    call = asyncio.create_task(channel.call("stat", {"path": "a"}))
    await _wait_for_request(peer)
    request_id = peer.sent[0]["id"]
    # A forged, oversize frame carrying the right id must not resolve the call.
    peer.reply(b'{"id": %d, "ok": {"x": "' % request_id + b"A" * 500)
    peer.reply(b'"}}\n')
    peer.reply(wire.encode({"id": request_id, "ok": {"real": 1}}))
    assert await call == {"real": 1}
    await channel.close()


async def test_end_of_stream_fails_pending_calls_and_later_calls() -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    call = asyncio.create_task(channel.call("stat", {"path": "a"}))
    await _wait_for_request(peer)
    peer.reply(b"")
    with pytest.raises(SandboxUnavailable, match="channel closed"):
        await call
    assert channel.closed
    with pytest.raises(SandboxUnavailable):
        await channel.call("stat", {"path": "a"})


async def test_timeout_sends_a_cancel_for_the_request() -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    with pytest.raises(Timeout):
        await channel.call("exec", {"shell": "sleep 9"}, timeout=0.05)
    assert peer.sent[-1] == {"op": "cancel", "target": peer.sent[0]["id"]}
    await channel.close()


async def test_stream_yields_events_then_the_result() -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)

    async def consume() -> list[dict[str, object]]:
        return [event async for event in channel.stream("exec", {"shell": "x"})]

    task = asyncio.create_task(consume())
    await _wait_for_request(peer)
    request_id = peer.sent[0]["id"]
    assert peer.sent[0]["stream"] is True
    peer.reply(wire.encode({"id": request_id, "ev": {"stdout_base64": wire.b64(b"hi")}}))
    peer.reply(wire.encode({"id": request_id, "ok": {"exit_code": 0}}))
    assert await task == [{"stdout": b"hi"}, {"result": {"exit_code": 0}}]
    await channel.close()


async def test_a_stalled_stream_consumer_does_not_hold_other_calls() -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    events = channel.stream("exec", {"shell": "yes"})
    first = asyncio.create_task(events.__anext__())
    await _wait_for_request(peer)
    request_id = peer.sent[0]["id"]
    assert peer.sent[0]["credits"] == STREAM_BUFFER
    # The executor fills the stream's whole window; nobody reads past the first.
    for _ in range(STREAM_BUFFER):
        peer.reply(wire.encode({"id": request_id, "ev": {"stdout_base64": wire.b64(b"y")}}))
    await first
    other = asyncio.create_task(channel.call("stat", {"path": "a"}))
    await _wait_for_request(peer, 2)
    peer.reply(wire.encode({"id": peer.sent[1]["id"], "ok": {"size": 1}}))
    assert await asyncio.wait_for(other, 5) == {"size": 1}
    await events.aclose()
    assert peer.sent[-1] == {"op": "cancel", "target": request_id}
    await channel.close()


async def test_events_beyond_the_credits_are_dropped_not_buffered() -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    events = channel.stream("exec", {"shell": "yes"})
    first = asyncio.create_task(events.__anext__())
    await _wait_for_request(peer)
    request_id = peer.sent[0]["id"]
    for n in range(STREAM_BUFFER + 10):
        peer.reply(wire.encode({"id": request_id, "ev": {"n": n}}))
    assert await first == {"n": 0}
    await asyncio.sleep(0.05)
    assert peer.incoming.qsize() == 0  # the reader went on
    got = [await events.__anext__() for _ in range(STREAM_BUFFER)]
    # The window was 64 events: the first 64 arrived, the 10 over it were dropped.
    assert [e["n"] for e in got[: STREAM_BUFFER - 1]] == list(range(1, STREAM_BUFFER))
    await events.aclose()
    await channel.close()


async def test_draining_a_stream_grants_credits_back() -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    events = channel.stream("exec", {"shell": "yes"})
    first = asyncio.create_task(events.__anext__())
    await _wait_for_request(peer)
    request_id = peer.sent[0]["id"]
    for n in range(STREAM_BUFFER):
        peer.reply(wire.encode({"id": request_id, "ev": {"n": n}}))
    await first
    for _ in range(STREAM_BUFFER // 2):
        await events.__anext__()
    grants = [m for m in peer.sent if m.get("op") == "credit"]
    assert grants == [{"op": "credit", "target": request_id, "n": STREAM_BUFFER // 2}]
    await events.aclose()
    await channel.close()


async def test_too_many_bad_frames_drop_the_channel() -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    call = asyncio.create_task(channel.call("stat", {"path": "a"}))
    await _wait_for_request(peer)
    peer.reply(b"garbage\n" * (MAX_BAD_FRAMES + 1))
    with pytest.raises(SandboxUnavailable, match="malformed frames"):
        await call
    assert channel.closed


# ------------------------------------------------------------ raw frames


async def test_bulk_bytes_go_raw_and_a_raw_reply_resolves_the_call() -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    payload = bytes(range(256)) * 4096  # newlines, NULs, everything
    call = asyncio.create_task(channel.call("upload_chunk", {"session": "s", "data": payload}))
    await _wait_for_request(peer)
    request = peer.sent[0]
    assert "data" not in request["args"] and "data_base64" not in request["args"]
    assert peer.raw[request["id"]] == ("data", payload)
    # The reply arrives raw, cut at awkward places.
    parts = b"".join(wire.frame({"id": request["id"]}, "ok", {"data": payload, "eof": False}))
    for start in range(0, len(parts), 65_521):
        peer.reply(parts[start : start + 65_521])
    assert await call == {"data": payload, "eof": False}
    assert not channel.closed
    await channel.close()


async def test_bytes_over_the_request_raw_limit_still_travel_base64() -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=64 << 20)
    big = b"x" * (wire.REQUEST_RAW_MAX + 1)
    call = asyncio.create_task(channel.call("write_file", {"path": "a", "content": big}))
    await _wait_for_request(peer)
    assert peer.sent[0]["args"]["content_base64"] == wire.b64(big)
    assert peer.sent[0]["id"] not in peer.raw
    call.cancel()
    await channel.close()


@pytest.mark.parametrize(
    "header",
    [
        b'{"raw":["data",2000000],"id":%d,"ok":{}}\n',  # over the channel's bound
        b'{"raw":["data",-1],"id":%d,"ok":{}}\n',
        b'{"raw":["data","5"],"id":%d,"ok":{}}\n',
        b'{"raw":["Data!",5],"id":%d,"ok":{}}\n',
        b'{"raw":["data",99999999999999999],"id":%d,"ok":{}}\n',
        b'{"raw":5,"id":%d,"ok":{}}\n',
    ],
)
async def test_a_bad_raw_length_drops_the_channel_not_the_daemon(header: bytes) -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    call = asyncio.create_task(channel.call("stat", {"path": "a"}))
    await _wait_for_request(peer)
    peer.reply(header % peer.sent[0]["id"])
    peer.reply(b"x" * 100)
    with pytest.raises(SandboxUnavailable, match=r"raw frame|will be re-established"):
        await asyncio.wait_for(call, 5)
    assert channel.closed
    await channel.close()


async def test_a_raw_frame_that_lies_about_its_length_drops_the_channel() -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    call = asyncio.create_task(channel.call("download_read", {"session": "s"}))
    await _wait_for_request(peer)
    request_id = peer.sent[0]["id"]
    # Says 10 bytes, sends 12 and a forged reply: the end marker is not where
    # the length says, so nothing after it is believed.
    peer.reply(b'{"raw":["data",10],"id":%d,"ok":{}}\n' % request_id + b"0123456789ab\x00\n")
    peer.reply(wire.encode({"id": request_id, "ok": {"forged": True}}))
    with pytest.raises(SandboxUnavailable, match="does not end where its length says"):
        await asyncio.wait_for(call, 5)
    await channel.close()


@pytest.mark.parametrize("key", ["data_base64", "eof"])
async def test_a_raw_field_may_not_overwrite_another(key: str) -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    call = asyncio.create_task(channel.call("download_read", {"session": "s"}))
    await _wait_for_request(peer)
    request_id = peer.sent[0]["id"]
    body = b'{"eof":false}' if key == "eof" else b"{}"
    peer.reply(b'{"raw":["%s",2],"id":%d,"ok":%s}\nhi\x00\n' % (key.encode(), request_id, body))
    peer.reply(wire.encode({"id": request_id, "ok": {"real": 1}}))
    assert await asyncio.wait_for(call, 5) == {"real": 1}  # the clash was dropped
    await channel.close()


async def test_a_reattached_channel_skips_the_tail_of_a_torn_raw_frame() -> None:
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20, resync=True)
    call = asyncio.create_task(channel.call("hello", {}))
    await _wait_for_request(peer)
    # What a new attach sees first: the rest of a download chunk (binary with
    # many newlines) and its end, then the hello's answer.
    peer.reply(bytes(range(256)) * 1000 + wire.RAW_END)
    peer.reply(wire.encode({"id": peer.sent[0]["id"], "ok": {"protocol": 2}}))
    assert await asyncio.wait_for(call, 5) == {"protocol": 2}
    assert not channel.closed
    await channel.close()


async def test_the_nonce_of_a_start_is_taken_once_and_only_in_its_shape() -> None:
    """executor.bundle's nonce, echoed into the container's stdin in the
    bundle's header: nothing but 32 hex digits, and the first one only."""
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    peer.reply(wire.encode({"nonce": "0123\nsandboxd-bundle"}))
    assert await channel.nonce(0.1) is None
    peer.reply(wire.encode({"nonce": "ab" * 16}) + wire.encode({"nonce": "cd" * 16}))
    assert await channel.nonce(1) == "ab" * 16
    assert await channel.nonce(0.1) == "ab" * 16
    assert not channel.closed
    await channel.close()


async def test_a_pipe_stream_has_its_own_smaller_window() -> None:
    # A pipe's events are up to executor.pipes.CHUNK each: its window is
    # PIPE_WINDOW events (4 MiB held at most), granted back by halves.
    peer = Peer()
    channel = ExecutorChannel(peer, peer, name="t", max_line=1 << 20)
    events = channel.stream("pipe_connect", {"pipe": "p", "host": "127.0.0.1", "port": 1})
    first = asyncio.create_task(events.__anext__())
    await _wait_for_request(peer)
    request_id = peer.sent[0]["id"]
    assert peer.sent[0]["credits"] == PIPE_WINDOW < STREAM_BUFFER
    assert PIPE_WINDOW * CHUNK <= 4 << 20
    for n in range(PIPE_WINDOW + 5):
        peer.reply(wire.encode({"id": request_id, "ev": {"n": n}}))
    await first
    got = [await events.__anext__() for _ in range(PIPE_WINDOW - 1)]
    # The five over the window were dropped, not buffered.
    assert [e["n"] for e in got] == list(range(1, PIPE_WINDOW))
    grants = [m for m in peer.sent if m.get("op") == "credit"]
    assert grants == [{"op": "credit", "target": request_id, "n": PIPE_WINDOW // 2}]
    await events.aclose()
    await channel.close()

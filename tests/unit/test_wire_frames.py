"""Raw frames on the executor channel: the framing itself (wire.frame, wire.Deframer)."""

from __future__ import annotations

import json

import pytest

from sandboxd.executor import wire

pytestmark = [pytest.mark.unit]

PAYLOAD = b"a\nb\x00\n\xff{" * 7


def _kinds(items: list[wire.Frame | wire.Bad]) -> list[str]:
    return [type(item).__name__ for item in items]


def test_a_raw_frame_survives_every_split_point() -> None:
    stream = b"".join(wire.frame({"id": 1}, "ok", {"data": PAYLOAD, "n": 3}))
    stream += wire.encode({"id": 2, "ok": {}})
    for cut in range(len(stream) + 1):
        deframer = wire.Deframer(max_line=1000, max_raw=1000)
        out = deframer.feed(stream[:cut]) + deframer.feed(stream[cut:])
        assert _kinds(out) == ["Frame", "Frame"], cut
        first = out[0]
        assert isinstance(first, wire.Frame)
        assert (first.raw_key, first.payload) == ("data", PAYLOAD)
        assert json.loads(first.line) == {"raw": ["data", len(PAYLOAD)], "id": 1, "ok": {"n": 3}}


def test_byte_by_byte() -> None:
    stream = b"".join(wire.frame({"id": 1}, "args", {"data": PAYLOAD}))
    deframer = wire.Deframer(max_line=1000, max_raw=1000)
    out = [item for byte in stream for item in deframer.feed(bytes([byte]))]
    assert _kinds(out) == ["Frame"]


def test_only_the_first_bytes_field_goes_raw_and_raw_max_is_kept() -> None:
    parts = wire.frame({"id": 1}, "ok", {"a": b"1", "b": b"2"})
    assert json.loads(parts[0])["ok"] == {"b_base64": wire.b64(b"2")}
    assert parts[1:] == [b"1", wire.RAW_END]
    small = wire.frame({"id": 1}, "ok", {"a": b"123"}, raw_max=2)
    assert small == [wire.encode({"id": 1, "ok": {"a_base64": wire.b64(b"123")}})]
    assert wire.frame({"id": 1}, "ok", {"t": "x"}) == [wire.encode({"id": 1, "ok": {"t": "x"}})]


def test_a_torn_request_is_dropped_and_resync_padding_puts_the_stream_in_step() -> None:
    """A daemon died mid-payload; the next one sends the padding, then a hello."""
    torn = b"".join(wire.frame({"id": 1, "op": "upload_chunk"}, "args", {"data": b"z" * 3000}))
    deframer = wire.Deframer(max_line=1 << 20, max_raw=wire.REQUEST_RAW_MAX)
    out = deframer.feed(torn[:1500])
    out += deframer.feed(wire.resync_padding())
    out += deframer.feed(wire.encode({"id": 1, "op": "hello", "args": {}}))
    assert _kinds(out) == ["Bad", "Frame"]
    assert isinstance(out[0], wire.Bad) and out[0].lost_step
    assert json.loads(out[1].line)["op"] == "hello"  # type: ignore[union-attr]


def test_padding_between_whole_frames_costs_nothing() -> None:
    deframer = wire.Deframer(max_line=100, max_raw=100)
    out = deframer.feed(wire.resync_padding() + wire.encode({"id": 1, "ok": {}}))
    assert _kinds(out) == ["Frame"]


@pytest.mark.parametrize(
    "header",
    [
        b'{"raw":["data",101],"id":1}\n',
        b'{"raw":["data",-1],"id":1}\n',
        b'{"raw":["Data",1],"id":1}\n',
        b'{"raw":["data",01],"id":1}\n',
        b'{"raw":{"data":1},"id":1}\n',
    ],
)
def test_bad_raw_headers_lose_step_and_the_reader_goes_back_to_lines(header: bytes) -> None:
    deframer = wire.Deframer(max_line=1000, max_raw=100)
    out = deframer.feed(header + wire.encode({"id": 2, "ok": {}}))
    assert _kinds(out) == ["Bad", "Frame"]
    assert isinstance(out[0], wire.Bad) and out[0].lost_step


def test_a_wrong_end_marker_is_reported_and_what_follows_is_read_as_lines() -> None:
    deframer = wire.Deframer(max_line=1000, max_raw=100)
    out = deframer.feed(b'{"raw":["data",3],"id":1}\nabcde\n' + wire.encode({"id": 2, "ok": {}}))
    assert _kinds(out) == ["Bad", "Frame", "Frame"]
    assert isinstance(out[0], wire.Bad) and out[0].lost_step
    # The bytes where the end belonged start a line of their own (garbage the
    # caller's JSON check drops); the next real frame is whole.
    assert [f.line for f in out[1:]] == [b"de", b'{"id":2,"ok":{}}']  # type: ignore[union-attr]


def test_memory_stays_bounded_for_an_endless_line() -> None:
    deframer = wire.Deframer(max_line=1000, max_raw=100)
    bad = []
    for _ in range(100):
        bad += deframer.feed(b"x" * 10_000)
    assert _kinds(bad) == ["Bad"]
    assert len(deframer._line) == 0  # the bound is the point
    assert _kinds(deframer.feed(b"\n" + wire.encode({"id": 1, "ok": {}}))) == ["Frame"]


def test_attach_raw_refuses_clashes() -> None:
    assert wire.attach_raw({"n": 1}, "data", b"x") == {"n": 1, "data": b"x"}
    with pytest.raises(ValueError):
        wire.attach_raw({"data": b"y"}, "data", b"x")
    with pytest.raises(ValueError):
        wire.attach_raw({}, "data_base64", b"x")

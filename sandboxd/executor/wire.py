"""The executor channel's framing: one JSON object per line, both ways.

Newline framing resynchronises by itself: if a peer dies mid-frame, the torn
line fails to parse and is dropped, and the next line is whole again. That is
what lets a restarted sandboxd re-attach to a running executor.

Requests:   {"id": 7, "op": "read_file", "args": {...}}
Replies:    {"id": 7, "ok": {...}}  |  {"id": 7, "err": {"kind": ..., "message": ...}}
Stream:     {"id": 7, "ev": {...}}  (zero or more before the reply)
Bytes travel base64-encoded under keys ending in ``_base64`` (``BASE64_SUFFIX``,
the same naming as the HTTP API's JSON), except one field per frame that may
travel raw (``frame``): bulk data costs no JSON escaping and no base64.

Raw frame:  {"raw":["data",1048576],"id":7,"ok":{...}}\n <1048576 bytes> \x00\n
The header is an ordinary JSON line whose first key names the field and its
length (so ``Deframer`` finds both without parsing the line); the payload
follows, then ``RAW_END``. A frame torn by a peer that died mid-payload is
completed by whatever comes next; the reconnecting daemon sends
``resync_padding`` (newlines) first, so the torn frame ends with a newline
where ``RAW_END`` belongs, is dropped, and the newlines after it are empty
lines: the stream is in step again.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

from sandboxd.contract.errors import InvalidArgument

#: 2: raw frames (``frame``, ``Deframer``).
PROTOCOL_VERSION = 2


def encode(message: dict[str, Any]) -> bytes:
    """One frame; InvalidArgument for text UTF-8 cannot carry or absurd nesting.

    The transports refuse both before a request is sent; this is the last
    line, so that no field they missed can end a call in INTERNAL.
    """
    try:
        return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    except UnicodeEncodeError as exc:
        raise InvalidArgument(
            f"a text field is not valid Unicode (it contains {exc.object[exc.start : exc.end]!a}); "
            "send UTF-8 text"
        ) from None
    except RecursionError:
        raise InvalidArgument("a field nests too deeply") from None


def decode(line: bytes) -> dict[str, Any]:
    """Parse one line; raise ValueError for anything that is not a JSON object."""
    try:
        value = json.loads(line)
    except RecursionError:
        raise ValueError("frame nests too deeply") from None
    if not isinstance(value, dict):
        raise ValueError("frame is not a JSON object")
    return value


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: object) -> bytes:
    if not isinstance(text, str):
        raise ValueError("expected base64 text")
    return base64.b64decode(text, validate=True)


#: One base64 naming on every wire: the executor's frames and the HTTP API's JSON.
BASE64_SUFFIX = "_base64"


def to_wire(value: Any) -> Any:
    """Top-level ``bytes`` fields become base64 text under ``<name>_base64``."""
    if isinstance(value, dict):
        return {
            (k + BASE64_SUFFIX if isinstance(v, bytes) else k): (
                b64(v) if isinstance(v, bytes) else v
            )
            for k, v in value.items()
        }
    return value


def from_wire(fields: dict[str, Any]) -> dict[str, Any]:
    """Inverse of ``to_wire``; raise InvalidArgument for bad base64."""
    decoded: dict[str, Any] = {}
    for key, value in fields.items():
        if key.endswith(BASE64_SUFFIX):
            try:
                decoded[key.removesuffix(BASE64_SUFFIX)] = unb64(value)
            except ValueError as exc:
                raise InvalidArgument(f"{key} is not valid base64") from exc
        else:
            decoded[key] = value
    return decoded


# ------------------------------------------------------------ raw frames

#: Ends a raw frame's payload. Not a newline, so a torn frame padded with
#: newlines is told from a whole one.
RAW_END = b"\x00\n"
#: Largest raw payload in a request (daemon -> executor); bigger bytes go
#: base64. It bounds the padding a reconnecting daemon sends (resync_padding).
REQUEST_RAW_MAX = 4 << 20
_RAW_HEADER = re.compile(rb'\{"raw":\["([a-z][a-z0-9_]{0,63})",(0|[1-9][0-9]{0,11})\][,}]')


def frame(
    head: dict[str, Any], body: str, fields: dict[str, Any], raw_max: int = -1
) -> list[bytes]:
    """The parts of one frame: ``head`` plus ``{body: fields}``.

    The first ``bytes`` field of ``fields`` (at most ``raw_max`` long, when
    ``raw_max`` >= 0) travels raw after the JSON header; other bytes fields
    go base64. Write the parts back to back.
    """
    raw_key = None
    for key, value in fields.items():
        if isinstance(value, bytes) and (raw_max < 0 or len(value) <= raw_max):
            raw_key = key
            break
    if raw_key is None:
        return [encode({**head, body: to_wire(fields)})]
    payload = fields[raw_key]
    rest = {k: v for k, v in fields.items() if k != raw_key}
    header = encode({"raw": [raw_key, len(payload)], **head, body: to_wire(rest)})
    return [header, payload, RAW_END]


def resync_padding() -> bytes:
    """Sent first by a daemon attaching to a running executor: completes any
    request frame a previous daemon left torn (see the module docstring)."""
    return b"\n" * (REQUEST_RAW_MAX + len(RAW_END))


def attach_raw(fields: dict[str, Any], key: str, payload: bytes) -> dict[str, Any]:
    """Put a raw payload into its frame's decoded fields; ValueError if it
    would overwrite or masquerade as another field."""
    if key in fields or key.endswith(BASE64_SUFFIX):
        raise ValueError(f"raw field {key!r} clashes with the frame's fields")
    fields[key] = payload
    return fields


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame off the stream: its JSON line, and its raw payload if any."""

    line: bytes
    raw_key: str = ""
    payload: bytes | None = None


@dataclass(frozen=True, slots=True)
class Bad:
    """Bytes dropped. ``lost_step``: a raw frame's length or end was wrong, so
    the stream's framing cannot be trusted from here (the reader went back to
    looking for newlines)."""

    reason: str
    lost_step: bool = False


class Deframer:
    """Splits a byte stream into frames; no I/O, so both ends share it.

    Memory: one line of at most ``max_line`` bytes (longer ones are dropped
    as they stream by), or one raw frame's header plus a payload of at most
    ``max_raw`` bytes.
    """

    def __init__(self, *, max_line: int, max_raw: int) -> None:
        self._max_line = max_line
        self._max_raw = max_raw
        self._line = bytearray()
        self._discarding = False
        # A raw frame in progress: its header, field, bytes still due, parts.
        self._header = b""
        self._key = ""
        self._due = 0
        self._parts: list[bytes] = []
        self._end = b""

    def feed(self, data: bytes) -> list[Frame | Bad]:
        out: list[Frame | Bad] = []
        pos, size = 0, len(data)
        while pos < size:
            if self._header:
                pos = self._take_raw(data, pos, out)
                continue
            newline = data.find(b"\n", pos)
            if newline == -1:
                self._add_to_line(data, pos, size, out)
                break
            self._add_to_line(data, pos, newline, out)
            pos = newline + 1
            if self._discarding:
                self._discarding = False
            elif self._line:
                self._end_line(out)
            elif data[pos : pos + 1] == b"\n":
                # A run of empty lines (resync padding): skipped in one step.
                rest = data[pos:]
                pos += len(rest) - len(rest.lstrip(b"\n"))
            self._line.clear()
        return out

    def _add_to_line(self, data: bytes, start: int, end: int, out: list[Frame | Bad]) -> None:
        if self._discarding or start == end:
            return
        self._line += data[start:end]
        if len(self._line) > self._max_line:
            out.append(Bad(f"a frame over {self._max_line} bytes"))
            self._line.clear()
            self._discarding = True

    def _end_line(self, out: list[Frame | Bad]) -> None:
        line = bytes(self._line)
        if not line.startswith(b'{"raw":'):
            out.append(Frame(line))
            return
        match = _RAW_HEADER.match(line)
        if match is None:
            out.append(Bad("a raw frame header that does not parse", lost_step=True))
            return
        due = int(match.group(2))
        if due > self._max_raw:
            out.append(Bad(f"a raw frame of {due} bytes (limit {self._max_raw})", lost_step=True))
            return
        self._header, self._key, self._due = line, match.group(1).decode(), due
        self._parts, self._end = [], b""

    def _take_raw(self, data: bytes, pos: int, out: list[Frame | Bad]) -> int:
        if self._due:
            piece = data[pos : pos + self._due]
            self._parts.append(piece)
            self._due -= len(piece)
            return pos + len(piece)
        want = len(RAW_END) - len(self._end)
        self._end += data[pos : pos + want]
        pos += want
        if len(self._end) < len(RAW_END):
            return pos
        header, key, parts, end = self._header, self._key, self._parts, self._end
        self._header, self._key, self._parts, self._end = b"", "", [], b""
        if end == RAW_END:
            out.append(Frame(header, key, parts[0] if len(parts) == 1 else b"".join(parts)))
            return pos
        out.append(Bad("a raw frame that does not end where its length says", lost_step=True))
        # Back to lines, from the first byte that did not fit: a newline there
        # (resync padding) ends the torn frame's line.
        out.extend(self.feed(end))
        return pos

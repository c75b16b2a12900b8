"""The executor channel's framing: one JSON object per line, both ways.

Newline framing resynchronises by itself: if a peer dies mid-frame, the torn
line fails to parse and is dropped, and the next line is whole again. That is
what lets a restarted sandboxd re-attach to a running executor.

Requests:   {"id": 7, "op": "read_file", "args": {...}}
Replies:    {"id": 7, "ok": {...}}  |  {"id": 7, "err": {"kind": ..., "message": ...}}
Stream:     {"id": 7, "ev": {...}}  (zero or more before the reply)
Bytes travel base64-encoded under keys ending in ``_base64`` (``BASE64_SUFFIX``,
the same naming as the HTTP API's JSON).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from sandboxd.errors import InvalidArgument

PROTOCOL_VERSION = 1


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

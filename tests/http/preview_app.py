"""The server a preview test runs inside a sandbox (uvicorn, started through the
process API): echoes what it was asked, streams bodies, echoes WebSocket messages."""

from __future__ import annotations

import json
from typing import Any


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    headers = {k.decode(): v.decode() for k, v in scope.get("headers", [])}
    if scope["type"] == "websocket":
        await receive()  # connect
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": json.dumps({"host": headers.get("host")})})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            await send({"type": "websocket.send", "text": "echo:" + (message.get("text") or "")})
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/upload":
        size = 0
        while True:
            message = await receive()
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = json.dumps({"received": size}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})
        return
    if path == "/big":
        size = int(scope["query_string"].decode().partition("=")[2] or 0)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        block = b"b" * (1 << 20)
        while size > 0:
            await send({"type": "http.response.body", "body": block[:size], "more_body": True})
            size -= len(block)
        await send({"type": "http.response.body", "body": b""})
        return
    body = json.dumps(
        {"path": path, "query": scope["query_string"].decode(), "headers": headers}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"set-cookie", b"sandboxd_preview=tossed; Path=/"),
                (b"set-cookie", b"app=1; Path=/"),
                (b"connection", b"x-internal"),
                (b"x-internal", b"hop"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})

"""ASGI middleware: a request body may not exceed a size, whether or not it says so.

uvicorn reads any body it is sent; without this a client could make the
daemon buffer gigabytes before the service's own payload check ever runs.
The limit leaves room above the payload limit so that the service, not this
guard, answers a merely oversize payload, with its own message.
"""

from __future__ import annotations

import re

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sandboxd.transports.http.errors import error_response


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _STREAMED.match(str(scope.get("path", ""))):
            # Streamed uploads take any size: the service moves them in bounded chunks.
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", ())).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await error_response(413, "RESOURCE_EXHAUSTED", self._message())(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    # FastAPI lets an HTTPException from body reading through to its handler.
                    raise HTTPException(413, self._message())
            return message

        await self.app(scope, counted, send)

    def _message(self) -> str:
        return f"request body over {self.max_bytes} bytes (SANDBOXD_MAX_PAYLOAD_BYTES)"


#: Routes whose bodies are streamed through in chunks (routes/transfer.py).
_STREAMED = re.compile(r"^/v1/sandboxes/[^/]+/(files|tree)/upload$")

"""ASGI middleware: every API call is counted, timed and access-logged.

It sits outside FastAPI's error handlers, so it sees the final status of
every request (validation failures and unknown routes included), and the
handlers tell it the cause through ``mark_failed``. Probes, /metrics and the
OpenAPI pages are not calls and are left out of the numbers.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sandboxd.observability.calls import OK, Call, observe
from sandboxd.transports.http.errors import HTTP_STATUS

_CODE_OF_STATUS = {status: code for code, status in HTTP_STATUS.items()}
_API_PREFIX = "/v1/"


class ObserveCalls:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(_API_PREFIX):
            await self.app(scope, receive, send)
            return
        with observe("http", "unknown") as call:

            async def send_and_watch(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    if status >= 400 and call.code == OK:
                        # Refused before any handler could say why (no route, body too large).
                        call.code = _CODE_OF_STATUS.get(status, "UNKNOWN")
                        call.cause = call.code.lower()
                elif message["type"] == "http.response.body" and not message.get("more_body"):
                    _label(call, scope)
                    call.finish()  # before the last byte: the client sees a counted call
                await send(message)

            try:
                await self.app(scope, receive, send_and_watch)
            finally:
                # Routing has filled the scope in by now (the route, its path parameters).
                _label(call, scope)


def _label(call: Call, scope: Scope) -> None:
    route = scope.get("route")
    params = scope.get("path_params") or {}
    call.method = str(getattr(route, "name", "unknown"))
    # CreateSandbox names its instance in the body; its route has said so already.
    call.instance_id = str(params.get("instance_id", "")) or call.instance_id
    if call.method == "CallTool":
        call.tool = str(scope.get("path", "")).rsplit("/", 1)[-1][:32]

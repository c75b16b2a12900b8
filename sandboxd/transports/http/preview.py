"""Preview: the HTTP listener serves a port of a sandbox (ASGI middleware).

Two ways in, both ending in ``SandboxService.open_port`` (a socket pipe over
the executor channel, network off):

- path-based: ``/v1/sandboxes/{id}/ports/{port}/...`` on the API's host (the
  prefix is stripped);
- host-based: ``{port}-{id}.<preview_domain>`` (every path goes to the
  sandbox: a preview host never reaches the API, and the API's host reaches
  a preview only under the prefix above).

Access: the API token (``Authorization: Bearer``, scope and tenant checked
as for any call), or a preview token (``?sandboxd_preview_token=`` in a
signed URL, the ``X-Sandboxd-Preview-Token`` header, or the cookie a signed
URL sets so that the page's own requests and its WebSocket carry it); 403
otherwise. sandboxd's credentials are taken out of what the sandbox sees.

Each request is its own connection to the sandbox's server (one pipe, HTTP/1.1
framed by h11 both ways, so neither side's framing reaches the other as is);
WebSocket upgrades are relayed message by message (wsproto towards the
sandbox). The client's Host header goes through unchanged, on pages and
upgrades alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterable
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, unquote, urlencode

import h11
from starlette.types import ASGIApp, Receive, Scope, Send
from wsproto import ConnectionType, WSConnection
from wsproto import events as ws
from wsproto.utilities import RemoteProtocolError as WsProtocolError

from sandboxd.contract import validation
from sandboxd.contract.errors import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    SandboxdError,
    Unauthenticated,
)
from sandboxd.service.forwarding import PREVIEW_QUERY
from sandboxd.service.ports import Pipe
from sandboxd.service.scope import enter_scope, leave_scope
from sandboxd.transports.http.app_state import AppState

_PATH = re.compile(rb"^/v1/sandboxes/([^/?]+)/ports/([0-9]{1,5})(/[^?]*)?$")
_HOST_LABEL = re.compile(r"^([0-9]{1,5})-([a-z0-9][a-z0-9_-]{0,127})$")
COOKIE = "sandboxd_preview"
HEADER = "x-sandboxd-preview-token"
#: Never passed between client and sandbox (RFC 9110 7.6.1), besides those a
#: Connection header names.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        # Re-framed here: the sandbox never sees the client's framing, nor
        # the client the sandbox's.
        "content-length",
    }
)
#: WebSocket handshake headers wsproto writes itself.
_WS_OWN = frozenset(
    {"host", "sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol",
     "sec-websocket-extensions"}
)  # fmt: skip
_READ = 64 << 10


class Target:
    def __init__(self, instance_id: str, port: int, path: bytes, cookie_path: str) -> None:
        self.instance_id = instance_id
        self.port = port
        self.path = path  # what the sandbox's server is asked for (raw, with query)
        self.cookie_path = cookie_path


class Previews:
    """Serves previews; every other request goes on to ``app``."""

    def __init__(self, app: ASGIApp, *, state: AppState, domain: str | None) -> None:
        self.app = app
        self.state = state
        self.domain = domain.lower() if domain else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        host = headers.get("host", "")
        if self.domain and _under(host, self.domain):
            target = _host_target(host, self.domain, scope)
            if target is None:
                await _refuse(scope, send, 404, "no such preview host")
                return
        else:
            match = _PATH.match(scope.get("raw_path") or scope["path"].encode())
            if match is None:
                await self.app(scope, receive, send)
                return
            if match.group(3) is None:
                await _redirect_to_slash(scope, send)
                return
            target = _path_target(match, scope)
            if target is None:
                await _refuse(scope, send, 404, "not a sandbox port")
                return
        await self._serve(scope, receive, send, target, headers)

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, target: Target, headers: dict[str, str]
    ) -> None:
        if self.state.lifecycle.draining:
            await _refuse(scope, send, 503, "sandboxd is shutting down")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        from_query = query.get(PREVIEW_QUERY)
        token = from_query or headers.get(HEADER) or _cookie(headers)
        upstream = _upstream_headers(headers, token_used=bool(token))
        # An HTTP request's head goes with the connect: no round trip of its own.
        request = _HttpRequest(scope, target, upstream) if scope["type"] == "http" else None
        first = request.head if request is not None else b""
        set_cookie = None
        try:
            if token:
                pipe = await self.state.service.open_preview(
                    target.instance_id, target.port, token, first
                )
                if from_query:
                    set_cookie = _cookie_header(token, target.cookie_path, scope)
            elif "authorization" in headers:
                pipe = await self._open_with_api_token(scope, headers, target, first)
            else:
                raise PermissionDenied(
                    "a preview needs the API token or a preview token (signed URL)"
                )
        except (PermissionDenied, Unauthenticated) as exc:
            await _refuse(scope, send, 403, exc.message)
            return
        except NotFound as exc:
            await _refuse(scope, send, 502 if "listens" in exc.message else 404, exc.message)
            return
        except InvalidArgument as exc:
            await _refuse(scope, send, 400, exc.message)
            return
        except SandboxdError as exc:
            await _refuse(scope, send, 503, exc.message)
            return
        try:
            if request is None:
                await _relay_websocket(scope, receive, send, pipe, target, upstream)
            else:
                await _relay_http(scope, receive, send, pipe, request, set_cookie)
        finally:
            await pipe.close()

    async def _open_with_api_token(
        self, scope: Scope, headers: dict[str, str], target: Target, first: bytes
    ) -> Pipe:
        client = scope.get("client")
        peer = f"http:{client[0]}:{client[1]}" if client else "http:unknown"
        caller = self.state.authenticator.scope_for(
            peer, [("authorization", headers["authorization"])]
        )
        entered = enter_scope(caller)
        try:
            return await self.state.service.open_port(target.instance_id, target.port, data=first)
        finally:
            leave_scope(entered)


# ------------------------------------------------------------ targets


def _name(host: str, domain: str) -> str:
    """The Host header as the domain is written: with its port only if the domain has one."""
    host = host.lower()
    if ":" not in domain and not host.endswith("]"):
        host = host.rpartition(":")[0] if ":" in host else host
    return host


def _under(host: str, domain: str) -> bool:
    return _name(host, domain).endswith("." + domain)


def _host_target(host: str, domain: str, scope: Scope) -> Target | None:
    label = _name(host, domain)[: -len(domain) - 1]
    match = _HOST_LABEL.match(label)
    if match is None or not 0 < int(match.group(1)) < 65536:
        return None
    path = scope.get("raw_path") or scope["path"].encode()
    return Target(match.group(2), int(match.group(1)), _with_query(path, scope), "/")


def _path_target(match: re.Match[bytes], scope: Scope) -> Target | None:
    instance_id = unquote(match.group(1).decode("latin-1"))
    port = int(match.group(2))
    try:
        validation.instance_id(instance_id)
    except InvalidArgument:
        return None
    if not 0 < port < 65536:
        return None
    prefix = match.group(0)[: len(match.group(0)) - len(match.group(3))].decode("latin-1")
    return Target(instance_id, port, _with_query(match.group(3), scope), prefix + "/")


def _with_query(path: bytes, scope: Scope) -> bytes:
    # sandboxd's token is sandboxd's: the sandbox's server never sees it.
    pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if k != PREVIEW_QUERY]
    if len(kept) == len(pairs):
        query = scope.get("query_string", b"")
    else:
        query = urlencode(kept).encode("latin-1")
    return path + (b"?" + query if query else b"")


# ------------------------------------------------------------ headers


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        name = key.decode("latin-1").lower()
        text = value.decode("latin-1")
        if name in out:
            text = f"{out[name]}{'; ' if name == 'cookie' else ', '}{text}"
        out[name] = text
    return out


def _cookie(headers: dict[str, str]) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    with contextlib.suppress(Exception):
        jar.load(raw)
    morsel = jar.get(COOKIE)
    return morsel.value if morsel else None


def _cookie_header(token: str, path: str, scope: Scope) -> bytes:
    expires = token.partition(".")[0]
    secure = "; Secure" if scope.get("scheme") in ("https", "wss") else ""
    return (
        f"{COOKIE}={token}; Path={path}; HttpOnly; SameSite=Lax{secure}; "
        f"Expires={_http_date(int(expires))}"
    ).encode("latin-1")


def _http_date(seconds: int) -> str:
    import email.utils

    return email.utils.formatdate(seconds, usegmt=True)


def _without_our_cookie(raw: str) -> str:
    parts = [p.strip() for p in raw.split(";")]
    return "; ".join(p for p in parts if p and not p.startswith(COOKIE + "="))


def _upstream_headers(headers: dict[str, str], *, token_used: bool) -> list[tuple[str, str]]:
    named = {h.strip().lower() for h in headers.get("connection", "").split(",")}
    out: list[tuple[str, str]] = []
    for name, value in headers.items():
        if name in HOP_BY_HOP or name in named or name == HEADER:
            continue
        if name == "authorization" and not token_used:
            continue  # sandboxd's API token: never shown to the sandbox
        if name == "cookie":
            value = _without_our_cookie(value)
            if not value:
                continue
        out.append((name, value))
    return out


def _downstream_headers(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    named: set[bytes] = set()
    pairs = list(headers)
    for name, value in pairs:
        if name.lower() == b"connection":
            named |= {h.strip().lower() for h in value.split(b",")}
    out = []
    for name, value in pairs:
        lower = name.lower()
        if lower.decode("latin-1") in HOP_BY_HOP or lower in named:
            continue
        if lower == b"set-cookie" and value.strip().lower().startswith(COOKIE.encode() + b"="):
            continue  # the sandbox may not set (or toss) sandboxd's own cookie
        out.append((lower, value))
    return out


# ------------------------------------------------------------ HTTP


class _HttpRequest:
    """The request towards the sandbox's server, framed by h11 as a client."""

    def __init__(self, scope: Scope, target: Target, headers: list[tuple[str, str]]) -> None:
        self.conn = h11.Connection(h11.CLIENT)
        self.has_body = _has_body(scope)
        request_headers = [*headers, ("connection", "close")]
        if self.has_body:
            request_headers.append(("transfer-encoding", "chunked"))
        if not any(k == "host" for k, _ in request_headers):
            request_headers.append(("host", "localhost"))
        self.head = (
            self.conn.send(
                h11.Request(method=scope["method"], target=target.path, headers=request_headers)
            )
            or b""
        )


async def _relay_http(
    scope: Scope,
    receive: Receive,
    send: Send,
    pipe: Pipe,
    request: _HttpRequest,
    set_cookie: bytes | None,
) -> None:
    """``request``'s head went with the pipe's connect; its body and the answer follow."""
    conn, has_body = request.conn, request.has_body

    async def upload() -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                await pipe.close()  # the answer's reader sees the end at once
                return
            body = message.get("body", b"")
            if body and has_body:
                await pipe.write(conn.send(h11.Data(data=body)) or b"")
            if not message.get("more_body"):
                await pipe.write(conn.send(h11.EndOfMessage()) or b"")
                # Then wait for the client to go away (or the answer to end).
                if (await receive())["type"] == "http.disconnect":
                    await pipe.close()
                return

    uploader = asyncio.create_task(upload())
    started = False
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await pipe.read()
                conn.receive_data(data)
                continue
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                response_headers = _downstream_headers(event.headers)
                if set_cookie:
                    response_headers.append((b"set-cookie", set_cookie))
                await send(
                    {"type": "http.response.start", "status": event.status_code,
                     "headers": response_headers}
                )  # fmt: skip
                started = True
            elif isinstance(event, h11.Data):
                await send({"type": "http.response.body", "body": bytes(event.data),
                            "more_body": True})  # fmt: skip
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                break
    except h11.RemoteProtocolError as exc:
        if not started:
            await _refuse(scope, send, 502, f"the sandbox's server answered badly: {exc}")
            return
    except SandboxdError as exc:
        if not started:
            await _refuse(scope, send, 502, exc.message)
            return
    finally:
        uploader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await uploader
    if started:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    else:
        await _refuse(scope, send, 502, "the sandbox's server closed without an answer")


def _has_body(scope: Scope) -> bool:
    for key, value in scope.get("headers", []):
        name = key.lower()
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


# ------------------------------------------------------------ WebSocket


async def _relay_websocket(
    scope: Scope,
    receive: Receive,
    send: Send,
    pipe: Pipe,
    target: Target,
    headers: list[tuple[str, str]],
) -> None:
    first = await receive()
    if first["type"] != "websocket.connect":
        return
    upstream = WSConnection(ConnectionType.CLIENT)
    names = dict(headers)
    extra = [(k, v) for k, v in headers if k not in _WS_OWN and not k.startswith("sec-websocket")]
    await pipe.write(
        upstream.send(
            ws.Request(
                host=names.get("host", "localhost"),
                target=target.path.decode("latin-1"),
                subprotocols=list(scope.get("subprotocols") or []),
                extra_headers=[(k.encode(), v.encode("latin-1")) for k, v in extra],
            )
        )
    )
    accepted: ws.AcceptConnection | None = None
    # Messages may come in the same read as the handshake's answer.
    early: list[ws.Event] = []
    while accepted is None:
        data = await pipe.read()
        if not data:
            await send({"type": "websocket.close", "code": 1011})
            return
        try:
            upstream.receive_data(data)
            events = list(upstream.events())
        except WsProtocolError:
            events = [ws.RejectConnection()]
        for event in events:
            if isinstance(event, ws.AcceptConnection):
                accepted = event
            elif isinstance(event, (ws.RejectConnection, ws.RejectData)):
                await send({"type": "websocket.close", "code": 1011})
                return
            elif accepted is not None:
                early.append(event)
    await send({"type": "websocket.accept", "subprotocol": accepted.subprotocol})

    async def to_sandbox() -> None:
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                with contextlib.suppress(Exception):
                    code = int(message.get("code") or 1000)
                    await pipe.write(upstream.send(ws.CloseConnection(code=code)))
                return
            if message.get("text") is not None:
                await pipe.write(upstream.send(ws.Message(data=message["text"])))
            elif message.get("bytes") is not None:
                await pipe.write(upstream.send(ws.Message(data=message["bytes"])))

    async def to_client() -> None:
        text: list[str] = []
        binary: list[bytes] = []
        pending: list[ws.Event] = early
        while True:
            if not pending:
                data = await pipe.read()
                if not data:
                    break
                try:
                    upstream.receive_data(data)
                    pending = list(upstream.events())
                except WsProtocolError:
                    break
            batch, pending = pending, []
            for event in batch:
                if isinstance(event, ws.TextMessage):
                    text.append(event.data)
                    if event.message_finished:
                        await send({"type": "websocket.send", "text": "".join(text)})
                        text.clear()
                elif isinstance(event, ws.BytesMessage):
                    binary.append(bytes(event.data))
                    if event.message_finished:
                        await send({"type": "websocket.send", "bytes": b"".join(binary)})
                        binary.clear()
                elif isinstance(event, ws.Ping):
                    await pipe.write(upstream.send(event.response()))
                elif isinstance(event, ws.CloseConnection):
                    with contextlib.suppress(Exception):
                        await pipe.write(upstream.send(event.response()))
                    await send({"type": "websocket.close", "code": event.code})
                    return
        await send({"type": "websocket.close", "code": 1011})

    tasks = [asyncio.ensure_future(to_sandbox()), asyncio.ensure_future(to_client())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


# ------------------------------------------------------------ answers


async def _refuse(scope: Scope, send: Send, status: int, text: str) -> None:
    if scope["type"] == "websocket":
        # Before the accept, a close is an HTTP 403 to the client.
        await send({"type": "websocket.close", "code": 1008, "reason": text[:120]})
        return
    body = (text + "\n").encode()
    await send(
        {"type": "http.response.start", "status": status,
         "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                     (b"content-length", b"%d" % len(body))]}
    )  # fmt: skip
    await send({"type": "http.response.body", "body": body})


async def _redirect_to_slash(scope: Scope, send: Send) -> None:
    location = scope.get("raw_path", b"") + b"/"
    if scope.get("query_string"):
        location += b"?" + scope["query_string"]
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    await send(
        {"type": "http.response.start", "status": 308,
         "headers": [(b"location", location), (b"content-length", b"0")]}
    )  # fmt: skip
    await send({"type": "http.response.body", "body": b""})

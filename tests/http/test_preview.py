"""Preview over HTTP: path-based and host-based, WebSocket upgrades, tokens,
signed URLs, and the attacks (wrong sandbox, Host games, hop-by-hop headers,
smuggling between preview and API). Local backend; a real uvicorn app runs
as the sandbox's server (tests/http/preview_app.py), started through the
process API."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from wsproto import ConnectionType, WSConnection
from wsproto import events as ws

from sandboxd.daemon.assembly import Daemon
from tests.helpers import ROOT
from tests.http.conftest import TEAM_A, make_settings

pytestmark = [pytest.mark.inproc, pytest.mark.anyio, pytest.mark.timeout(120)]

DOMAIN = "preview.test"


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Daemon]:
    server = Daemon(make_settings(tmp_path, preview_domain=DOMAIN))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _sandbox_with_app(client: httpx.AsyncClient, name: str) -> int:
    assert (await client.post("/v1/sandboxes", json={"instance_id": name})).status_code in (
        200,
        201,
    )
    port = _free_port()
    started = await client.post(
        f"/v1/sandboxes/{name}/processes",
        json={
            "argv": [sys.executable, "-m", "uvicorn", "--app-dir", str(ROOT), "--port",
                     str(port), "--log-level", "warning", "tests.http.preview_app:app"],
        },
    )  # fmt: skip
    assert started.status_code == 200, started.text
    for _ in itertools.count():
        listed = (await client.get(f"/v1/sandboxes/{name}/ports")).json()["ports"]
        if any(p["port"] == port for p in listed):
            return port
        await asyncio.sleep(0.1)
    raise AssertionError


async def _preview(client: httpx.AsyncClient, name: str, port: int, ttl_s: int = 600) -> dict:
    reply = await client.post(f"/v1/sandboxes/{name}/previews", json={"port": port, "ttl_s": ttl_s})
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


async def test_path_based_with_the_api_token(client: httpx.AsyncClient) -> None:
    port = await _sandbox_with_app(client, "pv-a")
    reply = await client.get(
        f"/v1/sandboxes/pv-a/ports/{port}/echo?x=1",
        headers={"Connection": "X-Secret", "X-Secret": "hop", "Proxy-Authorization": "p"},
    )
    assert reply.status_code == 200, reply.text
    seen = reply.json()
    assert seen["path"] == "/echo" and seen["query"] == "x=1"
    # The API token, hop-by-hop headers and those Connection names stay here.
    assert "authorization" not in seen["headers"]
    assert "x-secret" not in seen["headers"] and "proxy-authorization" not in seen["headers"]
    assert seen["headers"]["host"] == client.base_url.netloc.decode()
    assert "x-internal" not in reply.headers
    # The sandbox may set its cookies, never sandboxd's.
    cookies = reply.headers.get_list("set-cookie")
    assert cookies == ["app=1; Path=/"]
    # Without the slash: redirected to it (relative links resolve inside).
    bare = await client.get(f"/v1/sandboxes/pv-a/ports/{port}")
    assert bare.status_code == 308 and bare.headers["location"].endswith(f"/ports/{port}/")


async def test_access_needs_a_token_of_this_sandbox_and_port(
    client: httpx.AsyncClient, anonymous: httpx.AsyncClient
) -> None:
    port = await _sandbox_with_app(client, "pv-b")
    await _sandbox_with_app(client, "pv-c")
    url = f"/v1/sandboxes/pv-b/ports/{port}/echo"
    assert (await anonymous.get(url)).status_code == 403
    assert (await anonymous.get(url, headers={"Authorization": "Bearer wrong"})).status_code == 403
    team = {"Authorization": f"Bearer {TEAM_A}"}
    assert (await anonymous.get(url, headers=team)).status_code == 403  # not team-a-*
    other = await _preview(client, "pv-c", port)
    assert (
        await anonymous.get(url, headers={"X-Sandboxd-Preview-Token": other["token"]})
    ).status_code == 403
    other_port = await _preview(client, "pv-b", port + 1)
    assert (
        await anonymous.get(url, params={"sandboxd_preview_token": other_port["token"]})
    ).status_code == 403
    forged = other["token"].split(".")[0] + ".AAAA"
    assert (
        await anonymous.get(url, headers={"X-Sandboxd-Preview-Token": forged})
    ).status_code == 403
    mine = await _preview(client, "pv-b", port, ttl_s=3)
    assert (
        await anonymous.get(url, headers={"X-Sandboxd-Preview-Token": mine["token"]})
    ).status_code == 200
    await asyncio.sleep(3.5)
    expired = await anonymous.get(url, headers={"X-Sandboxd-Preview-Token": mine["token"]})
    assert expired.status_code == 403 and "expired" in expired.text


async def test_a_signed_url_sets_a_cookie_the_page_then_uses(
    client: httpx.AsyncClient, anonymous: httpx.AsyncClient
) -> None:
    port = await _sandbox_with_app(client, "pv-d")
    preview = await _preview(client, "pv-d", port)
    first = await anonymous.get(preview["path"].replace("/?", "/echo?"))
    assert first.status_code == 200
    assert first.json()["query"] == ""  # the token is sandboxd's, not the app's
    ours = [c for c in first.headers.get_list("set-cookie") if c.startswith("sandboxd_preview=")]
    assert len(ours) == 1
    cookie = ours[0]
    assert cookie.startswith("sandboxd_preview=") and "HttpOnly" in cookie
    assert f"Path=/v1/sandboxes/pv-d/ports/{port}/" in cookie
    again = await anonymous.get(
        f"/v1/sandboxes/pv-d/ports/{port}/echo",
        headers={"Cookie": f"{cookie.split(';')[0]}; theirs=1"},
    )
    assert again.status_code == 200
    assert again.json()["headers"]["cookie"] == "theirs=1"


async def test_host_based_and_no_way_from_a_preview_host_into_the_api(
    client: httpx.AsyncClient, anonymous: httpx.AsyncClient
) -> None:
    port = await _sandbox_with_app(client, "pv-e")
    token = (await _preview(client, "pv-e", port))["token"]
    host = f"{port}-pv-e.{DOMAIN}"
    reply = await anonymous.get("/echo", headers={"Host": host, "X-Sandboxd-Preview-Token": token})
    assert reply.status_code == 200
    assert reply.json()["headers"]["host"] == host
    # Every path of a preview host is the sandbox's, with the API token too.
    api = await client.get("/v1/sandboxes", headers={"Host": host})
    assert api.status_code == 200 and api.json()["path"] == "/v1/sandboxes"
    assert "authorization" not in api.json()["headers"]
    # Another sandbox's host with this token, or a host that names nothing.
    elsewhere = {"Host": f"{port}-pv-x.{DOMAIN}", "X-Sandboxd-Preview-Token": token}
    assert (await anonymous.get("/", headers=elsewhere)).status_code == 403
    assert (await anonymous.get("/", headers={"Host": f"junk.{DOMAIN}"})).status_code == 404
    # With the listener's port in the Host header, as a browser sends it.
    with_port = {"Host": f"{host}:8080", "X-Sandboxd-Preview-Token": token}
    assert (await anonymous.get("/echo", headers=with_port)).json()["headers"][
        "host"
    ] == f"{host}:8080"


async def test_a_preview_request_smuggles_nothing_into_the_api(client: httpx.AsyncClient) -> None:
    """Ambiguous framing on a preview request, then an API request on the same
    connection that carries only the preview's credentials: each request is
    framed and authorized on its own; the sandbox's server sees sandboxd's
    framing, never the client's."""
    port = await _sandbox_with_app(client, "pv-f")
    token = (await _preview(client, "pv-f", port))["token"]
    reader, writer = await asyncio.open_connection(client.base_url.host, client.base_url.port)
    writer.write(
        b"POST /v1/sandboxes/pv-f/ports/%d/upload HTTP/1.1\r\nHost: x\r\n"
        b"X-Sandboxd-Preview-Token: %s\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"
        b"\r\n3\r\nabc\r\n0\r\n\r\n"
        b"DELETE /v1/sandboxes/pv-f HTTP/1.1\r\nHost: x\r\nCookie: sandboxd_preview=%s\r\n"
        b"X-Sandboxd-Preview-Token: %s\r\nConnection: close\r\n\r\n"
        % (port, token.encode(), token.encode(), token.encode())
    )
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    first, _, second = answer.partition(b'{"received": 3}')
    assert first.startswith(b"HTTP/1.1 200"), answer
    assert b"HTTP/1.1 401 Unauthorized" in second, answer
    assert answer.count(b"HTTP/1.1 ") == 2
    assert (await client.get("/v1/sandboxes/pv-f")).status_code == 200  # not deleted
    seen = (await client.post(f"/v1/sandboxes/pv-f/ports/{port}/echo", content=b"x")).json()
    assert seen["headers"]["transfer-encoding"] == "chunked"
    assert "content-length" not in seen["headers"]


async def test_bodies_stream_both_ways(client: httpx.AsyncClient) -> None:
    port = await _sandbox_with_app(client, "pv-g")
    size = 50 << 20

    async def body() -> AsyncIterator[bytes]:
        block = b"u" * (1 << 20)
        for _ in range(size >> 20):
            yield block

    up = await client.post(f"/v1/sandboxes/pv-g/ports/{port}/upload", content=body())
    assert up.json() == {"received": size}
    received = 0
    async with client.stream("GET", f"/v1/sandboxes/pv-g/ports/{port}/big?n={size}") as down:
        async for chunk in down.aiter_bytes():
            received += len(chunk)
    assert received == size


async def _websocket(
    address: tuple[str, int], host: str, target: str, headers: list[tuple[str, str]]
) -> list[str]:
    reader, writer = await asyncio.open_connection(*address)
    conn = WSConnection(ConnectionType.CLIENT)
    extra = [(k.encode(), v.encode()) for k, v in headers]
    writer.write(conn.send(ws.Request(host=host, target=target, extra_headers=extra)))
    got: list[str] = []
    sent = False
    while len(got) < 2:
        data = await asyncio.wait_for(reader.read(65536), 10)
        if not data:
            break
        conn.receive_data(data)
        for event in conn.events():
            if isinstance(event, ws.RejectConnection):
                return [f"rejected {event.status_code}"]
            if isinstance(event, ws.AcceptConnection) and not sent:
                writer.write(conn.send(ws.Message(data="hi")))
                sent = True
            elif isinstance(event, ws.TextMessage):
                got.append(event.data)
    writer.write(conn.send(ws.CloseConnection(code=1000)))
    writer.close()
    return got


async def test_websocket_upgrades_carry_the_pages_host(
    server: Daemon, client: httpx.AsyncClient
) -> None:
    port = await _sandbox_with_app(client, "pv-h")
    preview = await _preview(client, "pv-h", port)
    address = ("127.0.0.1", server.http_port)
    host = f"127.0.0.1:{server.http_port}"
    cookie = [("Cookie", f"sandboxd_preview={preview['token']}")]
    got = await _websocket(address, host, f"/v1/sandboxes/pv-h/ports/{port}/ws", cookie)
    assert json.loads(got[0]) == {"host": host} and got[1] == "echo:hi"
    preview_host = f"{port}-pv-h.{DOMAIN}"
    got = await _websocket(address, preview_host, "/ws", cookie)
    assert json.loads(got[0]) == {"host": preview_host} and got[1] == "echo:hi"
    denied = await _websocket(address, host, f"/v1/sandboxes/pv-h/ports/{port}/ws", [])
    assert denied == ["rejected 403"]


async def test_a_deleted_sandbox_stops_answering(
    client: httpx.AsyncClient, anonymous: httpx.AsyncClient
) -> None:
    port = await _sandbox_with_app(client, "pv-i")
    preview = await _preview(client, "pv-i", port)
    assert (await anonymous.get(preview["path"])).status_code == 200
    assert (await client.delete("/v1/sandboxes/pv-i")).status_code == 200
    started = time.monotonic()
    assert (await anonymous.get(preview["path"])).status_code == 403
    assert (await client.get(f"/v1/sandboxes/pv-i/ports/{port}/")).status_code == 404
    assert time.monotonic() - started < 5

"""Slow HTTP clients: head and body timeouts and the connection cap
(sandboxd.transports.http.guard).

Raw TCP connections play the slow clients against the real daemon; the
timeouts are set small so the tests are quick, and every check is "answered
or closed before a generous bound", never a speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from sandboxd.daemon.assembly import Daemon
from tests.http.conftest import ADMIN, make_settings

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

HEAD_S = 1.0
BODY_IDLE_S = 1.0
#: Generous: under load on a shared machine, far above the timeouts, far below "for ever".
BOUND_S = 20.0
MiB = 1 << 20


@contextlib.asynccontextmanager
async def _daemon(tmp_path: Path, **overrides: object) -> AsyncIterator[Daemon]:
    values: dict[str, object] = {
        "http_header_timeout_s": HEAD_S,
        "http_body_idle_timeout_s": BODY_IDLE_S,
    }
    values.update(overrides)
    server = Daemon(make_settings(tmp_path, **values))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Daemon]:
    async with _daemon(tmp_path) as server:
        yield server


class Raw:
    """One raw TCP connection to the daemon's HTTP port."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, server: Daemon) -> Raw:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.http_port)
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def response(self) -> tuple[int, dict[str, str], bytes]:
        """One response (content-length framed), within the bound."""
        async with asyncio.timeout(BOUND_S):
            head = await self.reader.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            status = int(lines[0].split()[1])
            headers = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return status, headers, body

    async def closed(self) -> bool:
        """True when the server closes the connection (EOF or reset) within the bound."""
        async with asyncio.timeout(BOUND_S):
            try:
                return await self.reader.read() == b""
            except ConnectionResetError:
                return True

    def close(self) -> None:
        self.writer.close()


def _get(path: str, *, extra: str = "") -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\n{extra}\r\n"
    ).encode()


async def _healthy(server: Daemon) -> None:
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{server.http_port}", timeout=BOUND_S
    ) as client:
        response = await client.get("/v1/status", headers={"Authorization": f"Bearer {ADMIN}"})
        assert response.status_code == 200, response.text


async def test_a_dripping_head_gets_408_and_is_closed_while_others_are_served(
    daemon: Daemon,
) -> None:
    drip = await Raw.open(daemon)
    await drip.send(b"GET /v1/status HTTP/1.1\r\nHost: x\r\n")

    async def keep_dripping() -> None:
        # Well inside the timeout each time: only a deadline for the whole head stops this.
        with contextlib.suppress(ConnectionError):
            for i in range(int(BOUND_S / 0.2)):
                await drip.send(f"X-Drip-{i}: {i}\r\n".encode())
                await asyncio.sleep(0.2)

    dripping = asyncio.create_task(keep_dripping())
    await _healthy(daemon)  # the daemon answers others meanwhile
    status, headers, body = await drip.response()
    assert status == 408 and headers["connection"] == "close"
    assert json.loads(body)["error"]["code"] == "DEADLINE_EXCEEDED"
    assert "request head" in json.loads(body)["error"]["message"]
    assert await drip.closed()
    assert not dripping.done() or dripping.exception() is None
    dripping.cancel()
    drip.close()
    await _healthy(daemon)


async def test_a_silent_connection_is_closed_without_a_response(daemon: Daemon) -> None:
    silent = await Raw.open(daemon)
    assert await silent.closed()  # plain uvicorn keeps it for ever
    silent.close()


async def test_keep_alive_requests_each_get_a_fresh_head_deadline(daemon: Daemon) -> None:
    conn = await Raw.open(daemon)
    # More requests, spaced, than fit in one head timeout: the deadline restarts each time.
    for _ in range(5):
        await conn.send(_get("/v1/status"))
        status, headers, _ = await conn.response()
        assert status == 200 and headers.get("connection") != "close"
        await asyncio.sleep(HEAD_S / 2)
    # The next head drips after a completed request: it too meets the deadline.
    await conn.send(b"GET /v1/status HTTP/1.1\r\n")
    status, _, _ = await conn.response()
    assert status == 408
    assert await conn.closed()
    conn.close()


async def test_a_stalled_json_body_gets_408_and_closure(daemon: Daemon) -> None:
    conn = await Raw.open(daemon)
    await conn.send(
        b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n"
        + f"Authorization: Bearer {ADMIN}\r\n".encode()
        + b'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"i'
    )
    status, headers, body = await conn.response()
    assert status == 408 and headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert error == {"code": "DEADLINE_EXCEEDED", "message": "request body stalled for 1 s"}
    assert await conn.closed()
    conn.close()
    await _healthy(daemon)


async def test_a_stalled_streamed_upload_gets_408_and_leaves_no_file(
    daemon: Daemon, caplog: pytest.LogCaptureFixture
) -> None:
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{daemon.http_port}",
        headers={"Authorization": f"Bearer {ADMIN}"},
        timeout=BOUND_S,
    ) as client:
        created = await client.post("/v1/sandboxes", json={"instance_id": "stall"})
        assert created.status_code == 201, created.text
        conn = await Raw.open(daemon)
        await conn.send(
            b"PUT /v1/sandboxes/stall/files/upload?path=half.bin HTTP/1.1\r\nHost: x\r\n"
            + f"Authorization: Bearer {ADMIN}\r\n".encode()
            + f"Content-Length: {4 * MiB}\r\n\r\n".encode()
            + b"x" * MiB
        )
        status, _, body = await conn.response()
        assert status == 408, body
        assert await conn.closed()
        conn.close()
        stat = await client.get("/v1/sandboxes/stall/files/exists", params={"path": "half.bin"})
        assert stat.status_code == 200 and stat.json()["exists"] is False, stat.text
    # The service saw a client that left, not a bug (no "internal error" with a traceback).
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_a_slow_body_that_keeps_flowing_is_not_cut(daemon: Daemon) -> None:
    conn = await Raw.open(daemon)
    pieces = 12  # sent over 3 x the idle timeout, never pausing as long as it
    payload = json.dumps({"instance_id": "slow-body", "options": {"labels": {"k": "v" * 48}}})
    data = payload.encode()
    await conn.send(
        b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n"
        + f"Authorization: Bearer {ADMIN}\r\n".encode()
        + f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
    )
    step = -(-len(data) // pieces)
    for i in range(0, len(data), step):
        await conn.send(data[i : i + step])
        await asyncio.sleep(BODY_IDLE_S / 4)
    status, _, body = await conn.response()
    assert status == 201, body
    conn.close()


async def test_a_large_streamed_upload_is_not_cut_by_the_body_timeout(daemon: Daemon) -> None:
    # Hundreds of MiB while the daemon writes them into the sandbox: reading pauses
    # whenever the service is behind, and that time is not the client's idle time.
    size, chunk = 256 * MiB, MiB
    expected = hashlib.sha256()

    async def body() -> AsyncIterator[bytes]:
        for i in range(size // chunk):
            piece = bytes([i % 251]) * chunk
            expected.update(piece)
            yield piece

    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{daemon.http_port}",
        headers={"Authorization": f"Bearer {ADMIN}"},
        timeout=300,
    ) as client:
        created = await client.post("/v1/sandboxes", json={"instance_id": "big"})
        assert created.status_code == 201, created.text
        response = await client.put(
            "/v1/sandboxes/big/files/upload", params={"path": "big.bin"}, content=body()
        )
        assert response.status_code == 200, response.text
        assert response.json()["size"] == size
        assert response.json()["sha256"] == expected.hexdigest()


async def test_the_connection_beyond_the_cap_gets_503_and_a_freed_slot_admits_again(
    tmp_path: Path,
) -> None:
    cap = 4
    async with _daemon(tmp_path, http_max_connections=cap, http_header_timeout_s=60) as daemon:
        admitted = [await Raw.open(daemon) for _ in range(cap)]
        for conn in admitted:  # each answered: the server holds all four
            await conn.send(_get("/v1/status"))
            assert (await conn.response())[0] == 200

        extra = await Raw.open(daemon)
        status, headers, body = await extra.response()
        assert status == 503 and headers["retry-after"] == "1"
        assert headers["connection"] == "close"
        error = json.loads(body)["error"]
        assert error["code"] == "UNAVAILABLE" and f"more than {cap}" in error["message"]
        assert await extra.closed()
        extra.close()

        for conn in admitted:  # the admitted ones still work
            await conn.send(_get("/v1/status"))
            assert (await conn.response())[0] == 200

        admitted.pop().close()
        async with asyncio.timeout(BOUND_S):
            while True:  # the freed slot opens once the server has seen the close
                again = await Raw.open(daemon)
                await again.send(_get("/v1/status"))
                status = (await again.response())[0]
                if status == 200:
                    break
                assert status == 503
                again.close()
                await asyncio.sleep(0.05)
        again.close()
        for conn in admitted:
            conn.close()


async def test_a_flood_beyond_the_cap_is_refused_and_the_admitted_connection_still_works(
    tmp_path: Path,
) -> None:
    async with _daemon(tmp_path, http_max_connections=1, http_header_timeout_s=60) as daemon:
        admitted = await Raw.open(daemon)
        await admitted.send(_get("/v1/status"))
        assert (await admitted.response())[0] == 200
        # Refused ones linger (to deliver their 503) only up to the cap; the rest close at once.
        flood = [await Raw.open(daemon) for _ in range(50)]
        answers = []
        for conn in flood:
            async with asyncio.timeout(BOUND_S):
                try:
                    answers.append((await conn.reader.read())[:12])
                except ConnectionResetError:
                    answers.append(b"reset")
            conn.close()
        assert set(answers) <= {b"HTTP/1.1 503", b"reset", b""}, set(answers)
        assert b"HTTP/1.1 503" in answers
        await admitted.send(_get("/v1/status"))
        assert (await admitted.response())[0] == 200
        admitted.close()

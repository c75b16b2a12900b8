"""Long-lived processes over HTTP: start, stdin, NDJSON output, re-attach, control."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

pytestmark = pytest.mark.anyio


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def _output(client: httpx.AsyncClient, url: str) -> list[dict[str, object]]:
    async with client.stream("GET", url) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/x-ndjson"
        return [json.loads(line) async for line in response.aiter_lines() if line]


def _data(events: list[dict[str, object]]) -> bytes:
    return b"".join(base64.b64decode(str(e["data_base64"])) for e in events if "data_base64" in e)


async def test_a_repl_over_http(client: httpx.AsyncClient) -> None:
    await client.post("/v1/sandboxes", json={"instance_id": "procs"})
    started = await client.post("/v1/sandboxes/procs/processes", json={"argv": ["python3", "-q"]})
    assert started.status_code == 200, started.text
    info = started.json()
    handle = info["handle"]
    assert info["state"] == "running" and info["pty"] is False
    base = f"/v1/sandboxes/procs/processes/{handle}"
    wrote = await client.post(
        f"{base}/stdin", json={"data_base64": _b64(b"print(6 * 7)\n"), "close": True}
    )
    assert wrote.json() == {"written": 13}
    events = await _output(client, f"{base}/output")
    assert _data(events) == b"42\n"
    last = events[-1]["exit"]
    assert isinstance(last, dict) and last["info"]["exit_code"] == 0 and last["missed"] == 0
    # Re-attach from an offset: only what came after it, then the exit again.
    again = await _output(client, f"{base}/output?offset=1")
    assert _data(again) == b"2\n"
    listed = (await client.get("/v1/sandboxes/procs/processes")).json()["processes"]
    assert [p["handle"] for p in listed] == [handle]
    # The process has exited: its stdin is gone.
    late = await client.post(f"{base}/stdin", json={"data_base64": _b64(b"x")})
    assert late.status_code == 412
    assert late.json()["error"]["code"] == "FAILED_PRECONDITION"


async def test_terminal_resize_and_signal_over_http(client: httpx.AsyncClient) -> None:
    await client.post("/v1/sandboxes", json={"instance_id": "tty"})
    info = (
        await client.post(
            "/v1/sandboxes/tty/processes",
            json={"shell": "read x; stty size; sleep 30", "pty": {"rows": 10, "cols": 20}},
        )
    ).json()
    base = f"/v1/sandboxes/tty/processes/{info['handle']}"
    resized = await client.post(f"{base}/resize", json={"rows": 33, "cols": 99})
    assert resized.status_code == 200 and resized.json()["pty"] is True
    await client.post(f"{base}/stdin", json={"data_base64": _b64(b"go\n")})
    bad = await client.post(f"{base}/signal", json={"signal": 0})
    assert bad.status_code == 400 and "out of range" in bad.json()["error"]["message"]
    assert (await client.post(f"{base}/signal", json={"signal": 9})).status_code == 200
    events = await _output(client, f"{base}/output")
    assert b"33 99" in _data(events)
    last = events[-1]["exit"]
    assert isinstance(last, dict) and last["info"]["signal"] == 9


async def test_unknown_handles_are_404(client: httpx.AsyncClient) -> None:
    await client.post("/v1/sandboxes", json={"instance_id": "none"})
    missing = await client.get("/v1/sandboxes/none/processes/proc_9/output")
    assert missing.status_code == 404
    assert "no process" in missing.json()["error"]["message"]
    assert (await client.post("/v1/sandboxes/none/processes/proc_9/signal",
                              json={"signal": 15})).status_code == 404  # fmt: skip
    ghost = await client.get("/v1/sandboxes/ghost/processes")
    assert ghost.status_code == 404

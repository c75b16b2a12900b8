"""Every endpoint of the HTTP API, through httpx and curl against the real port."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json

import httpx
import pytest

from sandboxd.daemon.assembly import Daemon
from tests.http.conftest import ADMIN, base_url

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def test_sandbox_lifecycle(client: httpx.AsyncClient) -> None:
    created = await client.post(
        "/v1/sandboxes", json={"instance_id": "box-1", "options": {"labels": {"team": "a"}}}
    )
    assert created.status_code == 201
    assert created.json()["created"] is True
    sandbox = created.json()["sandbox"]
    assert sandbox["instance_id"] == "box-1"
    assert sandbox["options"]["labels"] == {"team": "a"}
    assert sandbox["options"]["workdir"] == "/workspace"  # effective: defaults filled in

    again = await client.post("/v1/sandboxes", json={"instance_id": "box-1"})
    assert again.status_code == 200
    assert again.json()["created"] is False

    await client.post("/v1/sandboxes", json={"instance_id": "box-2"})
    got = await client.get("/v1/sandboxes/box-1")
    assert got.status_code == 200
    assert got.json() == sandbox

    listed = await client.get("/v1/sandboxes")
    assert [s["instance_id"] for s in listed.json()["sandboxes"]] == ["box-1", "box-2"]
    filtered = await client.get("/v1/sandboxes", params={"label": "team=a"})
    assert [s["instance_id"] for s in filtered.json()["sandboxes"]] == ["box-1"]

    deleted = await client.delete("/v1/sandboxes/box-1")
    assert deleted.status_code == 200
    assert deleted.json() == {"deleted": True}
    assert (await client.get("/v1/sandboxes/box-1")).status_code == 404


async def test_status(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/status")
    assert response.status_code == 200
    body = response.json()
    assert body["backend"] == "local"
    assert body["namespace"] == "default"
    assert body["pool"] == {"size": 0, "ready": 0, "served": 0, "started": 0}
    # The local backend has no disks, and says so.
    assert body["disk"]["enforced"] is False and body["disk"]["bytes"] == 0
    assert "local backend" in body["disk"]["reason"]


async def test_the_six_tools(client: httpx.AsyncClient) -> None:
    await client.post("/v1/sandboxes", json={"instance_id": "tools"})

    async def tool(name: str, arguments: object, **extra: object) -> dict[str, object]:
        response = await client.post(
            f"/v1/sandboxes/tools/tools/{name}", json={"arguments": arguments, **extra}
        )
        assert response.status_code == 200, response.text
        result: dict[str, object] = response.json()
        assert set(result) == {"text", "is_error", "fields"}
        return result

    written = await tool("write", {"file_path": "a.py", "content": "x = 1\n"})
    assert written["text"] == "Created a.py (1 line, 6 bytes)."
    # The raw JSON text a model produced works too.
    read = await tool("read", json.dumps({"file_path": "a.py"}))
    assert read["text"] == "     1\tx = 1"
    edited = await tool("edit", {"file_path": "a.py", "old_string": "1", "new_string": "2"})
    assert edited["is_error"] is False
    assert (await tool("grep", {"pattern": "x = 2"}))["text"] == "a.py"
    assert (await tool("glob", {"pattern": "*.py"}))["text"] == "a.py"
    ran = await tool("bash", {"command": "echo hi"}, tool_call_id="call-1")
    assert ran["text"] == "hi\n\nExit code: 0"
    replayed = await tool("bash", {"command": "echo hi"}, tool_call_id="call-1")
    assert replayed["fields"]["replayed"] is True  # type: ignore[index]
    # A tool's own failure is a result, not an HTTP error.
    missing = await tool("read", {"file_path": "nope.txt"})
    assert missing["is_error"] is True
    assert str(missing["text"]).startswith("Error: ")


async def test_files_and_exec(client: httpx.AsyncClient) -> None:
    await client.post("/v1/sandboxes", json={"instance_id": "files"})
    base = "/v1/sandboxes/files"
    made = await client.post(f"{base}/files/mkdir", json={"path": "d/e", "parents": True})
    assert made.json() == {"created": True}
    written = await client.put(
        f"{base}/files/content",
        json={"path": "d/e/f.bin", "data_base64": b64(b"\x00\x01hi"), "expected_sha256": "absent"},
    )
    assert written.status_code == 200
    assert written.json() == {
        "size": 4,
        "sha256": hashlib.sha256(b"\x00\x01hi").hexdigest(),
        "created": True,
    }
    read = await client.get(f"{base}/files/content", params={"path": "d/e/f.bin", "offset": 2})
    assert read.json() == {"data_base64": b64(b"hi"), "size": 4, "eof": True}
    stat = await client.get(f"{base}/files/stat", params={"path": "d/e/f.bin"})
    assert stat.json()["type"] == "file"
    assert stat.json()["size"] == 4
    listed = await client.get(f"{base}/files/list", params={"path": "d/e"})
    assert [e["name"] for e in listed.json()["entries"]] == ["f.bin"]
    exists = await client.get(f"{base}/files/exists", params={"path": "d"})
    assert exists.json() == {"exists": True, "type": "directory"}
    ran = await client.post(
        f"{base}/exec", json={"argv": ["cat", "d/e/f.bin"], "stdin_base64": b64(b"")}
    )
    assert ran.status_code == 200
    assert base64.b64decode(ran.json()["stdout_base64"]) == b"\x00\x01hi"
    assert ran.json()["exit_code"] == 0
    shell = await client.post(
        f"{base}/exec", json={"shell": "echo $X >&2; exit 3", "env": {"X": "y"}}
    )
    assert base64.b64decode(shell.json()["stderr_base64"]) == b"y\n"
    assert shell.json()["exit_code"] == 3
    removed = await client.post(f"{base}/files/remove", json={"path": "d", "recursive": True})
    assert removed.json() == {"removed": True}
    gone = await client.get(f"{base}/files/exists", params={"path": "d"})
    assert gone.json() == {"exists": False, "type": None}


async def test_exec_stream_sends_ndjson_events(client: httpx.AsyncClient) -> None:
    await client.post("/v1/sandboxes", json={"instance_id": "stream"})
    async with client.stream(
        "POST",
        "/v1/sandboxes/stream/exec/stream",
        json={"shell": "echo one; echo two >&2; exit 4"},
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/x-ndjson"
        events = [json.loads(line) async for line in response.aiter_lines() if line]
    output = {
        stream: b"".join(
            base64.b64decode(e["data_base64"]) for e in events if e.get("stream") == stream
        )
        for stream in ("stdout", "stderr")
    }
    assert output == {"stdout": b"one\n", "stderr": b"two\n"}
    assert events[-1]["exit"]["exit_code"] == 4
    assert events[-1]["exit"]["timed_out"] is False
    # A bad request fails with its own status before any stream starts.
    missing = await client.post("/v1/sandboxes/ghost/exec/stream", json={"shell": "true"})
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "NOT_FOUND"
    both = await client.post(
        "/v1/sandboxes/stream/exec/stream", json={"shell": "true", "argv": ["true"]}
    )
    assert both.status_code == 400
    assert both.json()["error"]["message"] == "give exactly one of argv and shell"


async def test_probes_need_no_token(anonymous: httpx.AsyncClient) -> None:
    assert (await anonymous.get("/healthz")).json() == {"status": "ok"}
    ready = await anonymous.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready"}


async def test_curl_creates_and_calls_a_tool(server: Daemon) -> None:
    """A client this project did not write, as the README shows it."""

    async def curl(*args: str) -> tuple[int, dict[str, object]]:
        process = await asyncio.create_subprocess_exec(
            "curl", "-sS", "-w", "\n%{http_code}", "-H", f"Authorization: Bearer {ADMIN}",
            "-H", "Content-Type: application/json", *args,
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await process.communicate()
        assert process.returncode == 0
        body, _, status = out.decode().rpartition("\n")
        return int(status), json.loads(body)

    url = base_url(server)
    status, body = await curl("-d", '{"instance_id": "curl-1"}', f"{url}/v1/sandboxes")
    assert status == 201
    assert body["created"] is True
    status, body = await curl(
        "-d",
        '{"arguments": {"file_path": "hello.txt", "content": "hello\\n"}}',
        f"{url}/v1/sandboxes/curl-1/tools/write",
    )
    assert status == 200
    assert body == {
        "text": "Created hello.txt (1 line, 6 bytes).",
        "is_error": False,
        "fields": body["fields"],
    }
    status, body = await curl(f"{url}/v1/sandboxes/ghost")
    assert status == 404
    assert body["error"] == {
        "code": "NOT_FOUND",
        "message": "no sandbox with instance id 'ghost'; create it with CreateSandbox",
    }


async def test_secrets_are_write_only(client: httpx.AsyncClient, server: Daemon) -> None:
    value = "http-secret-value-7a6b5c"
    secret = {"name": "TOKEN", "value": value, "hosts": ["API.test"], "env": "TOKEN"}
    created = await client.post(
        "/v1/sandboxes", json={"instance_id": "box-s", "options": {"secrets": [secret]}}
    )
    assert created.status_code == 201, created.text
    assert value not in created.text
    (shown,) = created.json()["sandbox"]["options"]["secrets"]
    assert shown == {
        "name": "TOKEN",
        "value": None,
        "hosts": ["api.test"],
        "env": "TOKEN",
        "file": "",
    }
    assert value not in (await client.get("/v1/sandboxes/box-s")).text
    assert list(server.secrets.for_host("box-s", "api.test").values()) == [value.encode()]
    bad = await client.post(
        "/v1/sandboxes",
        json={"instance_id": "box-t", "options": {"secrets": [{**secret, "value": value + "\n"}]}},
    )
    assert bad.status_code == 400 and value not in bad.text
    await client.delete("/v1/sandboxes/box-s")

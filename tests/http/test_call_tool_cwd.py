"""HTTP tool calls take the per-call folder (``cwd``) as CallTool does on gRPC."""

from __future__ import annotations

import httpx
import pytest

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]


async def _tool(
    client: httpx.AsyncClient, name: str, arguments: dict[str, object], **body: object
) -> httpx.Response:
    return await client.post(
        f"/v1/sandboxes/cwd-http/tools/{name}", json={"arguments": arguments, **body}
    )


async def test_relative_paths_and_bash_start_in_cwd(client: httpx.AsyncClient) -> None:
    await client.post("/v1/sandboxes", json={"instance_id": "cwd-http"})
    made = await _tool(client, "bash", {"command": "mkdir -p sub/deep && pwd"})
    root = made.json()["text"].splitlines()[0]
    wrote = await _tool(client, "write", {"file_path": "a.txt", "content": "one\n"}, cwd="sub")
    assert wrote.status_code == 200 and not wrote.json()["is_error"], wrote.text
    read = await _tool(client, "read", {"file_path": "sub/a.txt"})
    assert read.json()["text"] == "     1\tone"
    pwd = await _tool(client, "bash", {"command": "pwd"}, cwd=f"{root}/sub/deep")
    assert pwd.json()["text"].splitlines()[0] == f"{root}/sub/deep"
    # Absent, null and "" are the workdir; bash's saved cwd did not move.
    for body in ({}, {"cwd": None}, {"cwd": ""}):
        plain = await _tool(client, "bash", {"command": "pwd"}, **body)
        assert plain.json()["text"].splitlines()[0] == root


async def test_a_bad_cwd_gets_the_same_answers_as_grpc(client: httpx.AsyncClient) -> None:
    await client.post("/v1/sandboxes", json={"instance_id": "cwd-http"})
    root = (await _tool(client, "bash", {"command": "pwd"})).json()["text"].splitlines()[0]
    # A folder that is not there: the model's error, nothing written.
    missing = await _tool(client, "write", {"file_path": "x", "content": ""}, cwd="nope")
    assert missing.status_code == 200
    assert missing.json()["is_error"]
    assert missing.json()["text"].startswith(f"Error: the working folder {root}/nope")
    listed = await _tool(client, "glob", {"pattern": "**/x"})
    assert "x" not in listed.json()["text"].splitlines()
    # NUL or a wrong type: the caller's error (400), as INVALID_ARGUMENT on gRPC.
    nul = await _tool(client, "read", {"file_path": "x"}, cwd="a\x00b")
    assert nul.status_code == 400
    assert nul.json()["error"]["code"] == "INVALID_ARGUMENT" and "cwd" in nul.text
    typed = await _tool(client, "read", {"file_path": "x"}, cwd=7)
    assert typed.status_code == 400
    assert typed.json()["error"] == {
        "code": "INVALID_ARGUMENT",
        "message": "invalid request: cwd: Input should be a valid string",
    }

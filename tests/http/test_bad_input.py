"""Input no transport may turn into a 500: lone surrogates and deep nesting (issue 15)."""

from __future__ import annotations

import httpx
import pytest

from sandboxd.contract.validation import MAX_JSON_DEPTH

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

# JSON text: "\ud800" is a valid JSON escape that decodes to a lone surrogate.
SURROGATE_TOOL = '{"arguments": {"file_path": "d/s\\ud800x"}}'
SURROGATE_TEXT_ARGS = '{"arguments": "{\\"file_path\\": \\"d/s\\\\ud800x\\"}"}'
SURROGATE_FILE = '{"path": "d/s\\ud800x"}'


async def _post(client: httpx.AsyncClient, url: str, body: str) -> httpx.Response:
    return await client.post(url, content=body, headers={"content-type": "application/json"})


async def test_lone_surrogates_are_400(client: httpx.AsyncClient) -> None:
    await client.post("/v1/sandboxes", json={"instance_id": "bad-input"})
    base = "/v1/sandboxes/bad-input"
    for url, body in (
        (f"{base}/tools/read", SURROGATE_TOOL),
        (f"{base}/tools/read", SURROGATE_TEXT_ARGS),
        (f"{base}/files/mkdir", SURROGATE_FILE),
        (f"{base}/files/remove", SURROGATE_FILE),
    ):
        response = await _post(client, url, body)
        assert response.status_code == 400, (url, response.text)
        error = response.json()["error"]
        assert error["code"] == "INVALID_ARGUMENT"
        assert "surrogate" in error["message"], error
    # Nothing was created by the refused calls; the sandbox still works.
    listed = await client.get(f"{base}/files/list", params={"path": "."})
    assert listed.status_code == 200, listed.text


async def test_deep_nesting_is_400(client: httpx.AsyncClient) -> None:
    await client.post("/v1/sandboxes", json={"instance_id": "deep-input"})
    url = "/v1/sandboxes/deep-input/tools/read"
    for depth in (MAX_JSON_DEPTH + 1, 5_000):
        nested = "[" * depth + "]" * depth
        text_args = '{"arguments": "{\\"x\\": ' + nested + '}"}'
        response = await _post(client, url, text_args)
        assert response.status_code == 400, response.text[:300]
        assert "nests deeper" in response.json()["error"]["message"]

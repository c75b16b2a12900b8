"""Streamed transfers and fork over HTTP: raw bodies both ways, never buffered whole."""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import AsyncIterator

import httpx
import pytest

from sandboxd.contract.models import FORK_METHODS

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

MiB = 1 << 20


async def _create(client: httpx.AsyncClient, instance: str) -> None:
    response = await client.post("/v1/sandboxes", json={"instance_id": instance})
    assert response.status_code == 201, response.text


async def test_upload_and_download_past_the_payload_limit(client: httpx.AsyncClient) -> None:
    await _create(client, "up")
    size = 12 * MiB  # the tier's payload limit is 64 KiB

    async def body() -> AsyncIterator[bytes]:
        for i in range(size // MiB):
            yield bytes([i]) * MiB

    expected = hashlib.sha256(b"".join([bytes([i]) * MiB for i in range(size // MiB)]))
    response = await client.put(
        "/v1/sandboxes/up/files/upload",
        params={"path": "data/big.bin", "create_parents": True, "mode": 0o600},
        content=body(),
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"size": size, "sha256": expected.hexdigest(), "created": True}
    digest = hashlib.sha256()
    async with client.stream(
        "GET", "/v1/sandboxes/up/files/download", params={"path": "data/big.bin"}
    ) as streamed:
        assert streamed.status_code == 200
        async for chunk in streamed.aiter_bytes():
            digest.update(chunk)
    assert digest.hexdigest() == expected.hexdigest()
    conflict = await client.put(
        "/v1/sandboxes/up/files/upload",
        params={"path": "data/big.bin", "expected_sha256": "absent"},
        content=b"x",
    )
    assert conflict.status_code == 412
    missing = await client.get("/v1/sandboxes/up/files/download", params={"path": "nope"})
    assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]


async def test_tree_up_down_and_a_hostile_entry(client: httpx.AsyncClient) -> None:
    await _create(client, "tree")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("src/a.txt")
        info.size, info.mode = 5, 0o640
        tar.addfile(info, io.BytesIO(b"hello"))
        link = tarfile.TarInfo("src/link")
        link.type, link.linkname = tarfile.SYMTYPE, "a.txt"
        tar.addfile(link)
    response = await client.put(
        "/v1/sandboxes/tree/tree/upload", params={"path": "proj"}, content=buffer.getvalue()
    )
    assert response.status_code == 200, response.text
    assert response.json()["files"] == 1 and response.json()["symlinks"] == 1
    down = await client.get("/v1/sandboxes/tree/tree/download", params={"path": "proj"})
    assert down.status_code == 200 and down.headers["content-type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(down.content)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert members["src/link"].linkname == "a.txt"
        assert members["src/a.txt"].mode == 0o640
    hostile = io.BytesIO()
    with tarfile.open(fileobj=hostile, mode="w") as tar:
        evil = tarfile.TarInfo("../escape.txt")
        tar.addfile(evil, io.BytesIO(b""))
    refused = await client.put(
        "/v1/sandboxes/tree/tree/upload", params={"path": "proj"}, content=hostile.getvalue()
    )
    assert refused.status_code == 400
    assert "'../escape.txt'" in refused.json()["error"]["message"]


async def test_fork(client: httpx.AsyncClient) -> None:
    await _create(client, "src")
    await client.put("/v1/sandboxes/src/files/upload", params={"path": "f.txt"}, content=b"forked")
    response = await client.post("/v1/sandboxes/src/fork", json={"new_id": "dst"})
    assert response.status_code == 201, response.text
    assert response.json()["method"] in FORK_METHODS
    assert response.json()["sandbox"]["instance_id"] == "dst"
    got = await client.get("/v1/sandboxes/dst/files/download", params={"path": "f.txt"})
    assert got.content == b"forked"
    again = await client.post("/v1/sandboxes/src/fork", json={"new_id": "dst"})
    assert again.status_code == 409
    missing = await client.post("/v1/sandboxes/ghost/fork", json={"new_id": "x"})
    assert missing.status_code == 404

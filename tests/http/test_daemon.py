"""The real command: `sandboxd serve --http ...` serves HTTP and stops on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
from pathlib import Path

import httpx
import pytest

from tests.http.conftest import ADMIN

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

REPO = Path(__file__).resolve().parents[2]  # so `-m sandboxd` is this checkout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.timeout(60)
async def test_serve_with_http_then_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sandboxd", "serve",
        "--backend", "local", "--local-root", str(tmp_path / "root"),
        "--socket", str(tmp_path / "s.sock"),
        "--http", f"127.0.0.1:{port}", "--token", ADMIN,
        "--access-log", "true", "--drain-seconds", "2",
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
    )  # fmt: skip
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {ADMIN}"}
        ) as client:
            for _ in range(200):
                try:
                    if (await client.get("/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
            else:
                pytest.fail("the daemon never became ready")
            created = await client.post("/v1/sandboxes", json={"instance_id": "proc-1"})
            assert created.status_code == 201
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0
    lines = [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]
    access = [entry for entry in lines if entry["logger"] == "sandboxd.access"]
    assert access[0]["method"] == "CreateSandbox"
    assert access[0]["instance_id"] == "proc-1"
    assert access[0]["status"] == "OK"
    assert lines[-1]["msg"] == "sandboxd stopped"
    assert ADMIN not in stderr.decode()  # the token is never logged

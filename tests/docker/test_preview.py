"""Preview on real containers (runc and runsc), network off: a daemon with
its HTTP listener and a preview domain; a dev-server-like app inside
(tests/docker/preview_site.py: a page whose script opens a WebSocket to the
same host); a real headless Chromium loads the page through the preview and
its WebSocket connects with the page's Host."""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from wsproto import ConnectionType, WSConnection
from wsproto import events as ws

from runtime_client import GrpcSandboxFactory, Sandbox
from sandboxd.contract.models import Runtime, SandboxOptions
from tests.docker_fixtures import IMAGE, RUN_PREFIX
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(300)]

DOMAIN = "preview.test"
TOKEN = "preview-admin-token-0123456789abcdef"
SITE = Path(__file__).with_name("preview_site.py")
RUNTIMES = [Runtime.RUNC, Runtime.RUNSC]


@pytest.fixture(scope="module")
def preview_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    folder = tmp_path_factory.mktemp("preview")
    (folder / "tokens").write_text(f"{TOKEN}\n")
    with __import__("socket").socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    daemon = Daemon(
        folder / "s.sock",
        "--namespace", f"{RUN_PREFIX}-preview",
        "--image", IMAGE,
        "--pool-size", "0",
        "--http", f"127.0.0.1:{port}",
        "--tokens-file", str(folder / "tokens"),
        "--preview-domain", DOMAIN,
    ).start()  # fmt: skip
    daemon.http_port = port  # type: ignore[attr-defined]
    try:
        yield daemon
    finally:
        daemon.stop()


async def _site(daemon: Daemon, runtime: Runtime, port: int) -> tuple[Sandbox, str]:
    factory = GrpcSandboxFactory(daemon.target)
    name = f"pv-{runtime.value}-{secrets.token_hex(3)}"
    await factory.transport.create_sandbox(name, SandboxOptions(runtime=runtime))
    box = Sandbox(factory.transport, name)
    await box.write_file("/tmp/site.py", SITE.read_bytes())
    await box.start_process(["python3", "/tmp/site.py", "::1", str(port)])
    with anyio.fail_after(30):
        while not any(p.port == port for p in await box.list_ports()):  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    return box, name


async def _websocket(http_port: int, host: str, target: str, cookie: str) -> list[str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", http_port)
    conn = WSConnection(ConnectionType.CLIENT)
    writer.write(
        conn.send(
            ws.Request(host=host, target=target, extra_headers=[(b"cookie", cookie.encode())])
        )
    )
    got: list[str] = []
    while len(got) < 2:
        data = await asyncio.wait_for(reader.read(65536), 20)
        assert data, got
        conn.receive_data(data)
        for event in conn.events():
            if isinstance(event, ws.AcceptConnection):
                writer.write(conn.send(ws.Message(data="hi")))
            elif isinstance(event, ws.RejectConnection):
                return [f"rejected {event.status_code}"]
            elif isinstance(event, ws.TextMessage):
                got.append(event.data)
    writer.close()
    return got


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_a_page_and_its_websocket_through_the_preview(
    preview_daemon: Daemon, runtime: Runtime
) -> None:
    http_port: int = preview_daemon.http_port  # type: ignore[attr-defined]
    box, name = await _site(preview_daemon, runtime, 5173)
    try:
        preview = await box.create_preview(5173, ttl_s=300)
        base = f"http://127.0.0.1:{http_port}"
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            page = await client.get(preview.path)
            assert page.status_code == 200 and "served from inside" in page.text
            # The signed URL's cookie (in the client's jar) opens the page again.
            assert (await client.get(f"/v1/sandboxes/{name}/ports/5173/")).status_code == 200
        async with httpx.AsyncClient(base_url=base, timeout=30) as anonymous:
            assert (await anonymous.get(f"/v1/sandboxes/{name}/ports/5173/")).status_code == 403
        cookie = f"sandboxd_preview={preview.token}"
        host = f"127.0.0.1:{http_port}"
        got = await _websocket(http_port, host, f"/v1/sandboxes/{name}/ports/5173/ws", cookie)
        assert json.loads(got[0]) == {"host": host} and got[1] == "echo:hi"
        preview_host = f"5173-{name}.{DOMAIN}"
        got = await _websocket(http_port, preview_host, "/ws", cookie)
        assert json.loads(got[0]) == {"host": preview_host} and got[1] == "echo:hi"
        await box.delete()
        async with httpx.AsyncClient(base_url=base, timeout=30) as anonymous:
            assert (await anonymous.get(preview.path)).status_code == 403
    finally:
        await box._transport.close()  # type: ignore[attr-defined]


async def _chromium_report(box: Sandbox, url: str, profile: Path, *extra: str) -> str:
    """Load ``url`` in a real headless Chromium; what the page reported back
    through its WebSocket (the page's text) as the sandbox's server saw it."""
    browser = shutil.which("chromium")
    assert browser, "chromium is not installed (make host-tools installs it)"
    await box.exec("rm -f /tmp/browser-report")
    process = await asyncio.create_subprocess_exec(
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}", *extra, url,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with anyio.fail_after(60):
            while not (await box.exists("/tmp/browser-report")).exists:  # noqa: ASYNC110
                await asyncio.sleep(0.2)
        return (await box.read_file("/tmp/browser-report")).data.decode()
    finally:
        process.terminate()
        await process.wait()


async def test_headless_chromium_loads_the_page_and_its_websocket(
    preview_daemon: Daemon, tmp_path: Path
) -> None:
    http_port: int = preview_daemon.http_port  # type: ignore[attr-defined]
    box, name = await _site(preview_daemon, Runtime.RUNC, 5173)
    try:
        preview = await box.create_preview(5173, ttl_s=300)
        # Path-based: the signed URL, as handed to a browser.
        url = f"http://127.0.0.1:{http_port}{preview.path}"
        report = await _chromium_report(box, url, tmp_path / "a")
        print(f"\nChromium, path-based: {report}")
        assert report == (
            "served from inside the sandbox | "
            f"websocket ok, host 127.0.0.1:{http_port} (same as the page)"
        )
        # Host-based: {port}-{id}.<domain>, as a dev server with absolute URLs needs.
        host = f"5173-{name}.{DOMAIN}:{http_port}"
        query = preview.path.partition("?")[2]
        report = await _chromium_report(
            box, f"http://{host}/?{query}", tmp_path / "b",
            f"--host-resolver-rules=MAP *.{DOMAIN} 127.0.0.1",
        )  # fmt: skip
        print(f"Chromium, host-based: {report}")
        assert report.endswith(f"websocket ok, host {host} (same as the page)")
    finally:
        await box.delete()
        await box._transport.close()  # type: ignore[attr-defined]

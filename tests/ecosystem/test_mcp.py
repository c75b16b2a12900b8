"""``sandboxd mcp`` through the official MCP SDK's own client, stdio and HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from runtime_client import GrpcSandboxFactory, NotFound
from sandboxd.contract.tools import SPECS
from sandboxd.transports.http.connection_limits import DEFAULT_LIMITS
from tests.ecosystem.conftest import free_port
from tests.helpers import ROOT, Daemon

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

SIX = ["read", "write", "edit", "bash", "grep", "glob", "bash_output", "kill_shell"]
# The tools that only look, as their specs say; the others may destroy.
READ_ONLY = {name for name, spec in SPECS.items() if spec.read_only}


def _text(result: CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def _bridge_args(target: str, instance: str, *extra: str) -> list[str]:
    return ["-m", "sandboxd", "mcp", "--target", target, "--instance", instance, *extra]


@asynccontextmanager
async def _stdio_session(daemon: Daemon, instance: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=_bridge_args(daemon.target, instance), cwd=str(ROOT)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def _exercise(session: ClientSession) -> None:
    listed = await session.list_tools()
    assert [tool.name for tool in listed.tools] == SIX
    schemas = {tool.name: tool.input_schema for tool in listed.tools}
    assert schemas["read"]["required"] == ["file_path"]
    assert set(schemas["edit"]["properties"]) >= {"file_path", "old_string", "new_string"}
    assert all(tool.description for tool in listed.tools)
    # The hints MCP hosts decide approvals by, as the tools' specs say.
    hints = {tool.name: tool.annotations for tool in listed.tools}
    assert {name for name, hint in hints.items() if hint and hint.read_only_hint} == READ_ONLY
    assert {name for name, hint in hints.items() if hint and hint.destructive_hint} == (
        set(SIX) - READ_ONLY
    )

    wrote = await session.call_tool(
        "write", {"file_path": "src/app.py", "content": "print('hi')\nTOKEN = 1\n"}
    )
    assert not wrote.is_error
    assert _text(wrote) == "Created src/app.py (2 lines, 22 bytes)."

    read = await session.call_tool("read", {"file_path": "src/app.py"})
    assert _text(read) == "     1\tprint('hi')\n     2\tTOKEN = 1"

    ran = await session.call_tool("bash", {"command": "python3 src/app.py; echo done"})
    assert not ran.is_error
    assert _text(ran).startswith("hi\ndone")
    assert "Exit code: 0" in _text(ran)
    assert (ran.meta or {})["sandboxd/fields"]["exit_code"] == 0

    found = await session.call_tool("grep", {"pattern": "TOKEN", "output_mode": "content"})
    assert _text(found) == "src/app.py:2:TOKEN = 1"

    started = await session.call_tool("bash", {"command": "echo job", "run_in_background": True})
    assert 'bash_id="bash_1"' in _text(started)
    followed = await session.call_tool("bash_output", {"bash_id": "bash_1"})
    assert not followed.is_error and "Status: " in _text(followed)
    stopped = await session.call_tool("kill_shell", {"shell_id": "bash_1"})
    assert not stopped.is_error and "bash_1" in _text(stopped)

    # An alias (path -> file_path) passes through to sandboxd, which accepts it.
    aliased = await session.call_tool("read", {"path": "src/app.py", "limit": "1"})
    assert not aliased.is_error


async def test_stdio_bridge_serves_the_six_tools(local_daemon: Daemon) -> None:
    instance = f"mcp-{secrets.token_hex(3)}"
    async with _stdio_session(local_daemon, instance) as session:
        await _exercise(session)
    # The bridge created the instance; it stays for the next client.
    async with GrpcSandboxFactory(local_daemon.target) as factory:
        info = await factory.transport.get_sandbox(instance)
        assert info.instance_id == instance
        await factory.transport.delete_sandbox(instance)
        with pytest.raises(NotFound):
            await factory.transport.get_sandbox(instance)


async def test_stdio_errors_are_results_with_is_error(local_daemon: Daemon) -> None:
    async with _stdio_session(local_daemon, f"mcp-{secrets.token_hex(3)}") as session:
        missing = await session.call_tool("read", {"file_path": "nope.txt"})
        assert missing.is_error
        assert _text(missing).startswith("Error: ")

        unknown_key = await session.call_tool("glob", {"pattern": "*", "colour": "red"})
        assert unknown_key.is_error
        assert "colour" in _text(unknown_key)

        failed = await session.call_tool("bash", {"command": "exit 3"})
        assert failed.is_error
        assert "Exit code: 3" in _text(failed)

        no_such_tool = await session.call_tool("rm_rf", {})
        assert no_such_tool.is_error
        assert "read, write, edit, bash, grep, glob" in _text(no_such_tool)


@pytest.fixture
def http_bridge(local_daemon: Daemon) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            *_bridge_args(
                local_daemon.target, f"mcp-{secrets.token_hex(3)}", "--transport", "http"
            ),
            "--port",
            str(port),
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            try:
                httpx.get(url, timeout=0.5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the HTTP bridge did not start"
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_streamable_http_bridge(http_bridge: str) -> None:
    async with (
        streamable_http_client(http_bridge) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await _exercise(session)
        missing = await session.call_tool("read", {"file_path": "missing.txt"})
        assert missing.is_error


async def test_the_http_bridge_closes_a_dripping_request_head(http_bridge: str) -> None:
    # The daemon's slow-client guard, default limits (sandboxd.transports.http.connection_limits).
    port = int(http_bridge.rsplit(":", 1)[1].split("/")[0])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")

    async def drip() -> None:
        with contextlib.suppress(ConnectionError):
            for i in range(300):
                writer.write(f"X-Drip-{i}: {i}\r\n".encode())
                await writer.drain()
                await asyncio.sleep(0.2)

    async def head_then_close() -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        with contextlib.suppress(ConnectionResetError):
            while await reader.read(65536):
                pass  # to the close
        return head

    dripping = asyncio.create_task(drip())
    try:
        # wait_for, not asyncio.timeout: the client's tests run on 3.10 too.
        head = await asyncio.wait_for(head_then_close(), DEFAULT_LIMITS.header_timeout_s + 30)
        assert head.startswith(b"HTTP/1.1 408 "), head
    finally:
        dripping.cancel()
        writer.close()


def test_bridge_without_a_daemon_says_so(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, *_bridge_args(f"unix://{tmp_path}/none.sock", "x")],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("sandboxd mcp: ")

"""Drive sandboxd's MCP bridge with the official MCP SDK client, as an MCP host would.

    python examples/mcp_client.py --instance mcp-demo
    python examples/mcp_client.py --instance mcp-demo --url http://127.0.0.1:8765/mcp

Without ``--url`` it spawns ``sandboxd mcp`` itself (stdio); with it, it joins a
bridge started with ``sandboxd mcp --transport http``. Either way it lists the
six tools, writes a file, runs it, and shows a tool error as ``isError``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent


@asynccontextmanager
async def connect(args: argparse.Namespace) -> AsyncIterator[ClientSession]:
    if args.url:
        async with (
            streamable_http_client(args.url) as (read, write),
            ClientSession(read, write) as session,
        ):
            yield session
        return
    bridge = ["-m", "sandboxd", "mcp", "--target", args.target, "--instance", args.instance]
    server = StdioServerParameters(command=sys.executable, args=bridge)
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        yield session


def show(name: str, result: CallToolResult) -> None:
    text = "".join(block.text for block in result.content if isinstance(block, TextContent))
    print(f"{name} (isError={result.is_error}):\n{text}\n")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instance", default="mcp-demo")
    parser.add_argument("--target", default="unix:///run/sandboxd/sandboxd.sock")
    parser.add_argument("--url", help="a running HTTP bridge, e.g. http://127.0.0.1:8765/mcp")
    args = parser.parse_args()

    async with connect(args) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        print("tools:", ", ".join(tool.name for tool in tools), "\n")
        show(
            "write",
            await session.call_tool("write", {"file_path": "hi.py", "content": "print('hi')\n"}),
        )
        show("bash", await session.call_tool("bash", {"command": "python3 hi.py"}))
        show("read", await session.call_tool("read", {"file_path": "missing.txt"}))


if __name__ == "__main__":
    asyncio.run(main())

"""``sandboxd mcp``: one instance's six tools over the Model Context Protocol.

    sandboxd mcp --target unix:///run/sandboxd/sandboxd.sock --instance agent-42
    sandboxd mcp --target ... --instance agent-42 --transport http --port 8765

A bridge, not a second server: it is a gRPC client of a running sandboxd
(``GrpcSandboxFactory``) and an MCP server (the official SDK's low-level
``Server``) for whoever spawned it. Each ``tools/call`` hands the client's
arguments to ``Sandbox.call_tool`` untouched, so sandboxd's one implementation
judges aliases, coercion and unknown keys, exactly as for the agent runtime.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any, Literal

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from runtime_client.errors import SandboxdError
from runtime_client.factories import GrpcSandboxFactory
from runtime_client.sandbox import Sandbox
from runtime_client.sandbox_tools import DESCRIPTIONS, SANDBOX_TOOL_NAMES, SCHEMAS
from sandboxd import __version__
from sandboxd.contract.models import NetworkPolicy, SandboxOptions
from sandboxd.contract.network import describe
from sandboxd.contract.tools import read_only

log = logging.getLogger(__name__)

Transport = Literal["stdio", "http"]

# Programs may want the structured fields (exit code, counts, next offset);
# they go in _meta so that a client feeding structuredContent to its model
# still shows the model the tool's own text.
FIELDS_META_KEY = "sandboxd/fields"


def tool_annotations(name: str) -> types.ToolAnnotations:
    """What an MCP host may assume of a call (it decides approvals with it): a
    read-only tool changes nothing; every other tool may write, delete or run
    anything in the workspace. From the tool's spec (``ToolSpec.read_only``)."""
    if read_only(name):
        return types.ToolAnnotations(read_only_hint=True)
    return types.ToolAnnotations(read_only_hint=False, destructive_hint=True)


def tool_list() -> list[types.Tool]:
    """The six tools with the schemas the agent runtime exports (TOOLS.md names)."""
    return [
        types.Tool(
            name=name,
            description=DESCRIPTIONS[name],
            input_schema=dict(SCHEMAS[name]),
            annotations=tool_annotations(name),
        )
        for name in SANDBOX_TOOL_NAMES
    ]


def _text_result(
    text: str, *, is_error: bool, fields: dict[str, Any] | None = None
) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        is_error=is_error,
        meta={FIELDS_META_KEY: fields} if fields is not None else None,
    )


def build_server(sandbox: Sandbox, policy: NetworkPolicy | None = None) -> Server[Any]:
    """An MCP server whose tools run in ``sandbox``; the model is told what
    ``policy`` lets it reach. Changing the policy is no tool: the model is
    whom the policy bounds (``sandboxctl net set``, the Network RPCs)."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in SCHEMAS:
            return _text_result(
                f"Error: no tool named {params.name!r}. "
                f"The tools are: {', '.join(SANDBOX_TOOL_NAMES)}.",
                is_error=True,
            )
        try:
            result = await sandbox.call_tool(params.name, params.arguments or {})
        except SandboxdError as exc:
            # A broken or missing sandbox is still the model's to hear about:
            # an error result, not a protocol error that ends the client's turn.
            log.warning("%s in %s failed: %s", params.name, sandbox.instance_id, exc)
            return _text_result(
                f"Error: the sandbox could not run {params.name}: {exc}", is_error=True
            )
        return _text_result(result.text, is_error=result.is_error, fields=dict(result.fields))

    return Server(
        "sandboxd",
        version=__version__,
        instructions=(
            f"Tools run in the isolated workspace of sandbox instance {sandbox.instance_id!r}; "
            "relative paths are relative to its working folder (default /workspace). "
            + describe(policy or NetworkPolicy())
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


@contextlib.asynccontextmanager
async def open_sandbox(
    target: str, instance_id: str, token: str | None, network: NetworkPolicy | None = None
) -> AsyncIterator[Sandbox]:
    """The instance's sandbox, created if missing (CreateSandbox is idempotent;
    a ``network`` policy other than the existing sandbox's is ALREADY_EXISTS)."""
    options = SandboxOptions(network=network)
    async with GrpcSandboxFactory(target, token=token, options=options) as factory:
        yield await factory.create_sandbox(instance_id)


async def serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(server: Server[Any], host: str, port: int) -> None:
    import uvicorn  # an mcp dependency; only the HTTP transport needs it

    # The daemon's slow-client guard subclasses uvicorn's protocol: HTTP mode only, too.
    from sandboxd.transports.http.connection_limits import DEFAULT_LIMITS
    from sandboxd.transports.http.guard import guarded_protocol

    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        http=guarded_protocol(DEFAULT_LIMITS),  # the daemon's slow-client protection
    )
    # Serve on this loop: the gRPC channel under the sandbox belongs to it.
    await uvicorn.Server(config).serve()


async def run_bridge(
    target: str,
    instance_id: str,
    *,
    token: str | None = None,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    network: NetworkPolicy | None = None,
) -> None:
    async with open_sandbox(target, instance_id, token, network) as sandbox:
        server = build_server(sandbox, (await sandbox.info()).options.network)
        if transport == "stdio":
            await serve_stdio(server)
        else:
            log.info(
                "MCP streamable HTTP on http://%s:%d/mcp (instance %s)", host, port, instance_id
            )
            await serve_http(server, host, port)

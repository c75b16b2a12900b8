"""The Claude Agent SDK on sandboxd: Claude Code's own tools off, sandboxd's in their place.

    from claude_agent_sdk import query
    from runtime_client.contrib.claude_agent_sdk import sandboxd_options

    options = sandboxd_options("agent-42", target="unix:///run/sandboxd/sandboxd.sock")
    async for message in query(prompt="Fix the failing test", options=options):
        print(message)

The SDK drives the Claude Code CLI, which has no sandbox backend to swap; it
takes MCP servers. So the model gets the workspace's tools from ``sandboxd
mcp`` (``mcp__sandboxd__read``, ``..._write``, ``..._bash``, ...), started by
Claude Code over stdio, and none of Claude Code's built-in tools: ``tools=[]``
switches them all off, and the ones that act on the machine Claude Code runs
on are disallowed as well, so widening ``tools`` cannot bring them back. No
other MCP server comes along from settings files or a project's ``.mcp.json``.

Approvals: the tools that only look (read, grep, glob, bash_output: the
bridge marks them ``readOnlyHint``) are allowed without asking; the others
(``destructiveHint``) go through Claude Code's permission mode or your
``can_use_tool``, unless ``auto_approve`` names them too.

Nothing here imports the SDK until ``sandboxd_options`` is called; the
machine that runs the bridge needs ``pip install 'sandboxd[mcp]'``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from runtime_client.factories import DEFAULT_TARGET
from sandboxd.contract.tools import TOOL_NAMES, read_only

if TYPE_CHECKING:
    from claude_agent_sdk import ClaudeAgentOptions
    from claude_agent_sdk.types import McpStdioServerConfig

#: The MCP server's name in Claude Code: its tools are ``mcp__sandboxd__<tool>``.
SERVER_NAME = "sandboxd"
#: Claude Code's built-in tools that act on the machine Claude Code runs on (files,
#: processes, git worktrees), current names and those of earlier CLI releases.
HOST_TOOLS = (
    "Bash",
    "BashOutput",
    "KillShell",
    "Monitor",
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "Glob",
    "Grep",
    "LS",
    "EnterWorktree",
    "ExitWorktree",
)
#: The sandboxd tools that only look, allowed without asking by default.
READ_ONLY_TOOLS = tuple(name for name in TOOL_NAMES if read_only(name))


def tool_name(tool: str) -> str:
    """The name Claude Code gives a sandboxd tool (``mcp__sandboxd__read``)."""
    return f"mcp__{SERVER_NAME}__{tool}"


def mcp_server(
    instance_id: str,
    *,
    target: str = DEFAULT_TARGET,
    token: str | None = None,
    python: str = sys.executable,
) -> McpStdioServerConfig:
    """The stdio MCP server entry that runs ``sandboxd mcp`` for ``instance_id``.

    The token travels in the bridge's environment, never on its command line.
    """
    config: dict[str, Any] = {
        "type": "stdio",
        "command": python,
        "args": ["-m", "sandboxd", "mcp", "--target", target, "--instance", instance_id],
    }
    if token is not None:
        config["env"] = {"SANDBOXD_TOKEN": token}
    return config  # type: ignore[return-value]


def sandboxd_options(
    instance_id: str,
    *,
    target: str = DEFAULT_TARGET,
    token: str | None = None,
    auto_approve: Iterable[str] = READ_ONLY_TOOLS,
    builtin_tools: Sequence[str] = (),
    python: str = sys.executable,
    **options: Any,
) -> ClaudeAgentOptions:
    """``ClaudeAgentOptions`` whose only workspace is sandboxd's ``instance_id``.

    ``auto_approve`` names the sandboxd tools allowed without asking;
    ``builtin_tools`` the Claude Code tools to keep (none by default; the
    ``HOST_TOOLS`` stay off whatever it says). Other keywords go to
    ``ClaudeAgentOptions`` as they are (``model``, ``cwd``, ``env``,
    ``permission_mode``, ...).
    """
    from claude_agent_sdk import ClaudeAgentOptions

    unknown = sorted(set(auto_approve) - set(TOOL_NAMES))
    if unknown:
        raise ValueError(f"no sandboxd tool named {', '.join(unknown)}; the tools are {TOOL_NAMES}")
    servers = {SERVER_NAME: mcp_server(instance_id, target=target, token=token, python=python)}
    return ClaudeAgentOptions(
        mcp_servers=servers,  # type: ignore[arg-type]
        strict_mcp_config=True,  # no other server from settings files or a project's .mcp.json
        tools=list(builtin_tools),
        disallowed_tools=list(HOST_TOOLS),
        allowed_tools=[tool_name(tool) for tool in auto_approve],
        **options,
    )


__all__ = [
    "HOST_TOOLS",
    "READ_ONLY_TOOLS",
    "SERVER_NAME",
    "mcp_server",
    "sandboxd_options",
    "tool_name",
]

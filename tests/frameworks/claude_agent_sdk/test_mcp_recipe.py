"""The Claude Agent SDK recipe: ``sandboxd mcp`` in place of Claude Code's own tools.

Checked the way the SDK uses it: the options are its own ``ClaudeAgentOptions``
and turn into the Claude Code command line by its own transport; then the
Claude Code CLI the SDK bundles runs for real, its agent loop driven by a
scripted model behind the Anthropic API (``scripted_anthropic``), and works in
a sandboxd workspace through the MCP bridge.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import typing
from pathlib import Path
from typing import Any

import claude_agent_sdk
import pytest
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, SystemMessage, query
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport
from claude_agent_sdk.types import McpStdioServerConfig

from runtime_client.contrib._common import transport_for
from runtime_client.contrib.claude_agent_sdk import (
    HOST_TOOLS,
    READ_ONLY_TOOLS,
    sandboxd_options,
    tool_name,
)
from runtime_client.errors import NotFound
from runtime_client.sandbox import Sandbox
from sandboxd.contract.tools import TOOL_NAMES
from tests.frameworks.claude_agent_sdk.scripted_anthropic import Text, ToolUse, Turn, serve
from tests.helpers import Daemon

pytestmark = pytest.mark.anyio

BUNDLED_CLI = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
SANDBOXD_TOOLS = {tool_name(tool) for tool in TOOL_NAMES}


def _claude_env(model_url: str, home: Path) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": model_url,
        "ANTHROPIC_API_KEY": "sk-scripted",  # reaches nothing but the scripted model
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "HOME": str(home),  # Claude Code's settings and transcripts stay in the test's folder
        # Otherwise MCP tools hide behind ToolSearch until the model asks; the script calls them.
        "ENABLE_TOOL_SEARCH": "false",
    }


@pytest.fixture
def instance_id() -> str:
    return f"claude-{secrets.token_hex(3)}"  # the bridge creates it; each test removes it


async def _remove(target: str, instance_id: str) -> None:
    with contextlib.suppress(NotFound):
        await Sandbox(transport_for(target), instance_id).delete()


def _flags(command: list[str]) -> dict[str, str]:
    flags: dict[str, str] = {}
    for index, part in enumerate(command):
        if part.startswith("--"):
            following = command[index + 1] if index + 1 < len(command) else ""
            flags[part] = "" if following.startswith("--") else following
    return flags


def test_the_recipe_is_the_sdks_options_and_becomes_its_command_line() -> None:
    options = sandboxd_options(
        "agent-1", target="unix:///run/x.sock", token="s3cret", cli_path=BUNDLED_CLI
    )
    assert isinstance(options, ClaudeAgentOptions)
    assert isinstance(options.mcp_servers, dict)
    server: Any = options.mcp_servers["sandboxd"]
    assert set(server) <= set(typing.get_type_hints(McpStdioServerConfig))
    assert server == {
        "type": "stdio",
        "command": server["command"],
        "args": [
            "-m",
            "sandboxd",
            "mcp",
            "--target",
            "unix:///run/x.sock",
            "--instance",
            "agent-1",
        ],
        "env": {"SANDBOXD_TOKEN": "s3cret"},  # in the bridge's environment, not its argv
    }

    flags = _flags(SubprocessCLITransport(prompt="hi", options=options)._build_command())
    assert json.loads(flags["--mcp-config"]) == {"mcpServers": {"sandboxd": server}}
    assert flags["--tools"] == ""  # every built-in tool off
    assert flags["--disallowedTools"].split(",") == list(HOST_TOOLS)
    assert flags["--allowedTools"].split(",") == [tool_name(t) for t in READ_ONLY_TOOLS]
    assert "--strict-mcp-config" in flags  # no other MCP server from settings or .mcp.json
    with pytest.raises(ValueError, match="no sandboxd tool named rm"):
        sandboxd_options("agent-1", auto_approve=["read", "rm"])


async def _run(options: ClaudeAgentOptions, prompt: str) -> tuple[dict[str, Any], ResultMessage]:
    init: dict[str, Any] = {}
    result: ResultMessage | None = None
    async for message in query(prompt=prompt, options=options):
        if isinstance(message, SystemMessage) and message.subtype == "init":
            init = message.data
        if isinstance(message, ResultMessage):
            result = message
    assert result is not None
    return init, result


async def test_claude_code_writes_runs_and_reads_in_a_workspace(
    frameworks_daemon: Daemon, instance_id: str, tmp_path: Path
) -> None:
    """Claude Code's own agent loop, its tools all sandboxd's: write, run, read."""
    turns: list[Turn] = [
        ToolUse(tool_name("write"), {"file_path": "answer.py", "content": "print(6 * 7)\n"}),
        ToolUse(tool_name("bash"), {"command": "python3 answer.py > out.txt"}),
        ToolUse(tool_name("read"), {"file_path": "out.txt"}),
        Text("The program printed 42."),
    ]
    try:
        with serve(turns) as model:
            options = sandboxd_options(
                instance_id,
                target=frameworks_daemon.target,
                auto_approve=TOOL_NAMES,
                env=_claude_env(model.url, tmp_path),
                cwd=tmp_path,
                max_turns=8,
            )
            init, result = await _run(options, "Compute 6*7 with a Python program.")

        # Claude Code offered the model sandboxd's tools and none of its own.
        assert set(init["tools"]) == SANDBOXD_TOOLS
        assert init["mcp_servers"] == [
            {"name": "sandboxd", "status": "connected", "source": "dynamic"}
        ]
        assert {tool["name"] for tool in model.requests[0]["tools"]} == SANDBOXD_TOOLS
        results = model.tool_results()
        texts = {key: block["content"][0]["text"] for key, block in results.items()}
        assert texts["toolu_0"] == "Created answer.py (1 line, 13 bytes)."
        assert texts["toolu_1"].endswith("Exit code: 0")
        assert texts["toolu_2"] == "     1\t42"
        assert (result.is_error, result.result) == (False, "The program printed 42.")
        # It all happened in the workspace, seen through sandboxd itself.
        workspace = Sandbox(transport_for(frameworks_daemon.target), instance_id)
        assert (await workspace.read_file("out.txt")).data == b"42\n"
        assert not (tmp_path / "out.txt").exists()
    finally:
        await _remove(frameworks_daemon.target, instance_id)


async def test_only_the_read_only_tools_run_without_asking(
    frameworks_daemon: Daemon, instance_id: str, tmp_path: Path
) -> None:
    """The default approvals follow the bridge's hints: read-only runs, write waits."""
    workspace = Sandbox(transport_for(frameworks_daemon.target), instance_id)
    turns: list[Turn] = [
        ToolUse(tool_name("write"), {"file_path": "new.txt", "content": "x"}),
        ToolUse(tool_name("glob"), {"pattern": "*.txt"}),
        Text("done"),
    ]
    try:
        with serve(turns) as model:
            options = sandboxd_options(
                instance_id,
                target=frameworks_daemon.target,
                env=_claude_env(model.url, tmp_path),
                cwd=tmp_path,
                max_turns=4,
            )
            await _run(options, "Try both.")
        results = model.tool_results()
        assert results["toolu_0"]["is_error"] is True
        assert "requested permissions to use mcp__sandboxd__write" in str(
            results["toolu_0"]["content"]
        )
        assert results["toolu_1"].get("is_error") is not True
        assert not (await workspace.exists("new.txt")).exists
    finally:
        await _remove(frameworks_daemon.target, instance_id)

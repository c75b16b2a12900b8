"""pydantic-ai's own agent loop, a scripted model (FunctionModel) and a
sandboxd workspace: the model writes a program, runs it and reads what it
wrote, every step inside the workspace; the next run continues in it by ref."""

from __future__ import annotations

import json

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from runtime_client.contrib.pydantic_ai import PROVIDER, SandboxdWorkspace
from runtime_client.sandbox import Sandbox
from tests.helpers import Daemon

pytestmark = [pytest.mark.anyio]

PROGRAM = "import platform\nopen('out.txt', 'w').write(f'hello from {platform.node()}')\n"
SCRIPT = [
    ToolCallPart("write_file", {"path": "hello.py", "content": PROGRAM}),
    ToolCallPart("run", {"command": "python3 hello.py && echo ran as $(id -u)"}),
    ToolCallPart("read_file", {"path": "out.txt"}),
]


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """One tool call per turn from SCRIPT, then the last tool result as the answer."""
    returns = [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    if len(returns) < len(SCRIPT):
        return ModelResponse(parts=[SCRIPT[len(returns)]])
    return ModelResponse(parts=[TextPart(json.dumps([r.content for r in returns]))])


def make_agent(workspace: SandboxdWorkspace[None]) -> Agent[None, str]:
    agent = Agent(FunctionModel(scripted), capabilities=[workspace])

    @agent.tool
    async def write_file(ctx: RunContext[None], path: str, content: str) -> str:
        await ctx.workspace.write_text(path, content)
        return f"wrote {path}"

    @agent.tool
    async def run(ctx: RunContext[None], command: str) -> str:
        result = await ctx.workspace.run(command, shell=True, timeout=60)
        return f"exit {result.exit_code}: {result.stdout}{result.stderr}"

    @agent.tool
    async def read_file(ctx: RunContext[None], path: str) -> str:
        return await ctx.workspace.read_text(path)

    return agent


async def test_scripted_model_writes_runs_and_reads_in_a_sandboxd_workspace(
    frameworks_daemon: Daemon,
) -> None:
    workspace = SandboxdWorkspace(frameworks_daemon.target)
    agent = make_agent(workspace)
    result = await agent.run("Write hello.py, run it, and tell me what it wrote.")
    ref = result.workspace.ref
    assert ref is not None and ref.provider == PROVIDER and workspace.owns(ref)
    try:
        wrote, ran, read = json.loads(result.output)
        assert wrote == "wrote hello.py"
        assert ran == "exit 0: ran as 1000\n"  # the workspace's unprivileged user
        assert read == "hello from sandbox"  # the container's hostname, not this host's
        # The files are in the sandboxd workspace itself, seen without pydantic-ai.
        backend = workspace.backend(ref)
        box: Sandbox = await backend.sandbox()
        assert (await box.read_file("/workspace/hello.py")).data.decode() == PROGRAM
        assert (await box.read_file("/workspace/out.txt")).data == b"hello from sandbox"
        # A second run given the ref continues in the same workspace.
        again = await agent.run("Once more.", workspace=ref)
        assert again.workspace.ref == ref
        assert json.loads(again.output)[2] == "hello from sandbox"
    finally:
        assert await workspace.destroy(ref)
    assert not await workspace.destroy(ref)  # gone

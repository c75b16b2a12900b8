"""deepagents' own agent loop (``create_deep_agent``) with LangChain's fake chat
model scripted to call tools: it writes a program, runs it, reads what it
printed, all in a sandboxd workspace on Docker; the transcript and the
workspace both show it happened there."""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from deepagents import create_deep_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage

from runtime_client.contrib._common import transport_for
from runtime_client.contrib.deepagents import SandboxdConnection, SandboxdSandbox
from runtime_client.sandbox import Sandbox
from tests.helpers import Daemon

pytestmark = pytest.mark.anyio


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, playing its messages whatever tools it is given."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self


def _call(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


@pytest.fixture
def backend(frameworks_daemon: Daemon) -> Iterator[SandboxdSandbox]:
    with SandboxdConnection(frameworks_daemon.target) as sandboxd:
        backend = sandboxd.sandbox(f"deepagents-loop-{secrets.token_hex(3)}")
        try:
            yield backend
        finally:
            sandboxd.delete(backend.id)


async def test_the_agent_writes_runs_and_reads_in_the_workspace(
    backend: SandboxdSandbox, frameworks_daemon: Daemon
) -> None:
    program = "/workspace/loop/answer.py"
    model = ScriptedChatModel(
        messages=iter(
            [
                _call("write_file", "call-write", file_path=program, content="print(6 * 7)\n"),
                _call(
                    "execute",
                    "call-run",
                    command=f"python3 {program} | tee /workspace/loop/out.txt",
                ),
                _call("read_file", "call-read", file_path="/workspace/loop/out.txt"),
                AIMessage(content="The program printed 42."),
            ]
        )
    )
    agent = create_deep_agent(model=model, backend=backend)

    result = await agent.ainvoke({"messages": [{"role": "user", "content": "Compute 6*7."}]})

    tools = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    assert set(tools) == {"call-write", "call-run", "call-read"}
    assert all(m.status != "error" for m in tools.values()), tools
    assert str(tools["call-run"].content).startswith("42")
    assert "42" in str(tools["call-read"].content)
    assert result["messages"][-1].content == "The program printed 42."
    # It all happened in the workspace: the files are there, seen through sandboxd itself.
    workspace = Sandbox(transport_for(frameworks_daemon.target), backend.id)
    assert (await workspace.read_file(program)).data == b"print(6 * 7)\n"
    assert (await workspace.read_file("/workspace/loop/out.txt")).data == b"42\n"

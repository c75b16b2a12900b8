"""``Agent``: the thin loop — ask the model, run the tools it calls, repeat.

    agent = Agent(model=model, instructions="...", tools=[my_tool], sandbox=factory)
    run = await agent.run("Fix the failing test", instance_id="agent-42")
    print(run.transcript())

The loop ends when the model calls no tool, when every result of a turn asks
to terminate, or after ``max_turns`` model calls. Swapping ``sandbox`` for
another ``SandboxFactory`` changes where the tools run, nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from runtime_client.model import (
    AssistantMessage,
    Message,
    ModelAdapter,
    ModelRequest,
    ToolResultsMessage,
    UserMessage,
    format_transcript,
)
from runtime_client.runner import ToolRunner
from runtime_client.sandbox import Sandbox, SandboxFactory
from runtime_client.sandbox_tools import SANDBOX_TOOL_NAMES, SandboxToolsProvider, tools_for
from runtime_client.schema import ToolSpec
from runtime_client.tools import LogSink, Tool
from runtime_client.toolset import ToolNameConflictError, ToolSet

StopReason = Literal["completed", "terminated", "max_turns"]


@dataclass(frozen=True)
class AgentRun:
    """How a run went. ``text`` is the model's last text; ``turns`` counts model calls."""

    messages: tuple[Message, ...]
    text: str
    stop_reason: StopReason
    turns: int
    sandbox: Sandbox | None = None

    def transcript(self) -> str:
        return format_transcript(self.messages)


class Agent:
    """A model, its instructions, its tools and (optionally) a sandbox factory.

    With ``sandbox``, each run gets the workspace of its ``instance_id`` and
    the six sandbox tools bound to it (or the factory's own ``tools(sandbox)``).
    ``tool_timeout`` (seconds) applies to tools that set none.
    """

    def __init__(
        self,
        *,
        model: ModelAdapter,
        instructions: str,
        tools: Sequence[Tool[Any]] = (),
        sandbox: SandboxFactory | None = None,
        max_turns: int = 20,
        tool_timeout: float | None = None,
        on_log: LogSink | None = None,
    ) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.model = model
        self.instructions = instructions
        self.tools = ToolSet(tools)
        self.sandbox_factory = sandbox
        self.max_turns = max_turns
        self.tool_timeout = tool_timeout
        self.on_log = on_log
        if sandbox is not None and not isinstance(sandbox, SandboxToolsProvider):
            # Known now, so say it now rather than at the first run.
            clash = sorted(set(self.tools.names) & set(SANDBOX_TOOL_NAMES))
            if clash:
                raise ToolNameConflictError(
                    f"tool {clash[0]!r} clashes with the sandbox tool of that name; the "
                    f"sandbox tools are {', '.join(SANDBOX_TOOL_NAMES)}"
                )

    async def run(
        self, prompt: str, *, instance_id: str | None = None, cwd: str | None = None
    ) -> AgentRun:
        sandbox = await self._sandbox(instance_id, cwd)
        tools = self.tools
        if sandbox is not None:
            tools = ToolSet(tools_for(self.sandbox_factory, sandbox)) + self.tools
        runner = ToolRunner(
            tools, sandbox=sandbox, on_log=self.on_log, default_timeout=self.tool_timeout
        )
        specs = tuple(ToolSpec.of(tool) for tool in tools)
        messages: list[Message] = [UserMessage(prompt)]
        text = ""
        for turn in range(1, self.max_turns + 1):
            response = await self.model.complete(
                ModelRequest(self.instructions, tuple(messages), specs)
            )
            messages.append(AssistantMessage(response.text, response.tool_calls))
            text = response.text or text
            if not response.tool_calls:
                return AgentRun(tuple(messages), text, "completed", turn, sandbox)
            results = await runner.run_turn(response.tool_calls)
            messages.append(ToolResultsMessage(tuple(results)))
            if all(result.terminate for result in results):
                return AgentRun(tuple(messages), text, "terminated", turn, sandbox)
        return AgentRun(tuple(messages), text, "max_turns", self.max_turns, sandbox)

    async def _sandbox(self, instance_id: str | None, cwd: str | None) -> Sandbox | None:
        if self.sandbox_factory is None:
            return None
        if not instance_id:
            raise ValueError("this agent has a sandbox factory: pass run(..., instance_id=...)")
        return await self.sandbox_factory.create_sandbox(instance_id, cwd=cwd)

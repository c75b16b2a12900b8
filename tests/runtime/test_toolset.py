"""Tool sets: unique names, reserved names refused, conflicts found at assembly."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_client import (
    RESERVED_TOOL_NAMES,
    Agent,
    LocalSandboxFactory,
    ScriptedModel,
    Tool,
    ToolContext,
    ToolDefinitionError,
    ToolNameConflictError,
    ToolSet,
    define_tool,
)

pytestmark = pytest.mark.unit


async def run(ctx: ToolContext[None]) -> str:
    return "ok"


def tool(name: str) -> Tool[None]:
    return define_tool(name=name, description=f"The {name} tool.", run=run)


def test_a_set_keeps_order_and_finds_tools_by_name() -> None:
    tools = ToolSet([tool("b"), tool("a")])
    assert tools.names == ("b", "a")
    assert len(tools) == 2
    assert "a" in tools
    assert tools.get("a") is not None
    assert tools.get("c") is None


def test_two_tools_of_one_name_conflict() -> None:
    with pytest.raises(ToolNameConflictError, match="two tools are named 'lookup'"):
        ToolSet([tool("lookup"), tool("other"), tool("lookup")])


def test_adding_sets_checks_again() -> None:
    with pytest.raises(ToolNameConflictError):
        ToolSet([tool("x")]) + ToolSet([tool("x")])


@pytest.mark.parametrize("name", sorted(RESERVED_TOOL_NAMES))
def test_reserved_names_are_refused(name: str) -> None:
    assert {"task", "finish", "give_up"} <= RESERVED_TOOL_NAMES
    with pytest.raises(ToolNameConflictError, match="reserved"):
        ToolSet([tool(name)])


def test_a_conflict_is_also_a_definition_error() -> None:
    assert issubclass(ToolNameConflictError, ToolDefinitionError)


def test_only_tools_are_accepted() -> None:
    with pytest.raises(ToolDefinitionError, match="define_tool"):
        ToolSet([{"name": "raw"}])  # type: ignore[list-item]


def test_an_agent_refuses_conflicting_tools_when_made() -> None:
    with pytest.raises(ToolNameConflictError):
        Agent(model=ScriptedModel([]), instructions="", tools=[tool("a"), tool("a")])
    with pytest.raises(ToolNameConflictError, match="reserved"):
        Agent(model=ScriptedModel([]), instructions="", tools=[tool("finish")])


def test_an_application_tool_may_not_take_a_sandbox_tool_name(tmp_path: Path) -> None:
    factory = LocalSandboxFactory(tmp_path)
    with pytest.raises(ToolNameConflictError, match="'bash' clashes with the sandbox tool"):
        Agent(model=ScriptedModel([]), instructions="", tools=[tool("bash")], sandbox=factory)
    # Without a sandbox the name is free.
    Agent(model=ScriptedModel([]), instructions="", tools=[tool("bash")])

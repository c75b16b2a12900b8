"""``ToolSet``: the tools of one agent, names unique, reserved names refused."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from runtime_client.tools import Tool, ToolDefinitionError

# Names the runtime keeps for control tools of its own (sub-agents, ending a
# run); a user tool with one of them would be confused with the runtime's.
RESERVED_TOOL_NAMES: frozenset[str] = frozenset(
    {"task", "finish", "give_up", "done", "submit", "handoff", "subagent", "stop"}
)


class ToolNameConflictError(ToolDefinitionError):
    """Two tools of one agent share a name, or a tool takes a reserved name."""


class ToolSet:
    """An immutable, ordered set of tools with unique names.

    The check happens here, when the set is assembled, so a clash between an
    application tool and a sandbox tool is found before the model is asked
    anything.
    """

    __slots__ = ("_tools",)

    def __init__(self, tools: Iterable[Tool[Any]] = ()) -> None:
        by_name: dict[str, Tool[Any]] = {}
        for tool in tools:
            if not isinstance(tool, Tool):
                raise ToolDefinitionError(
                    f"{tool!r} is not a Tool; make tools with define_tool(...)"
                )
            if tool.name in RESERVED_TOOL_NAMES:
                raise ToolNameConflictError(
                    f"tool name {tool.name!r} is reserved by the runtime; reserved names: "
                    f"{', '.join(sorted(RESERVED_TOOL_NAMES))}"
                )
            if tool.name in by_name:
                raise ToolNameConflictError(
                    f"two tools are named {tool.name!r}; tool names must be unique within "
                    "an agent (the sandbox tools read, write, edit, bash, grep and glob "
                    "count too)"
                )
            by_name[tool.name] = tool
        self._tools = by_name

    def __add__(self, other: Iterable[Tool[Any]]) -> ToolSet:
        return ToolSet([*self, *other])

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __repr__(self) -> str:
        return f"ToolSet({list(self._tools)!r})"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

"""One tool definition, three provider formats.

- OpenAI Chat Completions:
  ``{"type": "function", "function": {"name", "description", "parameters"}}``
- OpenAI Responses: ``{"type": "function", "name", "description", "parameters", "strict"}``
- Anthropic Messages: ``{"name", "description", "input_schema"}``
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class _Described(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class ToolSpec:
    """What a model is told about a tool: provider-neutral."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    @classmethod
    def of(cls, tool: _Described) -> ToolSpec:
        return cls(tool.name, tool.description, tool.parameters)


def _schema(parameters: Mapping[str, Any]) -> dict[str, Any]:
    # A deep copy: callers may mutate what they send, the tool's schema must not change.
    return copy.deepcopy(dict(parameters))


def to_openai_chat_tools(tools: Iterable[_Described]) -> list[dict[str, Any]]:
    """Tools for OpenAI-compatible Chat Completions (``tools=`` of the request)."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": _schema(tool.parameters),
            },
        }
        for tool in tools
    ]


def to_openai_responses_tools(
    tools: Iterable[_Described], *, strict: bool = False
) -> list[dict[str, Any]]:
    """Tools for the OpenAI Responses API.

    ``strict`` is always sent: when it is omitted the Responses API normalises
    the schema into strict mode, which makes every optional argument mandatory
    (Chat Completions stays non-strict). ``strict=True`` checks each schema
    meets strict mode's rules and raises ``ValueError`` naming the first
    violation, rather than letting the API refuse it.
    """
    exported = []
    for tool in tools:
        parameters = _schema(tool.parameters)
        if strict:
            problem = strict_schema_problem(parameters)
            if problem:
                raise ValueError(f"tool {tool.name!r} cannot be strict: {problem}")
        exported.append(
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": parameters,
                "strict": strict,
            }
        )
    return exported


def to_anthropic_tools(tools: Iterable[_Described]) -> list[dict[str, Any]]:
    """Tools for the Anthropic Messages API (``tools=`` of the request)."""
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": _schema(tool.parameters),
        }
        for tool in tools
    ]


def strict_schema_problem(schema: Mapping[str, Any], where: str = "parameters") -> str | None:
    """Why ``schema`` breaks OpenAI strict mode (every object closed, every
    property required), or ``None``."""
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            return f"{where} must set additionalProperties: false"
        properties = schema.get("properties", {})
        missing = sorted(set(properties) - set(schema.get("required", [])))
        if missing:
            return f"{where}: properties {', '.join(missing)} must all be required"
        for name, sub in properties.items():
            problem = strict_schema_problem(sub, f"{where}.{name}")
            if problem:
                return problem
    for label, sub in _subschemas(schema):
        problem = strict_schema_problem(sub, f"{where}.{label}")
        if problem:
            return problem
    return None


def _subschemas(schema: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    found: list[tuple[str, Mapping[str, Any]]] = []
    items = schema.get("items")
    if isinstance(items, Mapping):
        found.append(("items", items))
    for key in ("anyOf", "allOf"):
        for index, sub in enumerate(schema.get(key) or []):
            if isinstance(sub, Mapping):
                found.append((f"{key}[{index}]", sub))
    for name, sub in (schema.get("$defs") or {}).items():
        if isinstance(sub, Mapping):
            found.append((f"$defs.{name}", sub))
    return found

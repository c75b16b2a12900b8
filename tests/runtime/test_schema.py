"""Schema export: one definition, the documented shapes of three provider APIs.

Shapes checked against the providers' documented request formats:
- OpenAI Chat Completions ``tools``: ``{"type": "function", "function": {"name",
  "description", "parameters"}}``;
- OpenAI Responses ``tools``: ``{"type": "function", "name", "description",
  "parameters", "strict"}`` (flat, no nested "function"); an omitted ``strict``
  means strict mode there, so ``strict: false`` is sent explicitly;
- Anthropic Messages ``tools``: ``{"name", "description", "input_schema"}``,
  where ``input_schema`` is a JSON schema of ``type: object``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field

from runtime_client import (
    Tool,
    ToolContext,
    ToolSpec,
    define_tool,
    to_anthropic_tools,
    to_openai_chat_tools,
    to_openai_responses_tools,
)
from runtime_client.sandbox_tools import SANDBOX_TOOL_NAMES, sandbox_tools
from runtime_client.schema import strict_schema_problem

pytestmark = pytest.mark.unit


class Inner(BaseModel):
    key: str


class Search(BaseModel):
    query: str = Field(description="What to look for.")
    limit: int = 10
    filters: list[Inner] = []


async def run(ctx: ToolContext[Search]) -> str:
    return ctx.data.query


SEARCH = define_tool(name="search_docs", description="Search the docs.", input=Search, run=run)


def sandbox_tool_list() -> list[Tool[Any]]:
    return list(sandbox_tools(object()))  # type: ignore[arg-type]


def test_openai_chat_shape() -> None:
    (exported,) = to_openai_chat_tools([SEARCH])
    assert set(exported) == {"type", "function"}
    assert exported["type"] == "function"
    function = exported["function"]
    assert set(function) == {"name", "description", "parameters"}
    assert function["name"] == "search_docs"
    assert function["description"] == "Search the docs."
    parameters = function["parameters"]
    assert parameters["type"] == "object"
    assert parameters["required"] == ["query"]
    assert parameters["properties"]["query"]["description"] == "What to look for."
    assert parameters["additionalProperties"] is False
    assert "$defs" in parameters  # nested models are referenced, as JSON schema allows


def test_openai_responses_shape_is_flat_and_not_strict_by_default() -> None:
    (exported,) = to_openai_responses_tools([SEARCH])
    assert set(exported) == {"type", "name", "description", "parameters", "strict"}
    assert exported["type"] == "function"
    assert exported["name"] == "search_docs"
    assert exported["strict"] is False
    assert exported["parameters"] == dict(SEARCH.parameters)


def test_openai_responses_strict_checks_the_schema() -> None:
    with pytest.raises(ValueError, match="properties filters, limit must all be required"):
        to_openai_responses_tools([SEARCH], strict=True)

    class AllRequired(BaseModel):
        query: str
        inner: Inner

    tool = define_tool(name="s", description="d", input=AllRequired, run=run)  # type: ignore[arg-type]
    # Inner (nested, in $defs) allows extra keys: strict mode would refuse it.
    with pytest.raises(ValueError, match=r"\$defs.Inner must set additionalProperties"):
        to_openai_responses_tools([tool], strict=True)

    class Closed(BaseModel):
        model_config = {"extra": "forbid"}
        query: str

    closed = define_tool(name="c", description="d", input=Closed, run=run)  # type: ignore[arg-type]
    (exported,) = to_openai_responses_tools([closed], strict=True)
    assert exported["strict"] is True


def test_anthropic_shape() -> None:
    (exported,) = to_anthropic_tools([SEARCH])
    assert set(exported) == {"name", "description", "input_schema"}
    assert exported["name"] == "search_docs"
    assert exported["input_schema"]["type"] == "object"
    assert exported["input_schema"] == dict(SEARCH.parameters)


def test_exports_are_plain_json_and_independent_copies() -> None:
    for export in (to_openai_chat_tools, to_openai_responses_tools, to_anthropic_tools):
        tools = export([SEARCH, *sandbox_tool_list()])
        assert json.loads(json.dumps(tools)) == tools
        tools[0].clear()
    assert SEARCH.parameters["type"] == "object"
    # Mutating an export must not reach the tool's own schema.
    (exported,) = to_anthropic_tools([SEARCH])
    exported["input_schema"]["properties"].clear()
    assert "query" in SEARCH.parameters["properties"]


def test_tool_specs_export_like_tools() -> None:
    spec = ToolSpec.of(SEARCH)
    assert to_openai_chat_tools([spec]) == to_openai_chat_tools([SEARCH])


def test_every_export_of_the_sandbox_tools_names_the_tools_md_parameters() -> None:
    expected = {
        "read": {"file_path", "offset", "limit"},
        "write": {"file_path", "content"},
        "edit": {"file_path", "old_string", "new_string", "replace_all"},
        "bash": {"command", "timeout", "description", "run_in_background", "workdir"},
        "grep": {
            "pattern", "path", "glob", "type", "output_mode", "-i", "-n", "-A", "-B", "-C",
            "multiline", "literal", "head_limit", "offset",
        },
        "glob": {"pattern", "path", "head_limit", "offset", "no_ignore"},
        "bash_output": {"bash_id", "filter"},
        "kill_shell": {"shell_id"},
    }  # fmt: skip
    anthropic = {t["name"]: t["input_schema"] for t in to_anthropic_tools(sandbox_tool_list())}
    assert tuple(anthropic) == SANDBOX_TOOL_NAMES
    for name, parameters in expected.items():
        assert set(anthropic[name]["properties"]) == parameters, name
    assert anthropic["read"]["required"] == ["file_path"]
    assert anthropic["edit"]["required"] == ["file_path", "old_string", "new_string"]
    assert anthropic["bash"]["required"] == ["command"]
    assert anthropic["bash_output"]["required"] == ["bash_id"]
    assert anthropic["kill_shell"]["required"] == ["shell_id"]
    assert anthropic["grep"]["properties"]["output_mode"]["enum"] == [
        "files_with_matches",
        "content",
        "count",
    ]


def test_strict_problem_finder() -> None:
    assert strict_schema_problem({"type": "object", "properties": {}}) is not None
    closed = {"type": "object", "properties": {}, "additionalProperties": False}
    assert strict_schema_problem(closed) is None
    nested = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"type": "object", "properties": {}}}},
        "required": ["xs"],
        "additionalProperties": False,
    }
    assert strict_schema_problem(nested) == (
        "parameters.xs.items must set additionalProperties: false"
    )

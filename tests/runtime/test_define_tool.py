"""define_tool: a malformed tool is an error when it is defined, not when it is called."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, RootModel

from runtime_client import Tool, ToolContext, ToolDefinitionError, define_tool
from runtime_client.tools import ArgumentsError

pytestmark = pytest.mark.unit


class Args(BaseModel):
    path: str
    count: int = 1


async def run_args(ctx: ToolContext[Args]) -> str:
    return ctx.data.path


async def run_none(ctx: ToolContext[None]) -> str:
    return "ok"


def test_a_valid_tool_is_frozen_and_describes_its_input() -> None:
    tool = define_tool(name="count_lines", description="Count lines.", input=Args, run=run_args)
    assert isinstance(tool, Tool)
    assert tool.name == "count_lines"
    assert tool.parameters["type"] == "object"
    assert set(tool.parameters["properties"]) == {"path", "count"}
    assert tool.parameters["required"] == ["path"]
    assert tool.parameters["additionalProperties"] is False
    assert "title" not in tool.parameters
    with pytest.raises(AttributeError):
        tool.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        tool.parameters["type"] = "array"  # type: ignore[index]


@pytest.mark.parametrize("name", ["", "has space", "dot.name", "x" * 65, "ünïcode", "a/b"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(ToolDefinitionError, match="name"):
        define_tool(name=name, description="d", input=Args, run=run_args)


@pytest.mark.parametrize("name", ["a", "A-b_9", "x" * 64])
def test_good_names_are_accepted(name: str) -> None:
    assert define_tool(name=name, description="d", input=Args, run=run_args).name == name


@pytest.mark.parametrize("description", ["", "   ", None])
def test_description_must_be_non_empty(description: Any) -> None:
    with pytest.raises(ToolDefinitionError, match="description"):
        define_tool(name="t", description=description, input=Args, run=run_args)


def test_run_must_be_async() -> None:
    def sync_run(ctx: ToolContext[Args]) -> str:
        return "x"

    with pytest.raises(ToolDefinitionError, match="async"):
        define_tool(name="t", description="d", input=Args, run=sync_run)  # type: ignore[arg-type]


def test_async_callables_of_other_shapes_are_accepted() -> None:
    class Runner:
        async def __call__(self, ctx: ToolContext[Args]) -> str:
            return "x"

    async def with_extra(ctx: ToolContext[Args], suffix: str) -> str:
        return suffix

    define_tool(name="a", description="d", input=Args, run=Runner())
    define_tool(
        name="b", description="d", input=Args, run=functools.partial(with_extra, suffix="!")
    )


@pytest.mark.parametrize("bad_input", [dict, {"type": "object"}, int, Args(path="x")])
def test_input_must_be_a_model_class(bad_input: Any) -> None:
    with pytest.raises(ToolDefinitionError, match="input"):
        define_tool(name="t", description="d", input=bad_input, run=run_args)


def test_root_model_input_is_refused() -> None:
    class Paths(RootModel[list[str]]):
        pass

    with pytest.raises(ToolDefinitionError, match="RootModel"):
        define_tool(name="t", description="d", input=Paths, run=run_args)  # type: ignore[arg-type]


def test_output_must_be_a_model_class_or_none() -> None:
    with pytest.raises(ToolDefinitionError, match="output"):
        define_tool(name="t", description="d", input=Args, output=dict, run=run_args)  # type: ignore[arg-type]


def test_extra_forbid_is_applied_without_touching_the_callers_model() -> None:
    tool = define_tool(name="t", description="d", input=Args, run=run_args)
    assert tool.input is Args
    assert tool.parameters["additionalProperties"] is False
    with pytest.raises(ArgumentsError, match="unknown argument"):
        tool.parse({"path": "a", "cuont": 2})
    assert Args.model_config.get("extra") is None  # the caller's class is unchanged
    parsed = tool.parse({"path": "a"})
    assert type(parsed) is Args
    assert parsed == Args(path="a")
    assert parsed.model_fields_set == {"path"}


def test_an_input_that_allows_extra_fields_is_refused() -> None:
    class Loose(BaseModel):
        model_config = ConfigDict(extra="allow")
        path: str

    class Ignoring(BaseModel):
        model_config = ConfigDict(extra="ignore")
        path: str

    for model in (Loose, Ignoring):
        with pytest.raises(ToolDefinitionError, match="extra"):
            define_tool(name="t", description="d", input=model, run=run_args)  # type: ignore[arg-type]


def test_an_input_that_already_forbids_is_used_as_is() -> None:
    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid")
        path: str

    tool = define_tool(name="t", description="d", input=Strict, run=run_args)  # type: ignore[arg-type]
    assert tool.input is Strict


def test_a_misspelt_option_is_an_error_at_definition_time() -> None:
    with pytest.raises(TypeError, match="descripton"):
        define_tool(name="t", descripton="d", input=Args, run=run_args)  # type: ignore[call-overload]


@pytest.mark.parametrize("timeout", [0, -1.0])
def test_timeout_must_be_positive(timeout: float) -> None:
    with pytest.raises(ToolDefinitionError, match="timeout"):
        define_tool(name="t", description="d", input=Args, run=run_args, timeout=timeout)


def test_a_tool_without_input_takes_an_empty_object() -> None:
    tool = define_tool(name="now", description="The time.", run=run_none)
    assert tool.input is None
    assert dict(tool.parameters) == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


def test_validators_and_private_state_of_the_input_survive() -> None:
    from pydantic import PrivateAttr, field_validator

    class Query(BaseModel):
        text: str
        _seen: bool = PrivateAttr(default=False)

        @field_validator("text")
        @classmethod
        def strip(cls, value: str) -> str:
            return value.strip()

        def model_post_init(self, context: Any) -> None:
            self._seen = True

    tool = define_tool(name="q", description="d", input=Query, run=run_args)  # type: ignore[arg-type]
    parsed = tool.parse({"text": "  hi  "})
    assert type(parsed) is Query
    assert parsed.text == "hi"
    assert parsed._seen is True

"""ToolRunner: validation, the result envelope, errors, timeouts, logs, concurrency."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from runtime_client import (
    ToolCall,
    ToolContext,
    ToolLog,
    ToolResult,
    ToolRunner,
    define_tool,
)

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


class Add(BaseModel):
    a: int
    b: int


class Sum(BaseModel):
    total: int


def adder(calls: list[Add] | None = None, output: type[BaseModel] | None = None) -> Any:
    async def run(ctx: ToolContext[Add]) -> ToolResult:
        if calls is not None:
            calls.append(ctx.data)
        return ToolResult(output={"total": ctx.data.a + ctx.data.b})

    return define_tool(
        name="add", description="Add two numbers.", input=Add, output=output, run=run
    )


async def test_valid_arguments_reach_run_and_the_model_sees_json() -> None:
    seen: list[Add] = []
    runner = ToolRunner([adder(seen)])
    result = await runner.run(ToolCall("c1", "add", {"a": 2, "b": 3}))
    assert seen == [Add(a=2, b=3)]
    assert isinstance(seen[0], Add)
    assert result.tool_call_id == "c1"
    assert result.name == "add"
    assert not result.is_error
    assert json.loads(result.content) == {"total": 5}
    assert result.output == {"total": 5}


async def test_arguments_may_come_as_json_text() -> None:
    result = await ToolRunner([adder()]).run(ToolCall("c1", "add", '{"a": 1, "b": "2"}'))
    assert json.loads(result.content) == {"total": 3}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"a": 1}, "b: Field required"),
        ({"a": 1, "b": "two"}, "b: Input should be a valid integer"),
        ({"a": 1, "b": 2, "c": 3}, "c: unknown argument (valid: a, b)"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
async def test_bad_arguments_are_an_error_result_and_run_is_not_called(
    arguments: Any, problem: str
) -> None:
    seen: list[Add] = []
    result = await ToolRunner([adder(seen)]).run(ToolCall("c1", "add", arguments))
    assert seen == []
    assert result.is_error
    assert result.content.startswith("Error: invalid arguments for add: ")
    assert problem in result.content
    assert result.content.endswith("Call add again with corrected arguments.")


async def test_a_tool_without_input_refuses_arguments() -> None:
    async def run(ctx: ToolContext[None]) -> str:
        assert ctx.data is None
        return "tick"

    runner = ToolRunner([define_tool(name="tick", description="Tick.", run=run)])
    assert (await runner.run(ToolCall("c1", "tick", {}))).content == "tick"
    assert (await runner.run(ToolCall("c2", "tick", ""))).content == "tick"
    refused = await runner.run(ToolCall("c3", "tick", {"x": 1}))
    assert refused.is_error
    assert "takes no arguments" in refused.content


async def test_an_unknown_tool_is_an_error_result_listing_the_tools() -> None:
    result = await ToolRunner([adder()]).run(ToolCall("c1", "multiply", {}))
    assert result.is_error
    assert result.content == "Error: there is no tool named 'multiply'. Available tools: add."


async def test_an_exception_in_run_becomes_an_error_result() -> None:
    async def run(ctx: ToolContext[None]) -> str:
        raise FileNotFoundError("config.toml is missing")

    runner = ToolRunner([define_tool(name="boom", description="Fails.", run=run)])
    result = await runner.run(ToolCall("c1", "boom", {}))
    assert result.is_error
    assert result.content == "Error: boom failed: FileNotFoundError: config.toml is missing"


async def test_a_bare_string_is_shown_as_it_is() -> None:
    async def run(ctx: ToolContext[None]) -> str:
        return 'line "one"\nline two'

    result = await ToolRunner([define_tool(name="s", description="d", run=run)]).run(
        ToolCall("c1", "s", {})
    )
    assert result.content == 'line "one"\nline two'
    assert result.output == 'line "one"\nline two'
    assert not result.terminate


async def test_the_output_model_is_checked() -> None:
    good = await ToolRunner([adder(output=Sum)]).run(ToolCall("c1", "add", {"a": 1, "b": 1}))
    assert json.loads(good.content) == {"total": 2}

    async def wrong(ctx: ToolContext[None]) -> ToolResult:
        return ToolResult(output={"sum": 2})

    tool = define_tool(name="w", description="d", output=Sum, run=wrong)
    bad = await ToolRunner([tool]).run(ToolCall("c1", "w", {}))
    assert bad.is_error
    assert bad.content.startswith("Error: w returned an invalid result: total: Field required")


async def test_a_model_instance_is_accepted_as_output() -> None:
    async def run(ctx: ToolContext[None]) -> ToolResult:
        return ToolResult(output=Sum(total=7))

    result = await ToolRunner([define_tool(name="m", description="d", output=Sum, run=run)]).run(
        ToolCall("c1", "m", {})
    )
    assert result.output == {"total": 7}


@pytest.mark.parametrize("output", [{1, 2}, object(), float("nan"), {"when": b"bytes"}])
async def test_output_must_be_json_serialisable(output: Any) -> None:
    async def run(ctx: ToolContext[None]) -> ToolResult:
        return ToolResult(output=output)

    result = await ToolRunner([define_tool(name="o", description="d", run=run)]).run(
        ToolCall("c1", "o", {})
    )
    assert result.is_error
    assert result.content.startswith("Error: o returned an invalid result")


async def test_returning_something_else_is_an_error_result() -> None:
    async def run(ctx: ToolContext[None]) -> Any:
        return {"not": "wrapped"}

    result = await ToolRunner([define_tool(name="r", description="d", run=run)]).run(
        ToolCall("c1", "r", {})
    )
    assert result.is_error
    assert "not a ToolResult or str" in result.content


async def test_terminate_and_is_error_and_fields_travel_in_the_envelope() -> None:
    async def run(ctx: ToolContext[None]) -> ToolResult:
        return ToolResult(output="stop here", terminate=True, is_error=True, fields={"k": 1})

    result = await ToolRunner([define_tool(name="t", description="d", run=run)]).run(
        ToolCall("c1", "t", {})
    )
    assert (result.terminate, result.is_error, dict(result.fields)) == (True, True, {"k": 1})


async def test_a_tool_that_overruns_its_timeout_is_stopped() -> None:
    finished = []

    async def run(ctx: ToolContext[None]) -> str:
        await anyio.sleep(10)
        finished.append(True)
        return "late"

    tool = define_tool(name="slow", description="d", run=run, timeout=0.1)
    with anyio.fail_after(5):
        result = await ToolRunner([tool]).run(ToolCall("c1", "slow", {}))
    assert finished == []
    assert result.is_error
    assert result.content.startswith("Error: slow timed out after 0.1 s")


async def test_the_runner_default_timeout_applies_to_tools_without_one() -> None:
    async def run(ctx: ToolContext[None]) -> str:
        await anyio.sleep(10)
        return "late"

    runner = ToolRunner([define_tool(name="slow", description="d", run=run)], default_timeout=0.1)
    with anyio.fail_after(5):
        result = await runner.run(ToolCall("c1", "slow", {}))
    assert "timed out after 0.1 s" in result.content


async def test_the_context_carries_id_deadline_sandbox_and_log() -> None:
    contexts: list[ToolContext[None]] = []
    logs: list[ToolLog] = []

    async def run(ctx: ToolContext[None]) -> str:
        contexts.append(ctx)
        ctx.log("halfway")
        return "done"

    tool = define_tool(name="ctx", description="d", run=run, timeout=30)
    sandbox: Any = object()
    before = anyio.current_time()
    result = await ToolRunner([tool], sandbox=sandbox, on_log=logs.append).run(
        ToolCall("call-9", "ctx", {})
    )
    (ctx,) = contexts
    assert ctx.tool_call_id == "call-9"
    assert ctx.tool_name == "ctx"
    assert ctx.sandbox is sandbox
    assert before + 29 < ctx.deadline <= anyio.current_time() + 30
    assert logs == [ToolLog("call-9", "ctx", "halfway")]
    assert "halfway" not in result.content  # logs are for the application only


async def test_without_timeout_the_deadline_is_infinite_and_logs_without_sink_are_dropped() -> None:
    async def run(ctx: ToolContext[None]) -> str:
        ctx.log("nobody listens")
        return str(ctx.deadline)

    result = await ToolRunner([define_tool(name="d", description="d", run=run)]).run(
        ToolCall("c1", "d", {})
    )
    assert result.content == "inf"


async def test_a_tool_can_cancel_itself_through_its_scope() -> None:
    async def run(ctx: ToolContext[None]) -> str:
        ctx.cancel_scope.cancel()
        await anyio.sleep(10)
        return "never"

    result = await ToolRunner([define_tool(name="c", description="d", run=run)]).run(
        ToolCall("c1", "c", {})
    )
    assert result.content == "Error: c was cancelled."


async def test_calls_of_one_turn_run_concurrently_and_come_back_in_call_order() -> None:
    started: list[str] = []
    gate = anyio.Event()

    class Wait(BaseModel):
        label: str
        delay: float

    async def run(ctx: ToolContext[Wait]) -> str:
        started.append(ctx.data.label)
        if len(started) == 3:
            gate.set()
        await gate.wait()  # only returns once all three are in flight together
        await anyio.sleep(ctx.data.delay)
        return ctx.data.label

    tool = define_tool(name="wait", description="d", input=Wait, run=run)
    calls = [
        ToolCall("1", "wait", {"label": "slow", "delay": 0.2}),
        ToolCall("2", "wait", {"label": "fast", "delay": 0.0}),
        ToolCall("3", "wait", {"label": "mid", "delay": 0.1}),
    ]
    with anyio.fail_after(5):
        results = await ToolRunner([tool]).run_turn(calls)
    assert [r.content for r in results] == ["slow", "fast", "mid"]
    assert [r.tool_call_id for r in results] == ["1", "2", "3"]


async def test_serial_tools_run_one_at_a_time_in_arrival_order() -> None:
    events: list[str] = []

    class Step(BaseModel):
        n: int

    async def run(ctx: ToolContext[Step]) -> str:
        events.append(f"start {ctx.data.n}")
        await anyio.sleep(0.05 * (3 - ctx.data.n))  # later calls are quicker
        events.append(f"end {ctx.data.n}")
        return str(ctx.data.n)

    async def other(ctx: ToolContext[None]) -> str:
        events.append("other")
        return "other"

    serial = define_tool(name="step", description="d", input=Step, run=run, serial=True)
    free = define_tool(name="free", description="d", run=other)
    calls = [ToolCall(str(n), "step", {"n": n}) for n in range(3)]
    calls.insert(1, ToolCall("x", "free", {}))
    results = await ToolRunner([serial, free]).run_turn(calls)
    steps = [e for e in events if e != "other"]
    assert steps == ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]
    assert events.index("other") < events.index("end 0")  # it did not wait for them
    assert [r.content for r in results] == ["0", "other", "1", "2"]


async def test_one_failing_call_does_not_disturb_the_others() -> None:
    async def boom(ctx: ToolContext[None]) -> str:
        raise RuntimeError("no")

    tools = [define_tool(name="boom", description="d", run=boom), adder()]
    results = await ToolRunner(tools).run_turn(
        [
            ToolCall("1", "boom", {}),
            ToolCall("2", "add", {"a": 1, "b": 2}),
            ToolCall("3", "nope", {}),
        ]
    )
    assert [r.is_error for r in results] == [True, False, True]
    assert json.loads(results[1].content) == {"total": 3}


async def test_an_empty_turn_is_fine() -> None:
    assert await ToolRunner([]).run_turn([]) == []

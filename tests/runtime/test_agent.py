"""The agent loop: results go back to the model; it ends on no tool call, on
terminate, or at the turn cap; the scripted example runs end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from runtime_client import (
    Agent,
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    ScriptExhausted,
    ToolCall,
    ToolCallResult,
    ToolContext,
    ToolResult,
    ToolResultsMessage,
    UserMessage,
    define_tool,
    format_transcript,
)

pytestmark = [pytest.mark.unit, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parents[2]


class Echo(BaseModel):
    text: str


async def echo(ctx: ToolContext[Echo]) -> str:
    return ctx.data.text.upper()


async def finish_it(ctx: ToolContext[None]) -> ToolResult:
    return ToolResult(output={"ok": True}, terminate=True)


ECHO = define_tool(name="echo", description="Echo in capitals.", input=Echo, run=echo)
END = define_tool(name="end_run", description="End the run.", run=finish_it)


async def test_the_loop_ends_when_the_model_calls_no_tool() -> None:
    model = ScriptedModel([[("echo", {"text": "hi"})], "All done."])
    run = await Agent(model=model, instructions="Be brief.", tools=[ECHO]).run("Say hi")
    assert run.stop_reason == "completed"
    assert run.turns == 2
    assert run.text == "All done."
    assert run.sandbox is None
    first, second = model.requests
    assert first.instructions == "Be brief."
    assert [spec.name for spec in first.tools] == ["echo"]
    assert first.messages == (UserMessage("Say hi"),)
    # The results of turn 1 are in the request of turn 2, paired by call id.
    assert isinstance(second.messages[1], AssistantMessage)
    assert second.messages[1].tool_calls[0].id == "call_1"
    results = second.messages[2]
    assert isinstance(results, ToolResultsMessage)
    assert [(r.tool_call_id, r.content) for r in results.results] == [("call_1", "HI")]


async def test_the_loop_ends_when_every_result_of_a_turn_terminates() -> None:
    model = ScriptedModel([[("end_run", {})], "never asked"])
    run = await Agent(model=model, instructions="", tools=[END]).run("go")
    assert run.stop_reason == "terminated"
    assert run.turns == 1
    assert model.remaining == 1


async def test_one_terminating_result_among_others_does_not_end_the_loop() -> None:
    model = ScriptedModel([[("end_run", {}), ("echo", {"text": "x"})], "done"])
    run = await Agent(model=model, instructions="", tools=[END, ECHO]).run("go")
    assert run.stop_reason == "completed"
    assert run.turns == 2


async def test_the_turn_cap_stops_a_model_that_never_stops() -> None:
    def forever(request: ModelRequest) -> ModelResponse:
        return ModelResponse(
            tool_calls=(ToolCall(f"c{len(request.messages)}", "echo", {"text": "a"}),)
        )

    model = ScriptedModel([forever] * 10)
    run = await Agent(model=model, instructions="", tools=[ECHO], max_turns=3).run("go")
    assert run.stop_reason == "max_turns"
    assert run.turns == 3
    assert len(model.requests) == 3
    with pytest.raises(ValueError, match="max_turns"):
        Agent(model=model, instructions="", max_turns=0)


async def test_a_tool_error_goes_back_to_the_model_and_the_run_goes_on() -> None:
    def retry_if_needed(request: ModelRequest) -> list[tuple[str, dict[str, object]]] | str:
        last = request.messages[-1]
        assert isinstance(last, ToolResultsMessage)
        if last.results[0].is_error:
            return [("echo", {"text": "fixed"})]
        return "unexpected"

    model = ScriptedModel([[("echo", {"txt": "typo"})], retry_if_needed, "done"])
    run = await Agent(model=model, instructions="", tools=[ECHO]).run("go")
    transcript = run.transcript()
    assert "txt: unknown argument (valid: text)" in transcript
    assert "FIXED" in transcript
    assert run.stop_reason == "completed"


async def test_a_scripted_model_that_runs_out_says_so() -> None:
    model = ScriptedModel([[("echo", {"text": "a"})]])
    with pytest.raises(ScriptExhausted, match="1 turns"):
        await Agent(model=model, instructions="", tools=[ECHO]).run("go")


async def test_logs_reach_the_application_only() -> None:
    async def chatty(ctx: ToolContext[None]) -> str:
        ctx.log("step 1 of 2")
        return "result"

    lines: list[str] = []
    model = ScriptedModel([[("chatty", {})], "ok"])
    agent = Agent(
        model=model,
        instructions="",
        tools=[define_tool(name="chatty", description="d", run=chatty)],
        on_log=lambda line: lines.append(f"{line.tool_call_id}: {line.message}"),
    )
    run = await agent.run("go")
    assert lines == ["call_1: step 1 of 2"]
    assert "step 1" not in run.transcript()
    assert "step 1" not in repr(model.requests)


async def test_the_agent_tool_timeout_applies() -> None:
    async def slow(ctx: ToolContext[None]) -> str:
        await anyio.sleep(5)
        return "late"

    model = ScriptedModel([[("slow", {})], "ok"])
    agent = Agent(
        model=model,
        instructions="",
        tools=[define_tool(name="slow", description="d", run=slow)],
        tool_timeout=0.05,
    )
    with anyio.fail_after(3):
        run = await agent.run("go")
    assert "timed out after 0.05 s" in run.transcript()


def test_transcript_format() -> None:
    call = ToolCall("c1", "echo", {"text": "hi"})
    text = format_transcript(
        [
            UserMessage("Say hi"),
            AssistantMessage("Calling.", (call,)),
            ToolResultsMessage((ToolCallResult("c1", "echo", "HI\n\nmore", terminate=True),)),
            AssistantMessage("Done."),
        ]
    )
    assert text == (
        "user: Say hi\n"
        "assistant: Calling.\n"
        'assistant -> echo {"text": "hi"}  [c1]\n'
        "tool <- echo [c1] (ok, terminate)\n"
        "    HI\n"
        "\n"
        "    more\n"
        "assistant: Done.\n"
    )


def test_the_scripted_example_runs_on_a_local_folder(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "scripted_agent.py"), "--local", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    out = done.stdout
    assert "[log] report: greet.py prints Hello, world!" in out
    assert "    Created greet.py (2 lines, 39 bytes)." in out
    assert "    Hello, world!\n\n    Exit code: 0\n" in out
    assert '    greet.py:2:print(f"Hello, {NAME}!")' in out
    assert out.endswith("stop: terminated after 5 turns\n")
    # The workspace was deleted (the backend's own state folder is hidden).
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []
    # The agent runtime's guide shows this very output.
    assert f"```\n{out}```\n" in (ROOT / "docs" / "agent-runtime.md").read_text()


def test_the_guide_quotes_the_example_as_it_is() -> None:
    section = (ROOT / "docs" / "agent-runtime.md").read_text()
    example = (ROOT / "examples" / "scripted_agent.py").read_text()
    start = section.index("```python\n") + len("```python\n")
    quoted = section[start : section.index("```", start)]
    assert quoted.strip() in example

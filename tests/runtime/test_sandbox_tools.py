"""The six sandbox tools: bound to the agent's instance, raw arguments passed through,
the daemon's text and is_error shown, the concurrency rules of TOOLS.md kept."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime_client import (
    Agent,
    LocalSandboxFactory,
    Sandbox,
    SandboxToolResult,
    SandboxUnavailable,
    ScriptedModel,
    Tool,
    ToolCall,
    ToolContext,
    ToolRunner,
    define_tool,
)
from runtime_client.sandbox_tools import SANDBOX_TOOL_NAMES, sandbox_tool, sandbox_tools
from runtime_client.scripted import ScriptTurn

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalSandboxFactory]:
    async with LocalSandboxFactory(tmp_path) as factory:
        yield factory


class RecordingSandbox:
    """Stands in for a Sandbox: records when each call starts and ends."""

    def __init__(self, delays: Mapping[str, float] | None = None) -> None:
        self.events: list[str] = []
        self.arguments: list[tuple[str, dict[str, Any]]] = []
        self.call_ids: list[str | None] = []
        self.delays = delays or {}
        self.in_flight = 0
        self.most_in_flight = 0

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], *, tool_call_id: str | None = None
    ) -> SandboxToolResult:
        label = str(arguments.get("label", name))
        self.arguments.append((name, dict(arguments)))
        self.call_ids.append(tool_call_id)
        self.events.append(f"start {label}")
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await anyio.sleep(self.delays.get(label, 0.02))
        self.in_flight -= 1
        self.events.append(f"end {label}")
        return SandboxToolResult(text=f"{name} ok", is_error=False, fields={"label": label})


def runner_on(sandbox: RecordingSandbox) -> ToolRunner:
    fake: Any = sandbox
    return ToolRunner(sandbox_tools(fake), sandbox=fake)


def calls(*specs: tuple[str, dict[str, Any]]) -> list[ToolCall]:
    return [ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(specs)]


async def test_six_tools_in_tools_md_order(local: LocalSandboxFactory) -> None:
    sandbox = await local.create_sandbox("six")
    tools = sandbox_tools(sandbox)
    assert tuple(tool.name for tool in tools) == SANDBOX_TOOL_NAMES
    assert all(tool.description for tool in tools)
    with pytest.raises(ValueError, match="no sandbox tool"):
        sandbox_tool(sandbox, "rm")


async def test_raw_arguments_reach_the_sandbox_which_judges_them(
    local: LocalSandboxFactory,
) -> None:
    sandbox = await local.create_sandbox("raw")
    runner = ToolRunner(sandbox_tools(sandbox), sandbox=sandbox)
    # "path" is an alias of file_path; the sandbox, not the runtime, knows that.
    wrote = await runner.run(ToolCall("1", "write", {"path": "a.txt", "content": "one\ntwo\n"}))
    assert (wrote.is_error, wrote.content) == (False, "Created a.txt (2 lines, 8 bytes).")
    assert wrote.fields["created"] is True
    # A numeric string, as models send, coerced by the tool.
    read = await runner.run(ToolCall("2", "read", '{"file_path": "a.txt", "offset": "2"}'))
    assert read.content == "     2\ttwo"
    # An unknown key: the tool's own error, listing the valid keys.
    bad = await runner.run(ToolCall("3", "read", {"file_path": "a.txt", "lines": 3}))
    assert bad.is_error
    assert bad.content == (
        "Error: unknown parameter lines for read. Valid parameters: file_path, offset, limit."
    )
    # A model-facing failure is a normal result the model sees as it is.
    ran = await runner.run(ToolCall("4", "bash", {"command": "exit 3"}))
    assert ran.is_error
    assert ran.content.endswith("Exit code: 3")
    assert ran.fields["exit_code"] == 3
    # The content is the tool's text, not JSON.
    assert ran.output == ran.content


async def test_tools_are_bound_to_their_instance(local: LocalSandboxFactory) -> None:
    one = await local.create_sandbox("one")
    two = await local.create_sandbox("two")
    await ToolRunner(sandbox_tools(one)).run(
        ToolCall("1", "write", {"file_path": "mine.txt", "content": "1"})
    )
    found = await ToolRunner(sandbox_tools(two)).run(ToolCall("2", "glob", {"pattern": "*"}))
    assert found.content.startswith("No files found")


class FlakySandbox:
    """Unavailable for the first ``failures`` calls."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.call_ids: list[str | None] = []

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], *, tool_call_id: str | None = None
    ) -> SandboxToolResult:
        self.call_ids.append(tool_call_id)
        if len(self.call_ids) <= self.failures:
            raise SandboxUnavailable("workspace container is gone")
        return SandboxToolResult(text="Created a (1 line, 1 byte).", is_error=False)


@pytest.fixture
def no_retry_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runtime_client.sandbox_tools._RETRY_DELAY_S", 0.0)


@pytest.mark.usefixtures("no_retry_delay")
async def test_a_broken_sandbox_is_an_error_result_not_a_crash() -> None:
    fake: Any = FlakySandbox(failures=2)
    result = await ToolRunner(sandbox_tools(fake)).run(ToolCall("1", "read", {"file_path": "x"}))
    assert result.is_error
    assert result.content == "Error: read failed: SandboxUnavailable: workspace container is gone"


@pytest.mark.usefixtures("no_retry_delay")
async def test_an_unavailable_sandbox_is_retried_once_with_the_same_call_id() -> None:
    flaky = FlakySandbox(failures=1)
    fake: Any = flaky
    logs: list[str] = []
    runner = ToolRunner(sandbox_tools(fake), on_log=lambda line: logs.append(line.message))
    result = await runner.run(ToolCall("call_1", "write", {"file_path": "a", "content": "x"}))
    assert not result.is_error
    first, again = flaky.call_ids
    assert first == again  # so sandboxd replays a write that did happen
    assert first is not None and first.endswith(":call_1")
    assert logs == ["sandbox unavailable; retrying write once"]


async def test_every_call_gets_a_sandbox_call_id_of_its_own() -> None:
    # A scripted model says "call_1" in every run, some servers repeat ids
    # every turn: the sandbox must never take a new call for a retry of an old one.
    sandbox = RecordingSandbox()
    fake: Any = sandbox
    for _ in range(2):
        runner = ToolRunner(sandbox_tools(fake))
        await runner.run(ToolCall("call_1", "bash", {"command": "true"}))
        await runner.run(ToolCall("call_1", "write", {"file_path": "a", "content": ""}))
    ids = sandbox.call_ids
    assert len(set(ids)) == 4
    assert all(i is not None and i.endswith(":call_1") for i in ids)


async def test_running_twice_on_one_instance_really_runs_twice(
    local: LocalSandboxFactory,
) -> None:
    script: list[ScriptTurn] = [
        [("bash", {"command": "echo run >> log.txt; wc -l < log.txt"})],
        "ok",
    ]
    outputs = []
    for _ in range(2):
        agent = Agent(model=ScriptedModel(script), instructions="i", sandbox=local)
        run = await agent.run("go", instance_id="twice")
        outputs.append(run.messages[2].results[0].content)  # type: ignore[union-attr]
    assert outputs == ["1\n\nExit code: 0", "2\n\nExit code: 0"]


async def test_read_grep_glob_run_in_parallel() -> None:
    sandbox = RecordingSandbox()
    turn = calls(
        ("read", {"label": "r", "file_path": "a"}),
        ("grep", {"label": "g", "pattern": "x"}),
        ("glob", {"label": "G", "pattern": "*"}),
    )
    await runner_on(sandbox).run_turn(turn)
    assert sandbox.most_in_flight == 3


async def test_writes_and_edits_to_one_path_keep_arrival_order() -> None:
    # The first call is the slowest: a runner that reordered would finish it last.
    sandbox = RecordingSandbox({"w1": 0.1, "e1": 0.05, "e2": 0.0, "other": 0.0})
    turn = calls(
        ("write", {"label": "w1", "file_path": "src/app.py", "content": ""}),
        ("edit", {"label": "e1", "file_path": "./src/app.py", "old_string": "", "new_string": ""}),
        ("write", {"label": "other", "file_path": "README.md", "content": ""}),
        ("edit", {"label": "e2", "path": "/workspace/src/app.py", "old_string": "a"}),
    )
    results = await runner_on(sandbox).run_turn(turn)
    same_path = [e for e in sandbox.events if "other" not in e]
    assert same_path == ["start w1", "end w1", "start e1", "end e1", "start e2", "end e2"]
    # A write to another path did not wait.
    assert sandbox.events.index("end other") < sandbox.events.index("end w1")
    assert [r.fields["label"] for r in results] == ["w1", "e1", "other", "e2"]


async def test_bash_calls_of_one_instance_run_one_at_a_time_in_order() -> None:
    sandbox = RecordingSandbox({"b1": 0.15, "b2": 0.0, "b3": 0.03})
    turn = calls(
        ("bash", {"label": "b1", "command": "sleep 1"}),
        ("read", {"label": "r", "file_path": "x"}),
        ("bash", {"label": "b2", "command": "true"}),
        ("bash", {"label": "b3", "command": "true"}),
    )
    await runner_on(sandbox).run_turn(turn)
    bash = [e for e in sandbox.events if e.endswith(("b1", "b2", "b3"))]
    assert bash == ["start b1", "end b1", "start b2", "end b2", "start b3", "end b3"]
    assert sandbox.events.index("end r") < sandbox.events.index("end b1")


async def test_arguments_are_passed_through_untouched() -> None:
    sandbox = RecordingSandbox()
    raw = {"pattern": "TODO", "-i": "true", "-C": "2", "include": "*.py", "bogus": [1]}
    await runner_on(sandbox).run(ToolCall("1", "grep", raw))
    assert sandbox.arguments == [("grep", raw)]


async def test_an_agent_with_a_factory_gets_the_six_tools(local: LocalSandboxFactory) -> None:
    async def note(ctx: ToolContext[None]) -> str:
        assert ctx.sandbox is not None
        return ctx.sandbox.instance_id

    model = ScriptedModel([[("note", {}), ("write", {"file_path": "f", "content": "x"})], "ok"])
    agent = Agent(
        model=model,
        instructions="i",
        tools=[define_tool(name="note", description="d", run=note)],
        sandbox=local,
    )
    run = await agent.run("go", instance_id="inst-1")
    names = [spec.name for spec in model.requests[0].tools]
    assert names == [*SANDBOX_TOOL_NAMES, "note"]
    assert run.sandbox is not None and run.sandbox.instance_id == "inst-1"
    results = run.messages[2].results  # type: ignore[union-attr]
    assert [r.content for r in results] == ["inst-1", "Created f (1 line, 1 byte)."]
    assert (await run.sandbox.read_file("f")).data == b"x"


async def test_a_factory_may_provide_its_own_tool_set(tmp_path: Path) -> None:
    async def shout(ctx: ToolContext[None]) -> str:
        return "HEY"

    class ReadOnlyFactory(LocalSandboxFactory):
        def tools(self, sandbox: Sandbox) -> Sequence[Tool[Any]]:
            return [
                sandbox_tool(sandbox, "read"),
                define_tool(name="write", description="Shout.", run=shout),
            ]

    async with ReadOnlyFactory(tmp_path) as factory:
        model = ScriptedModel([[("write", {})], "done"])
        agent = Agent(model=model, instructions="i", sandbox=factory)
        run = await agent.run("go", instance_id="ro")
    assert [spec.name for spec in model.requests[0].tools] == ["read", "write"]
    assert run.messages[2].results[0].content == "HEY"  # type: ignore[union-attr]


async def test_an_agent_with_a_factory_needs_an_instance_id(local: LocalSandboxFactory) -> None:
    agent = Agent(model=ScriptedModel(["hi"]), instructions="i", sandbox=local)
    with pytest.raises(ValueError, match="instance_id"):
        await agent.run("go")


async def test_the_model_sees_tool_text_not_json(local: LocalSandboxFactory) -> None:
    model = ScriptedModel([[("bash", {"command": "echo hi"})], "done"])
    await Agent(model=model, instructions="i", sandbox=local).run("go", instance_id="txt")
    tool_results = model.requests[1].messages[-1]
    content = tool_results.results[0].content  # type: ignore[union-attr]
    assert content == "hi\n\nExit code: 0"
    with pytest.raises(json.JSONDecodeError):
        json.loads(content)

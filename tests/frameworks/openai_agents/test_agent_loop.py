"""openai-agents' own agent loop (``Runner`` with a ``SandboxAgent`` and its default
capabilities) driven by the SDK's scripted model, in sandboxd workspaces:
the model writes a program with apply_patch, runs it and reads what it printed
with exec_command; then a run paused for an approval resumes from its
serialized state, in a workspace made again from its snapshot."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from agents import RunConfig, Runner, function_tool
from agents.items import ToolCallOutputItem
from agents.run_state import RunState
from agents.sandbox import LocalSnapshotSpec, SandboxAgent, SandboxRunConfig
from agents.testing import ScriptedModel, assistant_message, function_call
from openai.types.responses import ResponseCustomToolCall

from runtime_client.contrib._common import transport_for
from runtime_client.contrib.openai_agents import SandboxdSandboxClient, SandboxdSandboxClientOptions
from runtime_client.errors import NotFound
from runtime_client.sandbox import Sandbox
from tests.helpers import Daemon

pytestmark = pytest.mark.anyio

PROGRAM = "*** Begin Patch\n*** Add File: answer.py\n+print(6 * 7)\n*** End Patch\n"


def _patch(call_id: str, patch: str) -> ResponseCustomToolCall:
    return ResponseCustomToolCall(
        call_id=call_id, id=call_id, input=patch, name="apply_patch", type="custom_tool_call"
    )


def _outputs(items: Sequence[object]) -> dict[str, str]:
    """Each tool call's output, by call id."""
    outputs: dict[str, str] = {}
    for item in items:
        if isinstance(item, ToolCallOutputItem):
            raw: Any = item.raw_item
            call_id = raw["call_id"] if isinstance(raw, dict) else raw.call_id
            outputs[str(call_id)] = str(item.output)
    return outputs


async def test_a_sandbox_agent_writes_runs_and_reads_in_a_workspace(
    client: SandboxdSandboxClient, frameworks_daemon: Daemon
) -> None:
    model = ScriptedModel(
        [
            [_patch("call-write", PROGRAM)],
            [
                function_call(
                    "exec_command", {"cmd": "python3 answer.py > out.txt"}, call_id="call-run"
                )
            ],
            [function_call("exec_command", {"cmd": "cat out.txt"}, call_id="call-read")],
            [assistant_message("The program printed 42.")],
        ]
    )
    agent = SandboxAgent(name="coder", model=model, instructions="Write, run, report.")
    session = await client.create(
        options=SandboxdSandboxClientOptions(instance_id=f"oa-loop-{secrets.token_hex(3)}")
    )
    try:
        async with session:
            result = await Runner.run(
                agent,
                "Compute 6*7 with a Python program.",
                run_config=RunConfig(sandbox=SandboxRunConfig(session=session)),
            )
            model.assert_complete()
            outputs = _outputs(result.new_items)
            assert set(outputs) == {"call-write", "call-run", "call-read"}
            assert "Process exited with code 0" in outputs["call-run"]
            assert outputs["call-read"].rstrip().endswith("42")
            assert result.final_output == "The program printed 42."
            # It happened in the workspace: seen through sandboxd itself.
            workspace = Sandbox(transport_for(frameworks_daemon.target), session.state.instance_id)  # type: ignore[attr-defined]
            assert (await workspace.read_file("/workspace/answer.py")).data == b"print(6 * 7)"
            assert (await workspace.read_file("/workspace/out.txt")).data == b"42\n"
    finally:
        await client.delete(session)


async def test_a_paused_run_resumes_from_its_state_in_a_restored_workspace(
    client: SandboxdSandboxClient, frameworks_daemon: Daemon, tmp_path: Path
) -> None:
    """Upstream's test_runner_pause_resume, on sandboxd: the run's own session is torn
    down at the pause (snapshot persisted, workspace deleted); resuming from the
    serialized RunState makes the workspace again and restores the snapshot."""

    @function_tool(name_override="approval_tool", needs_approval=True)
    def approval_tool() -> str:
        return "approved"

    first_model = ScriptedModel(
        [
            [
                _patch(
                    "call-write",
                    "*** Begin Patch\n*** Add File: note.txt\n+step one\n*** End Patch\n",
                )
            ],
            [function_call("approval_tool", {}, call_id="call-approval")],
        ]
    )
    options = SandboxdSandboxClientOptions(instance_id=f"oa-pause-{secrets.token_hex(3)}")
    run_config = RunConfig(
        sandbox=SandboxRunConfig(
            client=client, options=options, snapshot=LocalSnapshotSpec(base_path=tmp_path)
        )
    )
    agent = SandboxAgent(name="sandbox", model=first_model, tools=[approval_tool])
    first = await Runner.run(agent, "Note step one, then ask for approval.", run_config=run_config)
    assert len(first.interruptions) == 1
    state = first.to_state()
    assert state._sandbox is not None and state._sandbox["backend_id"] == "sandboxd"
    with pytest.raises(NotFound):  # the paused run's workspace is gone; its snapshot is not
        await Sandbox(transport_for(frameworks_daemon.target), options.instance_id or "").info()

    second_model = ScriptedModel(
        [
            [function_call("exec_command", {"cmd": "cat note.txt"}, call_id="call-read")],
            [assistant_message("done")],
        ]
    )
    resumed_agent = SandboxAgent(name="sandbox", model=second_model, tools=[approval_tool])
    restored = await RunState.from_json(resumed_agent, state.to_json())
    restored.approve(restored.get_interruptions()[0])
    other_client = SandboxdSandboxClient(client.target)  # as another process would
    second = await Runner.run(
        resumed_agent, restored, run_config=RunConfig(sandbox=SandboxRunConfig(client=other_client))
    )
    outputs = _outputs(second.new_items)
    assert outputs["call-approval"] == "approved"
    assert outputs["call-read"].rstrip().endswith("step one")
    assert second.final_output == "done"
    second_model.assert_complete()

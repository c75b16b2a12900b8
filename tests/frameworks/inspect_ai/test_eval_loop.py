"""inspect_ai's own agent loop (generate with tools), its scripted model
(mockllm) and the "sandboxd-workspace" sandbox: the model writes a program with
inspect's text_editor (its tools, installed under /var/tmp), runs it with bash
and reads its output, all in the sample's sandboxd workspace."""

from __future__ import annotations

from pathlib import Path

import pytest
from inspect_ai import Task, eval_async
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageTool, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate, use_tools
from inspect_ai.tool import bash, text_editor
from inspect_ai.util import SandboxEnvironmentSpec, sandbox

from runtime_client.contrib._common import NAME, transport_for
from runtime_client.contrib.inspect_ai import SandboxdConfig
from tests.helpers import Daemon

pytestmark = [pytest.mark.anyio]

PROGRAM = "import platform\nopen('out.txt', 'w').write(f'hello from {platform.node()}')\n"
MODEL = "mockllm/model"


def script() -> list[ModelOutput]:
    calls = [
        ("text_editor", {"command": "create", "path": "/workspace/hello.py", "file_text": PROGRAM}),
        ("bash", {"command": "cd /workspace && python3 hello.py && echo ran as $(id -u)"}),
        ("text_editor", {"command": "view", "path": "/workspace/out.txt"}),
    ]
    outputs = [ModelOutput.for_tool_call(MODEL, name, args) for name, args in calls]
    outputs.append(ModelOutput.from_content(MODEL, "done"))
    for output in outputs:
        # Given, so that mockllm does not count tokens with tiktoken, whose
        # encoding it would download (this machine reaches no such host).
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return outputs


@scorer(metrics=[accuracy()])
def wrote_and_ran():  # type: ignore[no-untyped-def]
    async def score(state: TaskState, target: Target) -> Score:
        # Read back through the sample's own sandbox, not through the model.
        written = await sandbox().read_file("/workspace/out.txt")
        return Score(value=1 if written == target.text else 0, answer=written)

    return score


async def test_mockllm_writes_runs_and_reads_in_a_sandboxd_sandbox(
    frameworks_daemon: Daemon, tmp_path: Path
) -> None:
    task = Task(
        dataset=[
            Sample(input="Write hello.py, run it, show me out.txt.", target="hello from sandbox")
        ],
        solver=[use_tools([bash(timeout=60), text_editor()]), generate()],
        scorer=wrote_and_ran(),
        sandbox=SandboxEnvironmentSpec(NAME, SandboxdConfig(target=frameworks_daemon.target)),
    )
    model = get_model(MODEL, custom_outputs=script())
    [log] = await eval_async(task, model=model, log_dir=str(tmp_path))
    assert log.status == "success", log.error
    assert log.samples is not None
    [sample] = log.samples
    tools = [m for m in sample.messages if isinstance(m, ChatMessageTool)]
    assert [m.function for m in tools] == ["text_editor", "bash", "text_editor"]
    assert [m.error for m in tools] == [None, None, None]
    assert "ran as 1000" in tools[1].text  # the workspace's unprivileged user
    assert "hello from sandbox" in tools[2].text  # the container's hostname
    assert sample.scores is not None and sample.scores["wrote_and_ran"].value == 1
    # The sample's sandbox was deleted when the sample ended.
    left = await transport_for(frameworks_daemon.target).list_sandboxes()
    assert [box.instance_id for box in left if box.instance_id.startswith("inspect-")] == []

"""Swap per agent: the same scripted session on sandboxd/Docker and on a local folder,
two agents in one process, gives the same transcript.

``factory`` and ``instance_id`` are the Docker fixtures (tests/docker_fixtures.py):
a real daemon on the real engine and image.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

from runtime_client import (
    Agent,
    AgentRun,
    GrpcSandboxFactory,
    LocalSandboxFactory,
    SandboxFactory,
    ScriptedModel,
)

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parents[2]


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "scripted_agent", ROOT / "examples" / "scripted_agent.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# A wider session than the example: paging, model-facing errors, concurrent
# read-only calls, ordered writes, a failing command. Nothing in it names the
# working folder (a "not found" error does, and it is /workspace on one backend
# and a host folder on the other).
SESSION: list[Any] = [
    [
        (
            "write",
            {"file_path": "src/app.py", "content": "".join(f"x{i} = {i}\n" for i in range(30))},
        ),
        ("write", {"file_path": "notes.txt", "content": "TODO: one\ntodo: two\n"}),
    ],
    [
        ("read", {"file_path": "src/app.py", "offset": "10", "limit": 3}),
        ("grep", {"pattern": "todo", "-i": True, "output_mode": "count"}),
        ("glob", {"pattern": "**/*.py"}),
    ],
    [
        ("edit", {"file_path": "src/app.py", "old_string": "= 1", "new_string": "= 100"}),
        ("edit", {"path": "src/app.py", "old_string": "x1 = 1\n", "new_string": "x1 = -1\n"}),
        ("edit", {"file_path": "src/app.py", "old_string": "nowhere", "new_string": "x"}),
    ],
    [("bash", {"command": "python3 -c 'import src.app' ; grep -c x src/app.py; exit 2"})],
    [("bash", {"command": "cat src/app.py | head -3", "timeout": "5000"})],
    [("read", {"file_path": "notes.txt", "bogus": 1})],
    "Finished.",
]


async def run_both(
    grpc_factory: GrpcSandboxFactory,
    tmp_path: Path,
    make_agent: Any,
    instance_id: str,
) -> tuple[AgentRun, AgentRun]:
    runs: dict[str, AgentRun] = {}
    async with LocalSandboxFactory(tmp_path) as local_factory:

        async def one(label: str, sandbox_factory: SandboxFactory) -> None:
            runs[label] = await make_agent(sandbox_factory).run(
                "Do the task.", instance_id=instance_id
            )

        # Two agents in one process, at the same time, each on its own backend.
        async with anyio.create_task_group() as group:
            group.start_soon(one, "docker", grpc_factory)
            group.start_soon(one, "local", local_factory)
        for run in runs.values():
            assert run.sandbox is not None
            await run.sandbox.delete()
    return runs["docker"], runs["local"]


async def test_the_example_session_is_the_same_on_docker_and_local(
    factory: GrpcSandboxFactory, tmp_path: Path, instance_id: str
) -> None:
    example = load_example()
    with anyio.fail_after(120):
        docker_run, local_run = await run_both(factory, tmp_path, example.make_agent, instance_id)
    assert docker_run.stop_reason == local_run.stop_reason == "terminated"
    assert "    Hello, world!\n" in docker_run.transcript()
    assert docker_run.transcript() == local_run.transcript()


async def test_a_wider_session_is_the_same_on_docker_and_local(
    factory: GrpcSandboxFactory, tmp_path: Path, instance_id: str
) -> None:
    def make_agent(sandbox_factory: SandboxFactory) -> Agent:
        return Agent(model=ScriptedModel(SESSION), instructions="i", sandbox=sandbox_factory)

    with anyio.fail_after(120):
        docker_run, local_run = await run_both(factory, tmp_path, make_agent, instance_id)
    transcript = docker_run.transcript()
    assert docker_run.stop_reason == "completed"
    assert "(error)" in transcript  # the model-facing errors really happened
    assert "Exit code: 2" in transcript
    assert transcript == local_run.transcript()

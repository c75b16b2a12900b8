"""An executor that dies while its sandbox is quiet (issue 23, item 15),
through the real engine, under runc and gVisor: the next call runs once,
on a new executor, and the daemon's ping of a quiet channel
(sandboxd.backends.shared.session) is answered by the real executor.

The race itself (a call sent between the executor's death and the engine
closing the stream: under gVisor the attach stream ends only when the
engine has processed the container's exit) cannot be timed from outside
reliably; tests/unit/test_channel_probe.py reproduces it with a channel
that dies on the next write, and fails with the ping removed.
"""

from __future__ import annotations

import anyio
import docker
import pytest

from runtime_client import GrpcSandboxFactory
from sandboxd.backends.shared.session import PROBE_AFTER_IDLE_S
from sandboxd.contract.models import Runtime, SandboxOptions
from tests.docker_fixtures import container_name

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(240)]


def _kill_executor(client: docker.DockerClient, name: str) -> None:
    """SIGKILL the executor (the init's oldest child) from outside, as root,
    and wait until the engine has seen its container stop (the init exits
    with it). Detached: an exec's own stream may never end in a container
    that stops under it."""
    container = client.containers.get(name)
    container.exec_run(["sh", "-c", "kill -9 $(pgrep -o -P 1)"], user="0", detach=True)
    container.wait(condition="not-running", timeout=30)


@pytest.mark.parametrize("runtime", [Runtime.RUNC, Runtime.RUNSC], ids=lambda r: r.value)
async def test_the_first_call_after_the_executor_died_runs_once_on_a_new_one(
    factory: GrpcSandboxFactory,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
    runtime: Runtime,
) -> None:
    await factory.transport.create_sandbox(instance_id, SandboxOptions(runtime=runtime))
    box = await factory.create_sandbox(instance_id)
    try:
        before = await box.exec("echo $PPID")
        await anyio.to_thread.run_sync(
            _kill_executor, docker_client, container_name(namespace, instance_id)
        )
        await anyio.sleep(PROBE_AFTER_IDLE_S + 0.2)
        result = await box.call_tool("bash", {"command": "echo ran >> calls; echo $PPID"})
        assert "Exit code: 0" in result.text, result.text
        # Once, and on a new executor.
        assert (await box.read_file("calls")).data == b"ran\n"
        assert (await box.exec("echo $PPID")).exit_code == 0
        assert before.exit_code == 0
    finally:
        await box.delete()

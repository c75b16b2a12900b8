"""Issue 23 items 9 and 11: a request cannot lift the operator's limits, and
an option the engine would choke on is refused by name, on the real engine.

A fork asking for 1 TiB of memory was accepted (item 9); ``cpus=64`` and
``image="--privileged"`` reached Docker and came back UNAVAILABLE, ``cpus``
NaN came back INTERNAL (item 11). Each is now INVALID_ARGUMENT naming the
limit or the rule, and leaves nothing behind.
"""

from __future__ import annotations

import math

import docker
import pytest

from runtime_client import GrpcSandboxFactory, Sandbox
from sandboxd.contract.errors import InvalidArgument, NotFound
from sandboxd.contract.models import SandboxOptions
from tests.docker_fixtures import container_name
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(180)]

TiB = 1 << 40


async def test_a_fork_cannot_lift_the_memory_limit(
    box: Sandbox, daemon: Daemon, docker_client: docker.DockerClient, namespace: str
) -> None:
    new_id = f"{box.instance_id}-big"
    with pytest.raises(InvalidArgument) as refused:
        await box.fork(new_id, options=SandboxOptions(memory_bytes=TiB))
    assert f"memory_bytes {TiB} is over this daemon's maximum of" in refused.value.message
    assert "SANDBOXD_MAX_MEMORY_BYTES" in refused.value.message
    async with GrpcSandboxFactory(daemon.target) as factory:
        with pytest.raises(NotFound):
            await factory.transport.get_sandbox(new_id)
    assert not docker_client.containers.list(
        all=True, filters={"name": container_name(namespace, new_id)}
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (SandboxOptions(memory_bytes=TiB), "SANDBOXD_MAX_MEMORY_BYTES"),
        (SandboxOptions(cpus=64), "cpus 64 is over this daemon's maximum of"),
        (SandboxOptions(cpus=math.nan), "cpus must be a finite number"),
        (SandboxOptions(cpus=math.inf), "cpus must be a finite number"),
        (SandboxOptions(pids_limit=1 << 30), "SANDBOXD_MAX_PIDS_LIMIT"),
        (SandboxOptions(image="--privileged"), "is not an image reference"),
    ],
    ids=["memory", "cpus-64", "cpus-nan", "cpus-inf", "pids", "image-flag"],
)
async def test_a_create_over_the_limits_is_refused_by_name(
    daemon: Daemon,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
    options: SandboxOptions,
    message: str,
) -> None:
    async with GrpcSandboxFactory(daemon.target) as factory:
        with pytest.raises(InvalidArgument, match=message.replace("(", r"\(")):
            await factory.transport.create_sandbox(instance_id, options)
        with pytest.raises(NotFound):
            await factory.transport.get_sandbox(instance_id)
    assert not docker_client.containers.list(
        all=True, filters={"name": container_name(namespace, instance_id)}
    )

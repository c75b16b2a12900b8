"""The network policy on a real engine: mode allow keeps the container without
a network (the gateway is its only way out), mode full is the bridge, and a
policy set at create or changed at runtime survives a daemon killed and
started again (labels and the engine-kept note, never daemon memory)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import docker
import pytest

from runtime_client import GrpcSandboxFactory
from runtime_client.sandbox import Sandbox
from sandboxd.contract.models import NetworkPolicy, SandboxOptions
from sandboxd.contract.network import FULL_WARNING
from tests.docker_fixtures import IMAGE, RUN_PREFIX, container_name, remove_namespace_resources
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

PYPI = NetworkPolicy("allow", ("pypi.org", "files.pythonhosted.org:443"))
LATER = NetworkPolicy("allow", ("github.com:443",), ("gist.github.com",))


@pytest.fixture
def namespace(docker_client: docker.DockerClient) -> Iterator[str]:
    name = f"{RUN_PREFIX}-np{secrets.token_hex(2)}"
    yield name
    remove_namespace_resources(docker_client, name)


def _daemon(factory: type[Daemon], folder: Path, name: str, namespace: str) -> Daemon:
    return factory(
        folder / f"{name}.sock",
        *("--namespace", namespace, "--image", IMAGE, "--pool-size", "0"),
    )


async def _refusal(box: Sandbox, url: str) -> str:
    """The status and body curl gets through the workload's proxy (HTTP_PROXY),
    tried until the restored gateway listens."""
    command = f"curl -sS -w ' %{{http_code}}' {url}"
    deadline = time.monotonic() + 15
    while True:
        result = await box.exec(command)
        if result.exit_code == 0 or time.monotonic() > deadline:
            body, _, code = result.stdout.decode().strip().rpartition(" ")
            return f"{code} {body}".strip()
        await anyio.sleep(0.2)


def _network_mode(client: docker.DockerClient, namespace: str, instance_id: str) -> str:
    container = client.containers.get(container_name(namespace, instance_id))
    return str(container.attrs["HostConfig"]["NetworkMode"])


async def test_the_policy_survives_a_daemon_killed_and_started_again(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, namespace: str, tmp_path: Path
) -> None:
    first = await anyio.to_thread.run_sync(_daemon(daemon_factory, tmp_path, "a", namespace).start)
    async with GrpcSandboxFactory(first.target) as factory:
        await factory.transport.create_sandbox("kept", SandboxOptions(network=PYPI))
        await factory.transport.create_sandbox("changed", SandboxOptions(network=PYPI))
        await factory.transport.set_network_policy("changed", LATER)
        full, _ = await factory.transport.create_sandbox(
            "bridged", SandboxOptions(network=NetworkPolicy("full"))
        )
        assert full.warnings == (FULL_WARNING,)
    # Mode allow is no network for the container: the gateway is the only way out.
    assert _network_mode(docker_client, namespace, "kept") == "none"
    assert _network_mode(docker_client, namespace, "bridged") == "bridge"
    await anyio.to_thread.run_sync(first.kill)

    second = await anyio.to_thread.run_sync(_daemon(daemon_factory, tmp_path, "b", namespace).start)
    async with GrpcSandboxFactory(second.target) as factory:
        found = {i.instance_id: i for i in await factory.transport.list_sandboxes()}
        assert found["kept"].options.network == PYPI
        assert found["changed"].options.network == LATER
        assert found["bridged"].warnings == (FULL_WARNING,)
        # The restored policy is enforced: the gateway (listening again where the
        # killed daemon's listen was) refuses a host no rule names and says why,
        # and the decision is in the sandbox's log.
        box = Sandbox(factory.transport, "kept")
        refused = await _refusal(box, "http://example.org/")
        assert refused == "403 sandboxd egress: example.org is not in this sandbox's allow list"
        logged = await factory.transport.network_log("kept")
        assert [(e.host, e.allowed, e.via) for e in logged] == [("example.org", False, "http")]
        # The runtime change is the one in force after the restart, and can change again.
        again = await factory.transport.set_network_policy("changed", NetworkPolicy())
        assert again.options.network == NetworkPolicy()
        assert (await factory.transport.get_sandbox("changed")).options.network == NetworkPolicy()
        for instance_id in found:
            await factory.transport.delete_sandbox(instance_id)

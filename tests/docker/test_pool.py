"""The warm pool on a real engine: served from the pool, refilled, never reused."""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import anyio
import docker
import pytest
from docker.models.containers import Container

from runtime_client import GrpcSandboxFactory, SandboxOptions
from sandboxd.backends.shared import labels
from tests.docker_fixtures import IMAGE, RUN_PREFIX, container_name
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


def _pool_containers(client: docker.DockerClient, namespace: str) -> list[Container]:
    found = client.containers.list(
        all=True, filters={"label": [f"{labels.NAMESPACE}={namespace}", f"{labels.POOLED}=true"]}
    )
    return [c for c in found if labels.instance_from_name(namespace, c.name or "") is None]


async def _wait_for_pool(
    factory: GrpcSandboxFactory, client: docker.DockerClient, namespace: str, timeout: float = 60
) -> Container:
    """The pool's one ready workspace, once the daemon reports it ready."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (await factory.transport.get_status()).pool.ready == 1:
            (container,) = _pool_containers(client, namespace)
            return container
        await anyio.sleep(0.05)
    raise AssertionError("the warm pool did not fill")


async def test_pool_serves_refills_and_never_shares_files(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    namespace = f"{RUN_PREFIX}-pool{secrets.token_hex(2)}"
    daemon = daemon_factory(
        tmp_path / "p.sock", "--namespace", namespace, "--image", IMAGE, "--pool-size", "1"
    )
    await anyio.to_thread.run_sync(daemon.start)

    async with GrpcSandboxFactory(daemon.target) as factory:
        first_pooled = await _wait_for_pool(factory, docker_client, namespace)
        status = await factory.transport.get_status()
        assert (status.backend, status.namespace, status.pool.size) == ("docker", namespace, 1)
        one = await factory.create_sandbox("one")
        claimed = docker_client.containers.get(container_name(namespace, "one"))
        # Served from the pool: the very container the pool had started.
        assert claimed.id == first_pooled.id
        assert claimed.labels[labels.POOLED] == "true"
        await one.write_file("secret.txt", "only for one")
        assert (await one.exec("cat secret.txt")).stdout == b"only for one"

        refill = await _wait_for_pool(factory, docker_client, namespace)
        assert refill.id != first_pooled.id

        two = await factory.create_sandbox("two")
        second = docker_client.containers.get(container_name(namespace, "two"))
        assert second.id == refill.id
        # A fresh volume: nothing of instance "one" is visible.
        assert second.labels[labels.VOLUME] != claimed.labels[labels.VOLUME]
        assert await two.list_dir(".") == []
        assert (await two.exec("ls -A /workspace /tmp | grep -c secret")).stdout == b"0\n"

        # Non-default options cannot come from the pool: they start cold.
        await factory.transport.create_sandbox("three", SandboxOptions(env={"A": "1"}))
        third = docker_client.containers.get(container_name(namespace, "three"))
        assert labels.POOLED not in third.labels

        status = await factory.transport.get_status()
        assert status.pool.served == 2 and status.pool.started >= 2
        for instance in ("one", "two", "three"):
            await factory.transport.delete_sandbox(instance)

    # A stopping daemon removes its pool: pooled workspaces hold nobody's data.
    await anyio.to_thread.run_sync(daemon.terminate)
    assert _pool_containers(docker_client, namespace) == []

"""Lifetimes on the real clock and a real engine: a 5 s lifetime is kept within
2 s, with the daemon up, restarted (SIGKILL) before the end, and killed
between the end and the removal."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import docker
import pytest

from runtime_client import GrpcSandboxFactory, NotFound
from sandboxd.backends.shared import labels
from sandboxd.contract.models import SandboxOptions
from tests.docker_fixtures import IMAGE, RUN_PREFIX, container_name, remove_namespace_resources
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

LIFETIME_S = 5
#: How late a removal may be: the keeper's 1 s look plus the delete itself.
SLACK_S = 2.0


@pytest.fixture
def namespace(docker_client: docker.DockerClient) -> Iterator[str]:
    name = f"{RUN_PREFIX}-lt{secrets.token_hex(2)}"
    yield name
    remove_namespace_resources(docker_client, name)


def _daemon(factory: type[Daemon], folder: Path, name: str, namespace: str, *extra: str) -> Daemon:
    return factory(
        folder / f"{name}.sock",
        *("--namespace", namespace, "--image", IMAGE, "--pool-size", "0", *extra),
    )


async def _start(daemon: Daemon) -> Daemon:
    return await anyio.to_thread.run_sync(daemon.start)


def _exists(client: docker.DockerClient, namespace: str, instance_id: str) -> bool:
    found = client.api.containers(
        all=True, filters={"name": container_name(namespace, instance_id)}
    )
    return bool(found)


async def _removed_at(client: docker.DockerClient, namespace: str, instance_id: str) -> float:
    """When the container is gone (polled every 50 ms, for at most 30 s)."""
    deadline = time.time() + 30
    while time.time() < deadline:
        if not await anyio.to_thread.run_sync(_exists, client, namespace, instance_id):
            return time.time()
        await anyio.sleep(0.05)
    raise AssertionError(f"{instance_id} was never removed")


def _assert_nothing_left(client: docker.DockerClient, namespace: str) -> None:
    where = {"label": f"{labels.NAMESPACE}={namespace}"}
    assert client.api.containers(all=True, filters=where) == []
    # The notes go right after the container and its volume.
    deadline = time.time() + SLACK_S
    while client.volumes.list(filters=where) and time.time() < deadline:
        time.sleep(0.05)
    assert [v.name for v in client.volumes.list(filters=where)] == []  # notes included


async def test_a_5s_lifetime_is_kept_within_2s(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, namespace: str, tmp_path: Path
) -> None:
    daemon = await _start(_daemon(daemon_factory, tmp_path, "a", namespace))
    async with GrpcSandboxFactory(daemon.target) as factory:
        info, _ = await factory.transport.create_sandbox(
            "short", SandboxOptions(max_lifetime_seconds=LIFETIME_S)
        )
        end = info.expires_at_ms / 1000
        assert 0 < end - time.time() <= LIFETIME_S
        gone = await _removed_at(docker_client, namespace, "short")
        assert await factory.transport.list_sandboxes() == []
        # Its NOT_FOUND says why (the keeper notes it once its delete is done).
        said = ""
        for _ in range(int(SLACK_S / 0.05)):
            with pytest.raises(NotFound) as raised:
                await factory.transport.get_sandbox("short")
            said = str(raised.value)
            if "termination_reason" in said:
                break
            await anyio.sleep(0.05)
        assert "'short': deleted" in said and "(termination_reason: lifetime)" in said, said
    print(f"\n5 s lifetime: removed {gone - end:+.2f} s after its end")
    assert 0 <= gone - end <= SLACK_S
    _assert_nothing_left(docker_client, namespace)


async def test_the_lifetime_is_kept_across_a_daemon_killed_before_the_end(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, namespace: str, tmp_path: Path
) -> None:
    first = await _start(_daemon(daemon_factory, tmp_path, "a", namespace))
    async with GrpcSandboxFactory(first.target) as factory:
        await factory.transport.create_sandbox(
            "short", SandboxOptions(max_lifetime_seconds=LIFETIME_S)
        )
        await factory.transport.extend_sandbox("short", LIFETIME_S)  # a note rewritten
    end = (await _end_of(first, "short")) / 1000
    await anyio.to_thread.run_sync(first.kill)
    second = await _start(_daemon(daemon_factory, tmp_path, "b", namespace))
    assert time.time() < end, "the restart must come before the end"
    gone = await _removed_at(docker_client, namespace, "short")
    print(f"\n5 s lifetime across a restart: removed {gone - end:+.2f} s after its end")
    assert 0 <= gone - end <= SLACK_S
    async with GrpcSandboxFactory(second.target) as factory:
        assert await factory.transport.list_sandboxes() == []
    _assert_nothing_left(docker_client, namespace)


async def test_a_daemon_killed_between_the_end_and_the_removal_removes_it_when_back(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, namespace: str, tmp_path: Path
) -> None:
    first = await _start(_daemon(daemon_factory, tmp_path, "a", namespace))
    async with GrpcSandboxFactory(first.target) as factory:
        await factory.transport.create_sandbox(
            "short", SandboxOptions(max_lifetime_seconds=LIFETIME_S)
        )
    end = (await _end_of(first, "short")) / 1000
    await anyio.to_thread.run_sync(first.kill)
    await anyio.sleep(end - time.time() + 1)
    assert _exists(docker_client, namespace, "short"), "nobody removed it while down"
    second = _daemon(daemon_factory, tmp_path, "b", namespace)
    await _start(second)
    serving = time.time()
    gone = await _removed_at(docker_client, namespace, "short")
    print(f"\nexpired while down: removed {gone - serving:.2f} s after the daemon served")
    assert gone - serving <= SLACK_S
    _assert_nothing_left(docker_client, namespace)


async def _end_of(daemon: Daemon, instance_id: str) -> int:
    async with GrpcSandboxFactory(daemon.target) as factory:
        info = await factory.transport.get_sandbox(instance_id)
    assert info.expires_at_ms and info.state == "running"
    return info.expires_at_ms


async def test_an_idle_stop_is_listed_with_its_reason_then_deleted_after_its_time(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, namespace: str, tmp_path: Path
) -> None:
    daemon = _daemon(daemon_factory, tmp_path, "a", namespace, "--idle-check-interval-s", "0.5")
    await _start(daemon)
    options = SandboxOptions(idle_ttl_seconds=1, delete_after_stopped_seconds=3)
    async with GrpcSandboxFactory(daemon.target) as factory:
        await factory.transport.create_sandbox("idle", options)
        deadline = time.time() + 30
        while time.time() < deadline:
            info = await factory.transport.get_sandbox("idle")
            if info.state == "stopped":
                break
            await anyio.sleep(0.1)
        stopped = time.time()
        assert (info.state, info.termination_reason) == ("stopped", "idle")
        listed = await factory.transport.list_sandboxes()
        assert [(i.instance_id, i.state, i.termination_reason) for i in listed] == [
            ("idle", "stopped", "idle")
        ]
        gone = await _removed_at(docker_client, namespace, "idle")
    print(f"\nidle stop + delete_after_stopped 3 s: removed {gone - stopped:.2f} s after the stop")
    assert 3 - 0.5 <= gone - stopped <= 3 + SLACK_S
    _assert_nothing_left(docker_client, namespace)

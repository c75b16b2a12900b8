"""Named snapshots on a real engine: snapshot -> change -> restore three times
with a hash of every file, the daemon killed (SIGKILL) and started again
between each snapshot and its restore; a sandbox from a snapshot; nothing
left after (the snapshot volumes carry the namespace's labels)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import anyio
import docker
import pytest

from runtime_client import GrpcSandboxFactory, Sandbox
from sandboxd.backends.docker import disk
from sandboxd.backends.docker.snapshots import NAME
from sandboxd.backends.shared import labels
from sandboxd.contract.models import SandboxOptions
from tests.docker_fixtures import IMAGE, RUN_PREFIX, remove_namespace_resources
from tests.helpers import TEST_DISK_BYTES, Daemon
from tests.snapshot_checks import round_trips, tree

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


@pytest.fixture
def namespace(docker_client: docker.DockerClient) -> Iterator[str]:
    name = f"{RUN_PREFIX}-sn{secrets.token_hex(2)}"
    yield name
    remove_namespace_resources(docker_client, name)


async def test_snapshot_change_restore_three_times_across_daemon_restarts(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, namespace: str, tmp_path: Path
) -> None:
    args = ("--namespace", namespace, "--image", IMAGE, "--pool-size", "0")
    daemon = await anyio.to_thread.run_sync(daemon_factory(tmp_path / "a.sock", *args).start)
    factory = GrpcSandboxFactory(daemon.target)
    box = await factory.create_sandbox("snap")

    async def restart() -> None:
        nonlocal daemon, factory
        await factory.aclose()
        await anyio.to_thread.run_sync(daemon.kill)
        daemon = await anyio.to_thread.run_sync(daemon_factory(tmp_path / "a.sock", *args).start)
        factory = GrpcSandboxFactory(daemon.target)

    try:
        # The tier's workspaces have disk images: snapshots copy them whole.
        first = await round_trips(
            box, lambda: factory.transport, restart, "s", {"image-copy", "image-reflink"}
        )
        # Onto a disk of another size the image cannot be copied over: its files are.
        other = await factory.transport.create_from_snapshot(
            "s-0", "snap-big", SandboxOptions(disk_bytes=2 * TEST_DISK_BYTES)
        )
        assert other.method in {"copy", "reflink"}
        assert await tree(Sandbox(factory.transport, "snap-big")) == first
        await factory.transport.delete_sandbox("snap-big")
        # A copy a killed daemon left unfinished (a volume without its note) is
        # removed by the next start, the finished one kept.
        docker_client.volumes.create(
            name=f"sandboxd-{namespace}--snap-unfinished",
            labels={labels.MANAGED: "true", labels.NAMESPACE: namespace, NAME: "half"},
        )
        await restart()
        names = [v.name for v in docker_client.volumes.list(filters={"label": NAME})]
        assert f"sandboxd-{namespace}--snap-unfinished" not in names
        assert [s.name for s in await factory.transport.list_snapshots()] == ["s-0"]
        # Kept by the engine as labelled volumes (and images): none left once deleted.
        where = {"label": [f"{labels.NAMESPACE}={namespace}", NAME]}
        (volume,) = docker_client.volumes.list(filters=where)
        image = Path(volume.attrs["Labels"][disk.DISK_LABEL])
        assert await anyio.Path(image).exists()
        await factory.transport.delete_snapshot("s-0")
        assert docker_client.volumes.list(filters=where) == []
        assert not await anyio.Path(image).exists()
        await factory.transport.delete_sandbox("snap")
    finally:
        await factory.aclose()

"""Issue 23 item 4: two namespaces on one engine cannot destroy each other's
sandboxes.

Namespace ``N`` with instance ``x-victim`` and namespace ``N-x`` with
instance ``victim`` were one container name, one volume and one disk image
(``sandboxd-N-x-victim``): the second create met the first's name, failed,
and its clean-up removed the first's container, volume and disk image. Now
names are unambiguous (``sandboxd-<ns>_<id>``, no namespace holds ``_``),
nothing is removed without this daemon's namespace label, and a disk image
is created exclusively. Names are the engine's, not the runtime's: runc only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from runtime_client import GrpcSandboxFactory
from sandboxd.backends.shared import labels
from tests.docker_fixtures import IMAGE, RUN_PREFIX, remove_namespace_resources
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(240)]


def _daemon(folder: Path, namespace: str, disks: Path) -> Daemon:
    folder.mkdir(parents=True, exist_ok=True)
    return Daemon(
        folder / "sandboxd.sock",
        "--namespace", namespace,
        "--image", IMAGE,
        "--pool-size", "0",
        "--disk-dir", str(disks),
    )  # fmt: skip


@pytest.fixture
def namespaces(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[tuple[str, str]]:
    first = f"{RUN_PREFIX}-ns"
    yield first, f"{first}-x"
    remove_namespace_resources(docker_client, first)  # both start with it


async def test_a_namespace_cannot_remove_anothers_sandbox(
    tmp_path: Path, namespaces: tuple[str, str], docker_client: docker.DockerClient
) -> None:
    first_ns, second_ns = namespaces
    disks = tmp_path / "disks"  # shared, as the host's default folder is
    first = _daemon(tmp_path / "a", first_ns, disks).start()
    second = _daemon(tmp_path / "b", second_ns, disks).start()
    try:
        async with (
            GrpcSandboxFactory(first.target) as one,
            GrpcSandboxFactory(second.target) as two,
        ):
            victim = await one.create_sandbox("x-victim")
            await victim.write_file("keep.txt", "precious")
            # The other namespace's instance whose old name was the same.
            other = await two.create_sandbox("victim")
            await other.write_file("mine.txt", "other")
            assert (await victim.read_file("keep.txt")).data == b"precious"
            assert (await other.read_file("mine.txt")).data == b"other"
            names = {
                labels.resource_name(first_ns, "x-victim"),
                labels.resource_name(second_ns, "victim"),
            }
            assert len(names) == 2
            for name in names:
                assert docker_client.containers.get(name).labels[labels.MANAGED] == "true"
            # A delete in one leaves the other whole.
            await other.delete()
            assert (await victim.read_file("keep.txt")).data == b"precious"
            await victim.delete()
    finally:
        first.stop()
        second.stop()
    assert not list(disks.glob("*.img"))


async def test_a_workspace_named_the_old_way_is_renamed_and_kept(
    tmp_path: Path, namespaces: tuple[str, str], docker_client: docker.DockerClient
) -> None:
    namespace = namespaces[0]
    daemon = _daemon(tmp_path / "a", namespace, tmp_path / "disks").start()
    try:
        async with GrpcSandboxFactory(daemon.target) as factory:
            box = await factory.create_sandbox("old-one")
            await box.write_file("keep.txt", "from before")
    finally:
        daemon.stop()
    # As a daemon before the fix named it.
    legacy = f"sandboxd-{namespace}-old-one"
    docker_client.containers.get(labels.resource_name(namespace, "old-one")).rename(legacy)
    daemon = _daemon(tmp_path / "a", namespace, tmp_path / "disks").start()
    try:
        async with GrpcSandboxFactory(daemon.target) as factory:
            assert [s.instance_id for s in await factory.transport.list_sandboxes()] == ["old-one"]
            box = await factory.create_sandbox("old-one")  # the same one, adopted
            assert (await box.read_file("keep.txt")).data == b"from before"
            container = docker_client.containers.get(labels.resource_name(namespace, "old-one"))
            assert container.labels[labels.NAMESPACE] == namespace
            await box.delete()
    finally:
        daemon.stop()

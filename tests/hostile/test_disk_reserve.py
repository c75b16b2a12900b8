"""Issue 23 item 10: new disks are refused, with a clear error, before the
host's disk is full (a reserve the operator sets)."""

from __future__ import annotations

import os
from pathlib import Path

import docker
import pytest

from runtime_client import GrpcSandboxFactory
from sandboxd.contract.errors import NotFound, ResourceExhausted
from tests.docker_fixtures import IMAGE, RUN_PREFIX, remove_namespace_resources
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(120)]


async def test_a_new_disk_is_refused_under_the_reserve(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    disks = tmp_path / "disks"
    disks.mkdir()
    found = os.statvfs(disks)
    free = found.f_bavail * found.f_frsize
    namespace = f"{RUN_PREFIX}-reserve"
    daemon = Daemon(
        tmp_path / "sandboxd.sock",
        "--namespace", namespace,
        "--image", IMAGE,
        "--pool-size", "0",
        "--disk-dir", str(disks),
        # As if the host had less free than the operator keeps.
        "--disk-reserve-bytes", str(free + (1 << 40)),
    ).start()  # fmt: skip
    try:
        async with GrpcSandboxFactory(daemon.target) as factory:
            with pytest.raises(ResourceExhausted, match="SANDBOXD_DISK_RESERVE_BYTES"):
                await factory.create_sandbox("over")
            with pytest.raises(NotFound):
                await factory.transport.get_sandbox("over")
        assert list(disks.glob("*.img")) == []
    finally:
        daemon.stop()
        remove_namespace_resources(docker_client, namespace)

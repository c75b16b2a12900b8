"""SANDBOXD_DISK_BYTES: every workspace volume is an ext4 image of that size,
so one sandbox cannot fill the host's disk, and nothing of it outlives delete."""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

import anyio
import docker
import pytest

from runtime_client import GrpcSandboxFactory, SandboxOptions
from sandboxd.backends import disk, labels
from tests.docker_fixtures import IMAGE, RUN_PREFIX, container_name
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

LIMIT = 64 << 20


async def test_a_workspace_cannot_write_past_its_disk_limit(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    namespace = f"{RUN_PREFIX}-disk{secrets.token_hex(2)}"
    disks = tmp_path / "disks"
    daemon = daemon_factory(
        tmp_path / "d.sock",
        "--namespace", namespace,
        "--image", IMAGE,
        "--pool-size", "1",
        "--disk-bytes", str(LIMIT),
        "--disk-dir", str(disks),
    )  # fmt: skip
    await anyio.to_thread.run_sync(daemon.start)
    async with GrpcSandboxFactory(daemon.target) as factory:
        cold, _ = await factory.transport.create_sandbox("cold", SandboxOptions(env={"A": "1"}))
        box = await factory.create_sandbox("cold")
        size = int((await box.exec("df -B1 --output=size /workspace | tail -1")).stdout)
        assert LIMIT * 0.8 < size <= LIMIT
        filled = await box.exec("head -c 100000000 /dev/zero > big; echo $?; stat -c %s big")
        status, written = filled.stdout.split()
        assert status != b"0" and int(written) < LIMIT
        assert b"No space left on device" in filled.stderr
        # The sandbox's own files still work once it frees space.
        await box.remove("big")
        await box.write_file("after.txt", "ok")
        assert (await box.read_file("after.txt")).data == b"ok"

        pooled = await factory.create_sandbox("pooled")  # the pool's volumes are limited too
        pooled_size = int((await pooled.exec("df -B1 --output=size /workspace | tail -1")).stdout)
        assert pooled_size <= LIMIT

        volume = docker_client.volumes.get(cold.volume)
        image = Path(volume.attrs["Labels"][disk.DISK_LABEL])
        assert image.parent == disks and _exists(image)
        assert container_name(namespace, "cold") in {
            c.name for c in docker_client.containers.list()
        }
        for instance in ("cold", "pooled"):
            await factory.transport.delete_sandbox(instance)
    # Nothing outlives delete: no volume, no image, no loop device.
    assert not _exists(image)
    assert _loop_devices_of(image) == ""
    await anyio.to_thread.run_sync(daemon.terminate)
    # The stopped daemon removed its pool's workspace, disk image included.
    assert docker_client.volumes.list(filters={"label": f"{labels.NAMESPACE}={namespace}"}) == []
    assert _images_in(disks) == []


def _exists(path: Path) -> bool:
    return path.exists()


def _images_in(folder: Path) -> list[Path]:
    return list(folder.glob("*.img"))


def _loop_devices_of(image: Path) -> str:
    found = subprocess.run(
        ["losetup", "--associated", str(image)], capture_output=True, text=True, check=False
    )
    return found.stdout.strip()

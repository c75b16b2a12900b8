"""SANDBOXD_DISK_BYTES: every workspace volume is an ext4 image of that size,
so one sandbox cannot fill the host's disk, and nothing of it outlives delete."""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

import anyio
import docker
import pytest

from runtime_client import GrpcSandboxFactory, InvalidArgument, SandboxOptions
from sandboxd.backends.docker import disk
from sandboxd.backends.shared import labels
from sandboxd.backends.shared.settings import DEFAULT_DISK_BYTES
from sandboxd.contract.models import DiskLimit
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


async def test_loop_devices_are_reattached_when_the_daemon_starts(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    # A host reboot loses every loop device; the images and volumes remain.
    # On this shared machine another run may take the freed device before the
    # new daemon is up (it then logs that it cannot re-attach): try again.
    for attempt in range(3):
        if await _reboot_scenario(daemon_factory, docker_client, tmp_path / str(attempt)):
            return
    pytest.fail("the loop device was taken by another run three times in a row")


async def _reboot_scenario(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, folder: Path
) -> bool:
    namespace = f"{RUN_PREFIX}-rdisk{secrets.token_hex(2)}"
    await anyio.to_thread.run_sync(folder.mkdir)
    flags = (
        "--namespace", namespace, "--image", IMAGE, "--pool-size", "0",
        "--disk-bytes", str(LIMIT), "--disk-dir", str(folder / "disks"),
    )  # fmt: skip
    first = daemon_factory(folder / "d1.sock", *flags)
    await anyio.to_thread.run_sync(first.start)
    async with GrpcSandboxFactory(first.target) as factory:
        box = await factory.create_sandbox("kept")
        await box.write_file("kept.txt", "still here")
        volume = docker_client.volumes.get((await box.info()).volume)
    await anyio.to_thread.run_sync(first.terminate)
    container = docker_client.containers.get(container_name(namespace, "kept"))
    await anyio.to_thread.run_sync(lambda: container.stop(timeout=5))
    image = Path(volume.attrs["Labels"][disk.DISK_LABEL])
    device = volume.attrs["Options"]["device"]
    await anyio.to_thread.run_sync(_detach, device)
    assert _loop_devices_of(image) == ""

    second = daemon_factory(folder / "d2.sock", *flags)
    await anyio.to_thread.run_sync(second.start)
    async with GrpcSandboxFactory(second.target) as factory:
        reattached = device in _loop_devices_of(image)
        if reattached:
            box = await factory.create_sandbox("kept")
            assert (await box.read_file("kept.txt")).data == b"still here"
        else:
            log = await anyio.to_thread.run_sync(second.log.read_text)
            assert "cannot be re-attached" in log, log[-2000:]
        await factory.transport.delete_sandbox("kept")
    assert not _exists(image)
    return reattached


def _detach(device: str) -> None:
    subprocess.run(["losetup", "--detach", device], check=True)


async def test_the_disk_limit_is_on_by_default_and_status_says_so(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    namespace = f"{RUN_PREFIX}-ddef{secrets.token_hex(2)}"
    disks = tmp_path / "disks"
    daemon = daemon_factory(
        tmp_path / "d.sock",
        "--namespace", namespace, "--image", IMAGE, "--pool-size", "1",
        "--disk-dir", str(disks),
        test_disks=False,  # no --disk-bytes: the product's default
    )  # fmt: skip
    await anyio.to_thread.run_sync(daemon.start)
    async with GrpcSandboxFactory(daemon.target) as factory:
        status = await factory.transport.get_status()
        assert status.disk == DiskLimit(enforced=True, bytes=DEFAULT_DISK_BYTES)
        box = await factory.create_sandbox("default")
        size = int((await box.exec("df -B1 --output=size /workspace | tail -1")).stdout)
        assert DEFAULT_DISK_BYTES * 0.9 < size <= DEFAULT_DISK_BYTES
        volume = docker_client.volumes.get((await box.info()).volume)
        image = Path(volume.attrs["Labels"][disk.DISK_LABEL])
        # Sparse: a fresh 4 GiB disk takes a few MiB of the host's disk.
        assert _exists(image) and (await anyio.to_thread.run_sync(image.stat)).st_blocks * 512 < (
            16 << 20
        )
        await box.delete()
        assert not _exists(image) and _loop_devices_of(image) == ""
    await anyio.to_thread.run_sync(daemon.terminate)
    # The pool's workspace went with the daemon: no volume, image or loop device.
    assert docker_client.volumes.list(filters={"label": f"{labels.NAMESPACE}={namespace}"}) == []
    assert _images_in(disks) == []
    assert [line for line in disk.loop_devices() if str(disks) in line] == []


@pytest.mark.parametrize("case", ["host-lacks-it", "turned-off"])
async def test_without_a_disk_limit_the_daemon_says_so_loudly(
    case: str, daemon_factory: type[Daemon], docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    namespace = f"{RUN_PREFIX}-dno{secrets.token_hex(2)}"
    # A disk folder that cannot exist (under a regular file) stands for a host
    # where the probe fails; disk_bytes=0 is the operator's explicit "no limit".
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    flags = (
        ("--disk-dir", str(blocker / "disks")) if case == "host-lacks-it" else ("--disk-bytes", "0")
    )
    daemon = daemon_factory(
        tmp_path / "d.sock", "--namespace", namespace, "--image", IMAGE, "--pool-size", "0", *flags
    )
    await anyio.to_thread.run_sync(daemon.start)
    async with GrpcSandboxFactory(daemon.target) as factory:
        status = await factory.transport.get_status()
        assert not status.disk.enforced and status.disk.bytes == 0
        log = await anyio.to_thread.run_sync(daemon.log.read_text)
        if case == "host-lacks-it":
            assert "a disk image cannot be made" in status.disk.reason
            assert '"level": "warning"' in log and "DISK LIMIT NOT ENFORCED" in log, log[-2000:]
        else:
            assert "disk_bytes=0" in status.disk.reason
            assert "disk limit off (disk_bytes=0)" in log, log[-2000:]
        box = await factory.create_sandbox("plain")  # still works, on a plain volume
        await box.write_file("a.txt", "ok")
        volume = docker_client.volumes.get((await box.info()).volume)
        assert disk.DISK_LABEL not in (volume.attrs.get("Labels") or {})
        assert (volume.attrs.get("Options") or {}).get("device") is None
        if case == "turned-off":  # a plain volume's fork and snapshot: its folder, copied
            forked = await box.fork("plain-2")
            assert forked.fork_result is not None and forked.fork_result.method == "copy"
            assert (await forked.read_file("a.txt")).data == b"ok"
            await forked.delete()
            assert (await box.snapshot("kept")).method == "copy"
            await box.write_file("a.txt", "changed")
            assert (await box.restore("kept")).method == "copy"
            assert (await box.read_file("a.txt")).data == b"ok"
            await factory.transport.delete_snapshot("kept")
        await box.delete()


async def test_a_killed_daemons_pool_disks_are_removed_by_the_next_start(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    namespace = f"{RUN_PREFIX}-dkill{secrets.token_hex(2)}"
    disks = tmp_path / "disks"
    flags = ("--namespace", namespace, "--image", IMAGE, "--disk-dir", str(disks))
    first = daemon_factory(tmp_path / "d1.sock", *flags, "--pool-size", "1")
    await anyio.to_thread.run_sync(first.start)
    async with GrpcSandboxFactory(first.target) as factory:
        for _ in range(600):  # the pool's workspace, with its disk
            if (await factory.transport.get_status()).pool.ready >= 1:
                break
            await anyio.sleep(0.1)
    pooled = _images_in(disks)
    assert len(pooled) == 1 and _loop_devices_of(pooled[0]) != ""
    await anyio.to_thread.run_sync(first.kill)  # SIGKILL: no clean-up of its own
    assert _images_in(disks) == pooled

    second = daemon_factory(tmp_path / "d2.sock", *flags, "--pool-size", "0")
    await anyio.to_thread.run_sync(second.start)
    assert _images_in(disks) == [] and _loop_devices_of(pooled[0]) == ""
    assert docker_client.volumes.list(filters={"label": f"{labels.NAMESPACE}={namespace}"}) == []
    await anyio.to_thread.run_sync(second.terminate)


async def test_a_sandbox_asks_its_own_disk_size_within_the_maximum(
    factory: GrpcSandboxFactory,
) -> None:
    """SandboxOptions.disk_bytes: a 32 MiB disk instead of the daemon's 64 MiB; over
    the operator's maximum is refused and nothing is made."""
    info, _ = await factory.transport.create_sandbox(
        f"disk-{secrets.token_hex(3)}", SandboxOptions(disk_bytes=32 << 20)
    )
    try:
        assert info.options.disk_bytes == 32 << 20
        box = await factory.create_sandbox(info.instance_id)
        size = int((await box.exec("df -B1 --output=size /workspace | tail -1")).stdout)
        assert (32 << 20) * 0.7 < size <= 32 << 20  # ext4 keeps some; the default is 64 MiB
    finally:
        await factory.transport.delete_sandbox(info.instance_id)
    with pytest.raises(InvalidArgument, match="SANDBOXD_MAX_DISK_BYTES"):
        await factory.transport.create_sandbox("too-big", SandboxOptions(disk_bytes=1 << 50))

"""Streamed transfers and fork on the Docker backend (real engine, the docker
tier's 64 MiB per-workspace disks; 2 GiB ones for the 200 MiB file)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import docker
import pytest

from runtime_client import GrpcSandboxFactory, Sandbox
from sandboxd.backends.docker.backend import disk
from tests import transfer_checks as checks
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


@pytest.fixture
async def sandbox(factory: GrpcSandboxFactory, instance_id: str) -> AsyncIterator[Sandbox]:
    box = await factory.create_sandbox(instance_id)
    try:
        yield box
    finally:
        await box.delete()


async def test_200_mib_file_up_and_down_bounded_rss(
    roomy_factory: GrpcSandboxFactory, roomy_daemon: Daemon, instance_id: str
) -> None:
    assert roomy_daemon.proc is not None
    box = await roomy_factory.create_sandbox(instance_id)
    try:
        await checks.big_file_round_trip(box, roomy_daemon.proc.pid)
    finally:
        await box.delete()


async def test_cut_stream_leaves_previous_content(sandbox: Sandbox) -> None:
    await checks.cut_stream_keeps_old(sandbox)


async def test_upload_cas(sandbox: Sandbox) -> None:
    await checks.cas(sandbox)


@pytest.mark.parametrize("kind", sorted(checks.HOSTILE))
async def test_hostile_tar_refused(sandbox: Sandbox, kind: str) -> None:
    await checks.hostile_tar(sandbox, kind)


async def test_links_resolving_outside_are_left_out_of_an_upload(sandbox: Sandbox) -> None:
    await checks.links_out_left_out(sandbox)


async def test_links_resolving_outside_are_left_out_of_a_download(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    await checks.links_out_not_downloaded(sandbox, tmp_path)


async def test_symlink_planted_by_the_workload_is_not_followed(sandbox: Sandbox) -> None:
    await checks.symlink_planted_by_the_workload(sandbox)


async def test_10000_file_tree_round_trip_as_sandbox_user(sandbox: Sandbox, tmp_path: Path) -> None:
    await checks.tree_round_trip(sandbox, tmp_path)
    owners = await sandbox.exec("stat -c %u:%g trees/up trees/up/d00/s0/f0.txt | sort -u")
    assert owners.stdout.decode().split() == ["1000:1000"]


async def test_gitignore_aware_download(sandbox: Sandbox, tmp_path: Path) -> None:
    await checks.gitignore_download(sandbox, tmp_path)


async def test_fork_then_diverge(
    sandbox: Sandbox, docker_client: docker.DockerClient, namespace: str
) -> None:
    forked = await checks.fork_then_diverge(sandbox, f"{sandbox.instance_id}-fork")
    try:
        # The source was unpaused after the copy, and the fork is a workspace of its own.
        assert (await sandbox.exec("echo alive")).stdout == b"alive\n"
        info = await forked.info()
        assert info.state == "running" and info.volume != (await sandbox.info()).volume
    finally:
        await forked.delete()


async def test_fork_of_a_disk_image_copies_the_image(
    sandbox: Sandbox, docker_client: docker.DockerClient
) -> None:
    """The tier's volumes are disk images: a fork copies the image whole (at a
    frozen, consistent point) instead of its files, says so, and owns a
    disk of its own that goes with it."""
    await sandbox.exec("mkdir -p tree && for i in $(seq 1 300); do echo $i > tree/f$i; done")
    # A writer busy in the source while it is forked: paused and frozen for
    # the copy, running again afterwards.
    await sandbox.exec("(while :; do date >> busy.log; done) > /dev/null 2>&1 &")
    forked = await sandbox.fork(f"{sandbox.instance_id}-img")
    try:
        assert forked.fork_result is not None
        assert forked.fork_result.method in ("image-copy", "image-reflink")
        counted = await forked.exec("ls tree | wc -l; cat tree/f300")
        assert counted.stdout == b"300\n300\n"
        # The fork's filesystem is clean and writable; the source's writer went on.
        assert (await forked.exec("tail -c 1 busy.log | od -c | head -1")).exit_code == 0
        before = int((await sandbox.exec("stat -c %s busy.log")).stdout)
        after = int((await sandbox.exec("sleep 0.3; stat -c %s busy.log")).stdout)
        assert after > before
        await forked.write_file("tree/f1", "fork")
        assert (await sandbox.read_file("tree/f1")).data == b"1\n"
        images = {
            docker_client.volumes.get((await box.info()).volume).attrs["Labels"][disk.DISK_LABEL]
            for box in (sandbox, forked)
        }
        assert len(images) == 2  # a disk of its own
        fork_image = Path(
            docker_client.volumes.get((await forked.info()).volume).attrs["Labels"][disk.DISK_LABEL]
        )
    finally:
        await sandbox.exec("pkill -f busy.log || true")
        await forked.delete()
    assert not _exists(fork_image)  # its image went with it


def _exists(path: Path) -> bool:
    return path.exists()


async def test_fork_errors(sandbox: Sandbox) -> None:
    other = f"{sandbox.instance_id}-other"
    await checks.fork_then_diverge(sandbox, other)
    try:
        await checks.fork_errors(sandbox, other, f"missing-{secrets.token_hex(3)}")
    finally:
        await Sandbox(sandbox._transport, other).delete()

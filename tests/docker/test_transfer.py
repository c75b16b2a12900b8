"""Streamed transfers and fork on the Docker backend (real engine, the docker
tier's 64 MiB per-workspace disks; 2 GiB ones for the 200 MiB file)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import docker
import pytest

from runtime_client import GrpcSandboxFactory, Sandbox
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


async def test_fork_errors(sandbox: Sandbox) -> None:
    other = f"{sandbox.instance_id}-other"
    await checks.fork_then_diverge(sandbox, other)
    try:
        await checks.fork_errors(sandbox, other, f"missing-{secrets.token_hex(3)}")
    finally:
        await Sandbox(sandbox._transport, other).delete()

"""Filling the disk: /tmp (a 256 MiB tmpfs, which also holds the executor's
state) and /workspace (a disk of its own: an ext4 image on a loop device,
64 MiB in the docker tier), and the feasibility proof of such a disk."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import docker
import docker.errors
import pytest

from runtime_client import Sandbox
from tests.docker_fixtures import IMAGE, RUN_PREFIX
from tests.helpers import TEST_DISK_BYTES, Daemon
from tests.hostile.support import Bystander, assert_serving, record

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(90)]

FILL_TMP = "dd if=/dev/zero of=/tmp/fill bs=64k 2>&1 | grep -o 'No space left on device'"


async def test_filling_tmp_stops_at_the_tmpfs_size_and_rm_recovers(
    daemon: Daemon, attacked: Sandbox, bystander: Bystander
) -> None:
    quiet = await bystander.p99_ms()
    filled = await attacked.exec(FILL_TMP, timeout_ms=30_000)
    assert b"No space left on device" in filled.stdout
    size = int((await attacked.exec("stat -c %s /tmp/fill")).stdout)
    assert 200 << 20 <= size <= 256 << 20
    during = await bystander.steady_p99_ms()  # while the attacked /tmp is full
    await assert_serving(daemon.target)
    # File verbs and Exec need nothing from /tmp: they keep working.
    await attacked.write_file("still.txt", "writable")
    assert (await attacked.read_file("still.txt")).data == b"writable"
    # The bash tool keeps its logs in /tmp/sandboxd: today it fails, after running.
    try:
        answer = (await attacked.bash("echo ran > ran.txt; echo done")).text.strip()
    except Exception as exc:  # today: INTERNAL, an untyped status
        answer = f"{type(exc).__name__}: {exc}"
    ran = (await attacked.exists("ran.txt")).exists
    await attacked.exec("rm -f /tmp/fill ran.txt")
    healed = await attacked.bash("echo back")
    assert not healed.is_error and healed.text.startswith("back")
    await record(
        bystander,
        "/tmp filled (256 MiB tmpfs)",
        quiet,
        during,
        outcome=f"ENOSPC at {size >> 20} MiB; file verbs fine; bash while full: "
        f"{answer!r} (the command ran: {ran}); rm heals",
    )


async def test_bash_reports_the_command_result_when_tmp_is_full(attacked: Sandbox) -> None:
    await attacked.exec(FILL_TMP, timeout_ms=30_000)
    result = await attacked.bash("echo done > ran.txt; echo done")
    assert not result.is_error and result.text.startswith("done")


async def test_workspace_stops_at_its_disk_limit(
    daemon: Daemon, attacked: Sandbox, bystander: Bystander
) -> None:
    quiet = await bystander.p99_ms()
    # fallocate reserves real blocks at once: the workspace's own disk refuses it.
    grown = await attacked.exec("fallocate -l 512M big", timeout_ms=30_000)
    assert grown.exit_code != 0 and b"No space left on device" in grown.stderr
    await attacked.remove("big")  # an ext4 fallocate may keep what it got before ENOSPC
    filled = await attacked.exec(
        "head -c 200000000 /dev/zero > fill; stat -c %s fill", timeout_ms=30_000
    )
    assert b"No space left on device" in filled.stderr
    written = int(filled.stdout.split()[-1])
    assert written < TEST_DISK_BYTES
    during = await bystander.steady_p99_ms()
    total = int((await attacked.exec("df -B1 --output=size /workspace | tail -1")).stdout)
    # Full, the workspace still answers, and works again once space is freed.
    await attacked.remove("fill")
    await attacked.write_file("after.txt", "ok")
    assert (await attacked.read_file("after.txt")).data == b"ok"
    await assert_serving(daemon.target)
    await record(
        bystander,
        "/workspace filled (64 MiB disk)",
        quiet,
        during,
        outcome=f"ENOSPC after {written >> 20} MiB of a {total >> 20} MiB disk; "
        "fallocate 512M refused; writable again once freed",
    )


async def test_workspace_volume_has_a_size_limit(attacked: Sandbox) -> None:
    # The docker tier's daemon gives each workspace a 64 MiB disk (tests/docker_fixtures.py).
    total = int((await attacked.exec("df -B1 --output=size /workspace | tail -1")).stdout)
    assert TEST_DISK_BYTES * 0.8 < total <= TEST_DISK_BYTES
    assert total < shutil.disk_usage("/var/lib/docker").total


def _root_with(*tools: str) -> str | None:
    if os.geteuid() != 0:
        return "needs root (losetup)"
    missing = [t for t in tools if shutil.which(t) is None]
    return f"missing {', '.join(missing)}" if missing else None


def test_a_loop_backed_ext4_volume_enforces_a_size_limit_here(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    """The feasibility proof for a per-workspace limit on this machine: the
    local volume driver cannot set up a loop device itself (``o=loop`` is a
    mount(8) feature, mount(2) answers EINVAL) and ``--opt size`` needs xfs
    project quotas (the engine says "no quota support" on this ext4), but a
    loop device attached first, formatted ext4 and owned by the sandbox user,
    mounts as an ordinary ``type=ext4,device=/dev/loopN`` volume."""
    problem = _root_with("losetup", "mkfs.ext4")
    if problem:
        pytest.skip(problem)
    image = tmp_path / "ws.img"
    with image.open("wb") as fh:
        fh.truncate(64 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "root_owner=1000:1000", str(image)], check=True)
    device = subprocess.run(
        ["losetup", "-f", "--show", str(image)], check=True, capture_output=True, text=True
    ).stdout.strip()
    name = f"sandboxd-{RUN_PREFIX}-loopprobe"
    try:
        docker_client.volumes.create(
            name, driver="local", driver_opts={"type": "ext4", "device": device}
        )
        out = docker_client.containers.run(
            IMAGE,
            [
                "sh",
                "-c",
                "dd if=/dev/zero of=/w/fill bs=1M count=100 2>&1 "
                "| grep -o 'No space left on device'; stat -c %s /w/fill",
            ],
            user="1000:1000",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            network_mode="none",
            volumes={name: {"bind": "/w", "mode": "rw"}},
            remove=True,
        ).decode()
        assert "No space left on device" in out
        assert int(out.split()[-1]) < 64 << 20
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.volumes.get(name).remove(force=True)
        subprocess.run(["losetup", "-d", device], check=False)

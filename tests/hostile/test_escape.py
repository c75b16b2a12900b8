"""Reaching out of the workspace: symlinks and ``..`` aimed at host paths,
/proc tricks, and the network with network off. Only loopback is ever
contacted; no packet is sent anywhere else."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from runtime_client import PermissionDenied, Sandbox
from tests.helpers import Daemon
from tests.hostile.support import PROBE_FILE, Bystander, assert_serving, measure_during, record

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(90)]


async def _repeat(probe: Callable[[], Awaitable[None]], seconds: float = 3.0) -> None:
    """Keep an instant attack going for as long as the bystander is measured,
    at an agent's pace: a tight loop of calls from this same client process
    would measure the client's own event loop, not the sandbox's isolation."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        await probe()
        await asyncio.sleep(0.05)


async def test_symlinks_and_dotdot_stay_inside_the_container(
    daemon: Daemon, attacked: Sandbox, bystander: Bystander, tmp_path: Path
) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text(token := secrets.token_hex(8))
    await attacked.exec("ln -s / root && ln -s /proc/1/root pid1root")

    async def probe() -> None:
        # `/` inside is the container's own read-only root, not the host's.
        assert (await attacked.read_file("root/etc/hostname")).data == b"sandbox\n"
        assert (await attacked.read_file("../../../../etc/hostname")).data == b"sandbox\n"
        with pytest.raises(PermissionDenied):  # PID 1 is non-dumpable
            await attacked.read_file("pid1root/etc/hostname")
        with pytest.raises(PermissionDenied):
            await attacked.read_file("root/etc/shadow")
        with pytest.raises(PermissionDenied):
            await attacked.write_file("root/etc/passwd", "x")

    other_volume = (await bystander.box.info()).volume
    quiet = await bystander.p99_ms()
    _, during = await measure_during(bystander, _repeat(probe), ramp=0.1)
    found = await attacked.exec(
        f"test -e {secret} && echo host-visible; "
        f"grep -c {other_volume} /proc/self/mountinfo; find / -xdev -name {PROBE_FILE} | wc -l",
        timeout_ms=30_000,
    )
    # Neither the host's files nor the other instance's workspace are there.
    assert found.stdout == b"0\n0\n", found.stdout
    assert secret.read_text() == token
    await assert_serving(daemon.target)
    await record(
        bystander,
        "symlink to / and ../../.. (host paths)",
        quiet,
        during,
        outcome="resolve inside the container's read-only root; shadow EACCES; "
        "no host or other-instance path reachable",
    )


async def test_proc_tricks_are_read_only_or_confined(
    daemon: Daemon, attacked: Sandbox, bystander: Bystander
) -> None:
    tricks = (
        "(cat /proc/1/root/etc/hostname) 2>&1 | grep -oE 'Permission denied|sandbox'; "
        "(echo 1 > /proc/sys/kernel/panic) 2>&1 | grep -o 'Read-only file system'; "
        "(echo b > /proc/sysrq-trigger) 2>&1 "
        "| grep -oE 'Read-only file system|Permission denied|No such file'; "
        "(head -c1 /proc/kcore) 2>&1 | grep -oE 'Permission denied|No such file'; "
        "(: > /sys/fs/cgroup/pids/pids.max) 2>&1 | grep -oE 'Read-only file system'; "
        "grep -c docker.sock /proc/self/mountinfo; "
        "grep -o '/var/lib/docker/volumes/[^ ]*' /proc/self/mountinfo"
    )
    quiet = await bystander.p99_ms()

    async def probe() -> None:
        await attacked.exec(tricks)

    _, during = await measure_during(bystander, _repeat(probe), ramp=0.1)
    lines = (await attacked.exec(tricks)).stdout.decode().splitlines()
    # PID 1 is non-dumpable: even its /proc/1/root is closed to the sandbox user.
    assert lines[:2] == ["Permission denied", "Read-only file system"], lines
    assert lines[2] in ("Read-only file system", "Permission denied", "No such file"), lines
    assert lines[3] in ("Permission denied", "No such file"), lines
    assert lines[4:6] == ["Read-only file system", "0"], lines
    # With its own disk, /workspace is /dev/loopN in mountinfo: no host path.
    leaked = lines[6:]
    assert leaked == [], leaked
    await assert_serving(daemon.target)
    await record(
        bystander,
        "/proc tricks",
        quiet,
        during,
        outcome="/proc/1/root denied (PID 1 non-dumpable); /proc/sys, sysrq, cgroupfs "
        "read-only; kcore denied; mountinfo shows /workspace as a loop device, no host path",
    )


async def test_network_off_leaves_only_loopback(
    daemon: Daemon, attacked: Sandbox, bystander: Bystander
) -> None:
    # Interfaces and routes are read, and a listener on 127.0.0.1 is connected
    # to: the only traffic this test makes is on the sandbox's own loopback.
    probe = (
        "ls /sys/class/net; tail -n +2 /proc/net/route | wc -l; "
        "python3 -c 'import socket\n"
        'srv = socket.create_server(("127.0.0.1", 0))\n'
        "c = socket.create_connection(srv.getsockname(), timeout=2)\n"
        'print("loopback-ok")\''
    )
    quiet = await bystander.p99_ms()

    async def check() -> None:
        await attacked.exec(probe)

    _, during = await measure_during(bystander, _repeat(check), ramp=0.1)
    lines = (await attacked.exec(probe)).stdout.decode().split()
    assert lines == ["lo", "0", "loopback-ok"], lines
    await assert_serving(daemon.target)
    await record(
        bystander,
        "network with network off",
        quiet,
        during,
        outcome="only lo; no route; loopback works inside the sandbox",
    )

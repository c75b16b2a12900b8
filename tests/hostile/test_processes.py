"""Process attacks: fork bomb, memory bomb, a command that ignores SIGTERM,
and killing the executor from inside."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import TypeVar

import anyio
import docker
import pytest

from runtime_client import GrpcSandboxFactory, ResourceExhausted, Sandbox, SandboxUnavailable
from sandboxd.backends.shared import labels
from sandboxd.contract.models import SandboxOptions
from tests.helpers import Daemon
from tests.hostile.support import (
    CPU_CONTENTION,
    Bystander,
    assert_serving,
    executor_pid,
    force_remove,
    measure_during,
    record,
    recover,
)

T = TypeVar("T")

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(90)]

# Each call forks two copies of itself in the background until the pids limit
# (512 by default) stops it; bash then gives up retrying and the bomb burns out.
FORK_BOMB = "f(){ f | f & }; f"
# The persistent kind: a process in its own session (out of reach of the bash
# call's process-group kill) that keeps every pid taken with sleepers and
# refills any slot that frees up, for ten minutes.
PID_HOG = (
    "setsid python3 -c 'import os, time\n"
    "end = time.time() + 600\n"
    "while time.time() < end:\n"
    "    try:\n"
    "        pid = os.fork()\n"
    "    except OSError:\n"
    "        time.sleep(0.02)\n"
    "        continue\n"
    "    if pid == 0:\n"
    "        time.sleep(600)\n"
    "        os._exit(0)\n' >/dev/null 2>&1 &\n"
    "sleep 1"
)


def _pids_current(container_id: str) -> int:
    # cgroup v1 with the cgroupfs driver, as on this engine; 0 where unknown.
    path = Path(f"/sys/fs/cgroup/pids/docker/{container_id}/pids.current")
    return int(path.read_text()) if path.exists() else 0


async def _bash_works(box: Sandbox, timeout: float) -> float | None:
    """Seconds until ``bash`` runs a command again, or None."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if not (await box.bash("echo alive", timeout=5000)).is_error:
            return round(time.monotonic() - started, 2)
        await asyncio.sleep(0.2)
    return None


async def test_fork_bomb_is_held_at_the_pids_limit(
    daemon: Daemon, attacked: Sandbox, bystander: Bystander
) -> None:
    quiet = await bystander.p99_ms()
    container_id = (await attacked.info()).container_id
    bomb = attacked.bash(FORK_BOMB, timeout=5000)
    bombed, during = await measure_during(bystander, _bombing(bomb, container_id), ramp=0.1)
    assert bombed.fields["exit_code"] == 0  # the shell exits; its forks run on a while
    assert _pids_current(container_id) <= 512
    await assert_serving(daemon.target)
    recovery = await _bash_works(attacked, timeout=30)
    assert recovery is not None, "the instance did not recover from a fork bomb in 30 s"
    await record(
        bystander,
        "fork bomb",
        quiet,
        during,
        recovery_s=recovery,
        outcome="held at <= 512 pids; bash fails with EAGAIN until the bomb burns out",
        known=CPU_CONTENTION,
    )


async def _bombing(bomb: Awaitable[T], container_id: str) -> T:
    # The attack lasts until the bomb has burnt out, not until the bash call
    # returns (at once): its forks hammer the pids limit for a second or so.
    result = await bomb
    for _ in range(200):  # 10 s at most
        if _pids_current(container_id) <= 50:
            break
        await asyncio.sleep(0.05)
    return result


@pytest.fixture
async def attacked_plain(
    factory: GrpcSandboxFactory,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
) -> AsyncIterator[Sandbox]:
    """``attacked`` with bash's shell-started-ahead off (``SANDBOXD_BASH_AHEAD=0``):
    no bash process exists between calls, so pid exhaustion wedges bash."""
    await factory.transport.create_sandbox(
        instance_id, SandboxOptions(env={"SANDBOXD_BASH_AHEAD": "0"})
    )
    box = await factory.create_sandbox(instance_id)
    yield box
    try:
        await box.delete()
    except Exception:
        force_remove(docker_client, namespace, instance_id)


async def test_pid_exhaustion_reports_a_clear_error(
    daemon: Daemon, attacked_plain: Sandbox, bystander: Bystander
) -> None:
    attacked = attacked_plain
    quiet = await bystander.p99_ms()
    await attacked.bash(PID_HOG, timeout=30_000)
    container_id = (await attacked.info()).container_id
    assert _pids_current(container_id) in (0, *range(500, 513))
    during = await bystander.steady_p99_ms()
    await assert_serving(daemon.target)
    # File verbs need no new process: they still work.
    assert (await attacked.exists(".")).exists
    wedged = await attacked.bash("echo alive", timeout=5000)
    assert wedged.is_error and "reached its process limit" in wedged.text
    with pytest.raises(Exception) as raised:
        await attacked.exec("echo alive", timeout_ms=5000)
    await record(
        bystander,
        "pid exhaustion (a process holding every pid)",
        quiet,
        during,
        outcome=f"wedged until the sleepers exit; bash: {wedged.text.strip()!r}; "
        f"Exec: {type(raised.value).__name__}: {raised.value}",
    )


async def test_pid_exhaustion_with_the_shell_started_ahead(
    daemon: Daemon, attacked: Sandbox
) -> None:
    # By default bash keeps one shell started ahead of its next call
    # (tools/bash.py, _Ready): started before the pids ran out, or on the pid
    # the last call's shell freed, it may go on serving calls, and a pid it
    # frees may serve an exec. Whatever finds no process gets the clear,
    # typed error: never a hang, never INTERNAL.
    await attacked.bash(PID_HOG, timeout=30_000)
    container_id = (await attacked.info()).container_id
    assert _pids_current(container_id) in (0, *range(500, 513))
    await assert_serving(daemon.target)
    assert (await attacked.exists(".")).exists
    for _ in range(3):
        outcome = await attacked.bash("echo alive", timeout=5000)
        if outcome.is_error:
            assert "reached its process limit" in outcome.text
        else:
            assert outcome.text.startswith("alive\n")
        try:
            ran = await attacked.exec("echo alive", timeout_ms=5000)
        except ResourceExhausted:
            continue
        assert ran.stdout == b"alive\n"


async def test_instance_recovers_from_pid_exhaustion(attacked: Sandbox) -> None:
    await attacked.bash(PID_HOG, timeout=30_000)
    await attacked.write_file("kept.txt", "on the volume")
    # Processes left by finished calls hold every pid: RestartSandbox is the
    # way out, and it keeps the files.
    await attacked.restart()
    assert (await attacked.read_file("kept.txt")).data == b"on the volume"
    # Recovered means bash works reliably again: a lone success can be a call
    # that won a freed pid before the hog took it back.
    deadline = time.monotonic() + 10
    streak = 0
    while streak < 3 and time.monotonic() < deadline:
        ok = not (await attacked.bash("echo alive", timeout=5000)).is_error
        streak = streak + 1 if ok else 0
        await asyncio.sleep(0.2)
    assert streak == 3, "bash still fails 10 s after the pids ran out"


async def test_memory_bomb_is_oom_killed_and_the_executor_survives(
    daemon: Daemon, attacked: Sandbox, bystander: Bystander
) -> None:
    quiet = await bystander.p99_ms()
    # 3 GiB of real (touched) memory against the 1 GiB default limit.
    bomb = attacked.bash("python3 -c 'x = bytearray(b\"x\") * (3 << 30)'", timeout=30_000)
    result, during = await measure_during(bystander, bomb, ramp=0.3)
    assert result.fields["exit_code"] == 137 and "Killed" in result.text
    await assert_serving(daemon.target)
    started = time.monotonic()
    assert (await attacked.bash("echo alive")).text.startswith("alive")
    await record(
        bystander,
        "memory bomb (3 GiB vs 1 GiB)",
        quiet,
        during,
        recovery_s=round(time.monotonic() - started, 2),
        outcome="the allocating process is OOM-killed (exit 137); the executor lives on",
        known=CPU_CONTENTION,
    )


async def test_command_ignoring_sigterm_is_killed_after_the_grace(
    daemon: Daemon, attacked: Sandbox, bystander: Bystander
) -> None:
    quiet = await bystander.p99_ms()
    stubborn = attacked.bash("trap '' TERM; sleep 60", timeout=1000)
    result, during = await measure_during(bystander, stubborn, ramp=0.2)
    assert result.fields["exit_code"] == 124 and result.fields["timed_out"] is True
    # 1 s timeout + 2 s SIGTERM grace, then SIGKILL.
    assert 2500 <= result.fields["duration_ms"] < 6000
    left = await attacked.exec("pgrep -x sleep || echo none")
    assert left.stdout == b"none\n"
    await assert_serving(daemon.target)
    await record(
        bystander,
        "SIGTERM ignored (1 s timeout)",
        quiet,
        during,
        outcome=f"exit 124 after {result.fields['duration_ms']} ms (SIGKILL after the grace)",
    )


async def test_executor_killed_from_inside_is_restarted(
    daemon: Daemon,
    attacked: Sandbox,
    bystander: Bystander,
    docker_client: docker.DockerClient,
    namespace: str,
) -> None:
    await attacked.write_file("keep.txt", "kept")
    pid = executor_pid((await attacked.exec("cat /proc/1/task/1/children")).stdout)
    quiet = await bystander.p99_ms()
    # The workload is another identity than the executor (issue 15): refused.
    refused = await attacked.exec(f"kill -9 {pid}", timeout_ms=5000)
    assert b"Operation not permitted" in refused.stderr, refused
    assert (await attacked.read_file("keep.txt")).data == b"kept"
    # The executor dying all the same (here: root in the container kills it)
    # restarts the container. The call in flight loses its answer.
    container = docker_client.containers.get(labels.resource_name(namespace, attacked.instance_id))
    killing = asyncio.create_task(attacked.exec("sleep 30", timeout_ms=40_000))
    await asyncio.sleep(0.5)
    await anyio.to_thread.run_sync(lambda: container.exec_run(["kill", "-9", str(pid)], user="0"))
    with pytest.raises(SandboxUnavailable, match="executor channel closed"):
        await killing
    started = time.monotonic()
    recovery, during = await measure_during(bystander, recover(attacked), ramp=0.05)
    assert (await attacked.read_file("keep.txt")).data == b"kept"
    assert executor_pid((await attacked.exec("cat /proc/1/task/1/children")).stdout) != 0
    await assert_serving(daemon.target)
    await record(
        bystander,
        f"kill -9 of the executor (PID {pid})",
        quiet,
        during,
        recovery_s=round(time.monotonic() - started, 2),
        outcome=f"container restarted from its volume; first answer after {recovery} s",
        known=CPU_CONTENTION + " (a container restart is CPU-heavy)",
    )

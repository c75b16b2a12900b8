"""Many `exec` calls at once on one sandbox, under runc and gVisor (runsc).

Under runsc the engine's pids limit counts gVisor's own host threads, not
the workload's processes: with the ptrace platform every guest process gets
a stub holding a thread per Sentry thread that ran it, and the stubs are
kept. Rounds of 32 concurrent ``sh -c`` calls took a sandbox at the default
512 past it within a few rounds (1,488 host tasks after ten), and gVisor's
Go runtime, unable to start a thread, ended the whole sandbox: exit code 2,
no message, every call in flight UNAVAILABLE. The Docker backend now gives
a runsc container its host budget (SANDBOXD_RUNSC_PIDS_LIMIT).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import docker
import pytest

from runtime_client import GrpcSandboxFactory, NotFound, Runtime, Sandbox, SandboxOptions
from tests.docker_fixtures import container_name

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(120)]

WIDTH = 32
ROUNDS = 4


@dataclass(frozen=True)
class Call:
    argv: list[str]
    stdin: bytes
    timeout_ms: int
    #: (exit code, stdout, stderr, timed out) the call must answer.
    want: tuple[int, bytes, bytes, bool]


def _call(n: int) -> Call:
    """One of five kinds of call, each with output only call ``n`` gives."""
    kind = n % 5
    if kind == 0:
        return Call(["sh", "-c", f"echo out{n}"], b"", 0, (0, f"out{n}\n".encode(), b"", False))
    if kind == 1:
        lines = "".join(f"{i}\n" for i in range(1, 3001)).encode()
        script = f"seq 1 3000; echo err{n} >&2; exit {n % 100 + 1}"
        return Call(["sh", "-c", script], b"", 0, (n % 100 + 1, lines, f"err{n}\n".encode(), False))
    if kind == 2:
        data = f"in{n}-".encode() * 4000
        return Call(["sh", "-c", "cat; echo"], data, 0, (0, data + b"\n", b"", False))
    if kind == 3:
        # The timeout fires: the group is stopped, the call still answers.
        return Call(["sh", "-c", f"sleep 30; echo never{n}"], b"", 400, (-15, b"", b"", True))
    script = f"sleep 0.{n % 7 + 1}; echo late{n}"
    return Call(["sh", "-c", script], b"", 0, (0, f"late{n}\n".encode(), b"", False))


async def _run(box: Sandbox, call: Call) -> tuple[int, bytes, bytes, bool]:
    result = await box.exec(call.argv, stdin=call.stdin, timeout_ms=call.timeout_ms)
    return (result.exit_code, result.stdout, result.stderr, result.timed_out)


async def _executor(box: Sandbox) -> str:
    # The parent of an exec'd command is the executor (setpriv and choom exec into it).
    return (await box.exec(["sh", "-c", "echo $PPID"])).stdout.decode().strip()


@pytest.mark.parametrize("runtime", [Runtime.RUNC, Runtime.RUNSC], ids=lambda r: r.value)
async def test_rounds_of_concurrent_execs_keep_the_executor(
    factory: GrpcSandboxFactory,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
    runtime: Runtime,
) -> None:
    await factory.transport.create_sandbox(instance_id, SandboxOptions(runtime=runtime))
    try:
        box = await factory.create_sandbox(instance_id)
        container = docker_client.containers.get(container_name(namespace, instance_id))
        started, executor = container.attrs["State"]["StartedAt"], await _executor(box)

        for round_ in range(ROUNDS):
            calls = [_call(round_ * WIDTH + i) for i in range(WIDTH)]
            got = await asyncio.gather(*(_run(box, c) for c in calls), return_exceptions=True)
            wrong = [(c.argv[-1], g) for c, g in zip(calls, got, strict=True) if g != c.want]
            assert wrong == [], f"round {round_}: {len(wrong)} calls answered wrong: {wrong[:3]}"

        container.reload()
        state = container.attrs["State"]
        assert (state["Status"], state["ExitCode"], state["StartedAt"]) == (
            "running",
            0,
            started,
        )
        assert await _executor(box) == executor
    finally:
        with contextlib.suppress(NotFound):
            await factory.transport.delete_sandbox(instance_id)

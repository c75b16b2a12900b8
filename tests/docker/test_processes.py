"""Long-lived processes on real containers: the scenarios of
``tests/grpc/test_processes`` over the executor channel, and re-attaching
after the daemon is SIGKILLed (the executor, and the process, live on)."""

from __future__ import annotations

import secrets
from pathlib import Path

import anyio
import docker
import pytest

from runtime_client import GrpcSandboxFactory
from tests.docker_fixtures import IMAGE, RUN_PREFIX
from tests.grpc.test_processes import SCENARIOS, Scenario
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(180)]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
async def test_scenario(factory: GrpcSandboxFactory, instance_id: str, scenario: Scenario) -> None:
    box = await factory.create_sandbox(instance_id)
    try:
        await scenario(box)
    finally:
        await box.delete()


async def test_reattach_after_the_daemon_is_sigkilled(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    namespace = f"{RUN_PREFIX}-proc{secrets.token_hex(2)}"
    args = ("--namespace", namespace, "--image", IMAGE)
    first = await anyio.to_thread.run_sync(
        lambda: daemon_factory(tmp_path / "a.sock", *args).start()
    )
    async with GrpcSandboxFactory(first.target) as factory:
        box = await factory.create_sandbox("survivor")
        # A REPL with state, and a counter that keeps printing through the crash.
        repl = await box.start_process(["python3", "-i", "-q"])
        await repl.write("total = 40\n")
        ticker = await box.start_process("for i in $(seq 1 30); do echo tick$i; sleep 0.2; done")
        with anyio.fail_after(30):
            await ticker.read_until("tick2\n")
        seen = ticker.offset - len(ticker._pending)

    await anyio.to_thread.run_sync(first.kill)
    await anyio.sleep(1.0)  # output goes on while no daemon exists

    second = await anyio.to_thread.run_sync(
        lambda: daemon_factory(tmp_path / "b.sock", *args).start()
    )
    try:
        async with GrpcSandboxFactory(second.target) as factory:
            box = await factory.create_sandbox("survivor")
            listed = {p.handle: p for p in await box.list_processes()}
            assert listed[repl.handle].state == "running"
            with anyio.fail_after(60):
                again = await box.connect_process(ticker.handle, offset=seen)
                rest = b"".join([chunk.data async for chunk in again])
                assert again.exit is not None and again.exit.info.exit_code == 0
                # The REPL kept its state: the variable set before the crash is there.
                repl_again = await box.connect_process(repl.handle, offset=repl.offset)
                await repl_again.write("print(total + 2)\n")
                assert (await repl_again.read_until("42")).endswith(b"42")
                await repl_again.close_stdin()
                assert (await repl_again.wait()).info.exit_code == 0
            expected = b"".join(f"tick{i}\n".encode() for i in range(3, 31))
            assert rest == expected
            await box.delete()
    finally:
        await anyio.to_thread.run_sync(second.stop)

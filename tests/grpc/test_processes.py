"""Long-lived processes: stdin, a terminal, re-attaching, bad input.

Each scenario runs on the local factory (the service in-process) and over
gRPC on a local-backend daemon; ``tests/docker/test_processes`` runs them
on a real container, plus re-attaching after the daemon is SIGKILLed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from runtime_client import GrpcSandboxFactory, LocalSandboxFactory, Sandbox
from runtime_client.errors import Conflict, InvalidArgument, NotFound
from sandboxd.contract.models import ProcessInfo
from sandboxd.daemon.assembly import Daemon
from sandboxd.daemon.settings import Settings

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

Scenario = Callable[[Sandbox], Awaitable[None]]


async def python_repl_line_by_line(box: Sandbox) -> None:
    proc = await box.start_process(["python3", "-i", "-q"])
    with anyio.fail_after(30):
        await proc.write("x = 6\n")
        await proc.write("print(x * 7)\n")
        assert (await proc.read_until("42")).endswith(b"42")
        await proc.write("import sys; print('to', 'stderr', file=sys.stderr)\n")
        assert b"to stderr" in await proc.read_until("to stderr")
        await proc.write("print(x + 1)\n")
        assert (await proc.read_until("7\n")).endswith(b"7\n")
        await proc.close_stdin()
        done = await proc.wait()
    assert done.info.state == "exited" and done.info.exit_code == 0
    assert done.missed == 0


async def terminal_program_sees_a_terminal(box: Sandbox) -> None:
    proc = await box.start_process(
        "tty; stty size; read line; stty size; echo got $line", pty=(24, 80)
    )
    with anyio.fail_after(30):
        first = await proc.read_until("24 80")
        assert b"/dev/pts/" in first and b"not a tty" not in first
        info = await proc.resize(50, 132)
        assert info.pty is True
        await proc.write("go\n")
        rest = await proc.read_until("got go")
        done = await proc.wait()
    assert b"50 132" in rest
    assert done.info.exit_code == 0


async def reattach_after_client_disconnect(box: Sandbox) -> None:
    proc = await box.start_process("for i in 1 2 3 4 5; do echo line$i; sleep 0.3; done")
    with anyio.fail_after(30):
        assert (await proc.read_until("line1\n")).endswith(b"line1\n")
        seen = proc.offset - len(proc._pending)
        await proc.detach()
        await anyio.sleep(0.8)  # it runs on while nobody is attached
        again = await box.connect_process(proc.handle, offset=seen)
        rest = b"".join([chunk.data async for chunk in again])
        assert again.exit is not None and again.exit.info.exit_code == 0
        # And from the start: everything is still kept.
        whole = await box.connect_process(proc.handle)
        everything = b"".join([chunk.data async for chunk in whole])
    assert rest == b"line2\nline3\nline4\nline5\n"
    assert everything == b"line1\n" + rest
    listed = {p.handle: p for p in await box.list_processes()}
    assert listed[proc.handle].state == "exited" and listed[proc.handle].exit_code == 0


async def signals_stop_a_process(box: Sandbox) -> None:
    proc = await box.start_process("trap 'echo got TERM; exit 3' TERM; echo ready; "
                                   "while :; do sleep 0.1; done")  # fmt: skip
    with anyio.fail_after(30):
        await proc.read_until("ready")
        running = {p.handle: p for p in await box.list_processes()}[proc.handle]
        assert running.state == "running" and running.exit_code is None and running.pid > 0
        await proc.signal(15)
        assert b"got TERM" in await proc.read_until("got TERM")
        done = await proc.wait()
    assert done.info.exit_code == 3
    stubborn = await box.start_process(["sleep", "30"])
    await stubborn.signal(9)
    with anyio.fail_after(30):
        killed = await stubborn.wait()
    assert killed.info.signal == 9 and killed.info.exit_code == 137


async def a_flood_nobody_reads_stays_bounded(box: Sandbox) -> None:
    proc = await box.start_process("head -c 30000000 /dev/zero; echo; echo end")
    with anyio.fail_after(60):
        info = await _info(box, proc.handle)
        for _ in range(300):
            if info.state != "running":
                break
            await anyio.sleep(0.2)
            info = await _info(box, proc.handle)
        late = await box.connect_process(proc.handle, offset=0)
        received = 0
        first_offset = None
        async for chunk in late:
            first_offset = chunk.offset if first_offset is None else first_offset
            received += len(chunk.data)
    assert late.exit is not None
    assert info.output_bytes == 30_000_005
    # The sandbox kept the recent part only; the client is told what it missed.
    assert late.exit.missed == info.output_bytes - received > 0
    assert received <= 2 << 20 and first_offset == late.exit.missed


async def bad_input_gets_clear_errors(box: Sandbox) -> None:
    ghost = await box.start_process("true")
    with anyio.fail_after(30):
        await ghost.wait()
    with pytest.raises(Conflict, match="has exited"):
        await ghost.write("too late\n")
    with pytest.raises(NotFound, match="no process"):
        await box.connect_process("proc_999")
    # The same answer from the server itself (ConnectProcess over gRPC).
    connection = box._transport.connect_process(box.instance_id, "proc_999", 0)
    with pytest.raises(NotFound, match="no process 'proc_999'"):
        async for _ in connection.events():
            pass
    await connection.aclose()
    with pytest.raises(InvalidArgument, match="offset"):
        async for _ in box._transport.connect_process(box.instance_id, ghost.handle, -1).events():
            pass
    with pytest.raises(InvalidArgument, match="signal 99 is out of range"):
        await ghost.signal(99)
    with pytest.raises(InvalidArgument, match="rows"):
        await box.start_process("true", pty=(0, 80))
    with pytest.raises(InvalidArgument, match=r"exactly one|argv"):
        await box.start_process([])
    with pytest.raises(NotFound, match="program not found"):
        await box.start_process(["no-such-program-xyz"])
    with pytest.raises(Conflict, match="no terminal"):
        sleeper = await box.start_process(["sleep", "5"])
        await sleeper.resize(10, 10)
    await sleeper.signal(9)


async def _info(box: Sandbox, handle: str) -> ProcessInfo:
    return {p.handle: p for p in await box.list_processes()}[handle]


SCENARIOS: list[Scenario] = [
    python_repl_line_by_line,
    terminal_program_sees_a_terminal,
    reattach_after_client_disconnect,
    signals_stop_a_process,
    a_flood_nobody_reads_stays_bounded,
    bad_input_gets_clear_errors,
]


@pytest.fixture(params=["local", "grpc"])
async def box(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Sandbox]:
    if request.param == "local":
        async with LocalSandboxFactory(tmp_path / "local") as factory:
            yield await factory.create_sandbox("procs")
        return
    settings = Settings(
        backend="local", local_root=tmp_path / "root", socket=tmp_path / "sandboxd.sock"
    )
    server = Daemon(settings)
    await server.start()
    try:
        async with GrpcSandboxFactory(f"unix://{settings.socket}") as factory:
            sandbox = await factory.create_sandbox("procs")
            try:
                yield sandbox
            finally:
                await sandbox.delete()
    finally:
        await server.stop()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
async def test_scenario(box: Sandbox, scenario: Scenario) -> None:
    await scenario(box)

"""Issue 23 item 1: a client that floods a ToolCalls stream and never reads
its answers must not grow the daemon.

Millions of small requests (about 20 MB on the wire) naming no existing
sandbox took a real daemon from 85 MiB to 3.7 GiB: each got an answer (a
refusal) queued for a client that never read one. The daemon now stops
pulling requests from a stream whose answers are not being taken (and from
every stream of a caller with too many), so the flood waits in the
client's own buffers. Measured on a real daemon process (its RSS).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.contract.v1 import sandbox_pb2_grpc as pb_grpc
from tests.helpers import Daemon
from tests.transfer_checks import rss_bytes

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(300)]

#: Requests sent without reading an answer, as the report's: millions of
#: tiny ones (a call id and nothing else, refused one by one), 64 to a message.
FLOOD = 2_000_000
PER_MESSAGE = 64
#: What the daemon may grow by under the flood.
GROWTH_BOUND = 64 << 20


@pytest.fixture
def local_daemon(tmp_path: Path) -> Iterator[Daemon]:
    daemon = Daemon(
        tmp_path / "sandboxd.sock",
        "--backend", "local", "--local-root", str(tmp_path / "root"),
    ).start()  # fmt: skip
    try:
        yield daemon
    finally:
        daemon.terminate()


def _message(first: int) -> pb.ToolCallsRequest:
    return pb.ToolCallsRequest(
        batch=[pb.ToolCallsRequest(call_id=n) for n in range(first, first + PER_MESSAGE)]
    )


async def _flood(target: str, streams: int, seconds: float) -> int:
    """Write requests on ``streams`` ToolCalls streams for ``seconds``, reading nothing."""
    sent = 0
    async with grpc.aio.insecure_channel(target) as channel:
        stub = pb_grpc.SandboxServiceStub(channel)  # type: ignore[no-untyped-call]

        async def one(first: int) -> None:
            nonlocal sent
            call = stub.ToolCalls()
            n = first * PER_MESSAGE
            while sent < FLOOD:
                await call.write(_message(n))
                n += streams * PER_MESSAGE
                sent += PER_MESSAGE

        tasks = [asyncio.create_task(one(s)) for s in range(streams)]
        _, pending = await asyncio.wait(tasks, timeout=seconds)
        for task in pending:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*tasks)
    return sent


@pytest.mark.parametrize("streams", [1, 8, 64])
async def test_a_flood_that_reads_nothing_leaves_the_daemon_flat(
    local_daemon: Daemon, streams: int
) -> None:
    assert local_daemon.proc is not None
    pid = local_daemon.proc.pid
    before = rss_bytes(pid)
    started = time.monotonic()
    sent = await _flood(local_daemon.target, streams, seconds=20)
    await asyncio.sleep(1)
    after = rss_bytes(pid)
    print(
        f"\nToolCalls flood, {streams} stream(s): {sent} requests written in "
        f"{time.monotonic() - started:.1f} s; daemon RSS {before >> 20} -> {after >> 20} MiB"
    )
    assert after - before < GROWTH_BOUND, (before >> 20, after >> 20, sent)
    # The daemon still answers, on a new stream.
    async with grpc.aio.insecure_channel(local_daemon.target) as channel:
        stub = pb_grpc.SandboxServiceStub(channel)  # type: ignore[no-untyped-call]
        call = stub.ToolCalls()
        missing = pb.CallToolRequest(instance_id="nobody", name="read", arguments_json="{}")
        await call.write(pb.ToolCallsRequest(call_id=1, call=missing))
        answer = await asyncio.wait_for(call.read(), 10)
        assert answer.error.code == "NOT_FOUND"
        call.cancel()


async def test_stdin_flooded_into_a_process_that_never_reads_leaves_the_daemon_flat(
    local_daemon: Daemon,
) -> None:
    # The other client stream that runs for long: ConnectProcess. Its input is
    # pulled one message at a time, each written to the process before the
    # next is read, so a process that reads nothing stops the stream.
    assert local_daemon.proc is not None
    pid = local_daemon.proc.pid
    async with grpc.aio.insecure_channel(local_daemon.target) as channel:
        stub = pb_grpc.SandboxServiceStub(channel)  # type: ignore[no-untyped-call]
        await stub.CreateSandbox(pb.CreateSandboxRequest(instance_id="stdin-flood"))
        info = await stub.StartProcess(
            pb.StartProcessRequest(instance_id="stdin-flood", shell="sleep 600")
        )
        before = rss_bytes(pid)
        call = stub.ConnectProcess()
        await call.write(pb.ProcessInput(instance_id="stdin-flood", handle=info.handle))
        sent = 0
        chunk = b"x" * (64 << 10)

        async def flood() -> None:
            nonlocal sent
            while True:
                await call.write(pb.ProcessInput(data=chunk))
                sent += len(chunk)

        with contextlib.suppress(BaseException):
            await asyncio.wait_for(flood(), 20)
        after = rss_bytes(pid)
        call.cancel()
        print(
            f"\nConnectProcess stdin flood: {sent >> 20} MiB written; "
            f"RSS {before >> 20} -> {after >> 20} MiB"
        )
        assert after - before < GROWTH_BOUND, (before >> 20, after >> 20, sent)
        await stub.SignalProcess(
            pb.SignalProcessRequest(instance_id="stdin-flood", handle=info.handle, signal=9)
        )

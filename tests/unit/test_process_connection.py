"""GrpcProcessConnection: the message that names the process goes first, even
when a reader and a sender start on the connection at the same moment."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from runtime_client.grpc_transport import GrpcProcessConnection

pytestmark = [pytest.mark.anyio]


class SlowCall:
    """A ConnectProcess call whose writes take a while, as under load."""

    def __init__(self) -> None:
        self.written: list[Any] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def write(self, message: Any) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await anyio.sleep(0.05)
        self.written.append(message)
        self.in_flight -= 1

    def add_done_callback(self, callback: Any) -> None:
        return None

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._nothing()

    async def _nothing(self) -> AsyncIterator[Any]:
        await anyio.sleep(0.2)
        return
        yield


class Stub:
    def __init__(self, call: SlowCall) -> None:
        self.call = call

    def ConnectProcess(self) -> SlowCall:
        return self.call


async def test_stdin_never_overtakes_the_first_message() -> None:
    call = SlowCall()
    connection = GrpcProcessConnection(Stub(call), "box", "proc_1", None)  # type: ignore[arg-type]

    async def read() -> None:
        async for _ in connection.events():
            pass

    async with anyio.create_task_group() as group:
        group.start_soon(read)
        await anyio.lowlevel.checkpoint()  # the reader is writing the first message now
        await connection.send(b"stdin")
    assert [m.handle for m in call.written] == ["proc_1", ""]
    assert call.written[1].data == b"stdin"
    assert call.most_in_flight == 1  # never two writes at once on one stream

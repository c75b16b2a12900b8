"""Issue 23 item 15 (daemon side): ExecStream's timeout holds while the client
stops reading.

The executor checked the deadline between chunks, and a client that stops
reading holds the executor in its send (stream credits), so a command with
a 2 s timeout ran on as long as the client kept the stream open and read
nothing. The deadline is now kept by a watchdog of its own.
"""

from __future__ import annotations

import asyncio
import secrets

import pytest

from runtime_client import Sandbox
from sandboxd.contract.models import ExecExit

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(120)]


async def test_the_timeout_holds_while_the_client_reads_nothing(box: Sandbox) -> None:
    marker = f"flood-{secrets.token_hex(4)}"
    stream = box.exec_stream(["yes", marker * 100], timeout_ms=2_000)
    events = aiter(stream)
    first = await anext(events)
    assert not isinstance(first, ExecExit)
    # The client holds the stream and reads nothing, well past the timeout
    # and its 2 s grace.
    await asyncio.sleep(8)
    running = await box.exec(["pgrep", "-f", marker])
    try:
        assert running.exit_code == 1, "the command outlived its timeout"
        # Reading again: the rest of the output, then an exit that says so.
        async for event in events:
            if isinstance(event, ExecExit):
                assert event.timed_out
                break
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await box.exec(["pkill", "-f", marker])

"""A stalled ExecStream holds back its own command only (credit flow control).

Local backend behind a real gRPC server; ``tests/docker/test_stream_credits``
runs the same scenario on the executor channel of a real container.
"""

from __future__ import annotations

import time

import anyio
import pytest

from runtime_client import ExecExit, GrpcSandboxFactory, Sandbox

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

FLOOD = "head -c 200000000 /dev/zero"


async def other_calls_pass_a_stalled_stream(box: Sandbox) -> dict[str, float]:
    """Stall a 200 MB stream after one event; the instance's other calls still run.

    Returns the figures (seconds) for the report; asserts only outcomes.
    """
    stream = box.exec_stream(FLOOD, timeout_ms=120_000)
    first = await anext(aiter(stream))
    assert not isinstance(first, ExecExit)
    await anyio.sleep(1.0)  # the producer runs into the end of its window
    figures: dict[str, float] = {}
    with anyio.fail_after(60):
        started = time.monotonic()
        result = await box.exec("echo alive")
        figures["exec_s"] = time.monotonic() - started
        started = time.monotonic()
        tool = await box.bash("echo tool-ok")
        figures["bash_s"] = time.monotonic() - started
        started = time.monotonic()
        await box.write_file("side.txt", b"x")
        figures["write_file_s"] = time.monotonic() - started
    assert result.stdout == b"alive\n"
    assert tool.text == "tool-ok\n\nExit code: 0"
    # The stream itself is intact: it resumes where it stopped.
    received = len(getattr(first, "data", b""))
    with anyio.fail_after(60):
        async for event in stream:
            if isinstance(event, ExecExit):
                assert event.exit_code == 0
                break
            received += len(getattr(event, "data", b""))
            if received > 4_000_000:
                break
    await stream.aclose()  # type: ignore[attr-defined]
    assert received > 4_000_000
    print(f"\nstalled-stream figures: {figures}")
    return figures


async def test_other_calls_pass_a_stalled_stream(factory: GrpcSandboxFactory) -> None:
    box = await factory.create_sandbox("stalled")
    try:
        await other_calls_pass_a_stalled_stream(box)
    finally:
        await box.delete()

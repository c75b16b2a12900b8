"""A stalled ExecStream does not hold the executor channel of its instance."""

from __future__ import annotations

import pytest

from runtime_client import GrpcSandboxFactory
from tests.grpc.test_stream_credits import other_calls_pass_a_stalled_stream

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(180)]


async def test_other_calls_pass_a_stalled_stream(
    factory: GrpcSandboxFactory, instance_id: str
) -> None:
    box = await factory.create_sandbox(instance_id)
    try:
        await other_calls_pass_a_stalled_stream(box)
    finally:
        await box.delete()

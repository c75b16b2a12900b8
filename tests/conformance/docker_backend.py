"""The conformance suite's Docker backend: tools called over gRPC on sandboxd.

Each test gets a fresh sandbox on the session's daemon (real engine, real
image, real executor), reached through ``runtime_client`` and the
``CallTool`` RPC, so the raw model arguments cross the wire as they would
in production. The sandbox is deleted afterwards.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator

from runtime_client import GrpcSandboxFactory, Runtime, Sandbox, SandboxOptions
from tests.helpers import Daemon

WORKDIR = "/workspace"


class GrpcToolBackend:
    workdir = WORKDIR

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    async def call(self, name: str, args: dict[str, object]) -> dict[str, object]:
        result = await self.sandbox.call_tool(name, args)
        return {"text": result.text, "is_error": result.is_error, "fields": dict(result.fields)}


@contextlib.asynccontextmanager
async def docker_backend(daemon: Daemon, *, gvisor: bool = False) -> AsyncIterator[GrpcToolBackend]:
    options = SandboxOptions(runtime=Runtime.RUNSC) if gvisor else None
    async with GrpcSandboxFactory(daemon.target, options=options) as factory:
        sandbox = await factory.create_sandbox(f"conf-{secrets.token_hex(4)}")
        try:
            yield GrpcToolBackend(sandbox)
        finally:
            await sandbox.delete()

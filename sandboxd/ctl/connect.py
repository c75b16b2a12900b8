"""Reaching sandboxd from the command line: factory, errors, health."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NoReturn, TypeVar

import grpc
import typer
from grpc_health.v1 import health_pb2, health_pb2_grpc

from runtime_client.errors import SandboxdError
from runtime_client.factories import GrpcSandboxFactory

# Like `docker run`: 125 says "sandboxd (or reaching it) failed", so that
# `sandboxctl exec` can keep every other status for the command's own.
EXIT_SANDBOXD_ERROR = 125

T = TypeVar("T")


@dataclass(frozen=True)
class Connection:
    target: str
    token: str | None

    def factory(self) -> GrpcSandboxFactory:
        return GrpcSandboxFactory(self.target, token=self.token)


def connection_of(ctx: typer.Context) -> Connection:
    """The connection the top-level options made (a sub-command group's context)."""
    connection = ctx.find_object(Connection)
    assert connection is not None
    return connection


def fail(message: str, code: int = EXIT_SANDBOXD_ERROR) -> NoReturn:
    print(f"sandboxctl: {message}", file=sys.stderr)
    raise typer.Exit(code)


def run(connection: Connection, action: Callable[[GrpcSandboxFactory], Awaitable[T]]) -> T:
    """Run ``action`` with a factory on a fresh loop; sandboxd errors end the command."""

    async def main() -> T:
        async with connection.factory() as factory:
            return await action(factory)

    try:
        return asyncio.run(main())
    except SandboxdError as exc:
        fail(f"{type(exc).__name__}: {exc} (target {connection.target})")


def _metadata(token: str | None) -> list[tuple[str, str]] | None:
    return [("authorization", f"Bearer {token}")] if token else None


async def health(connection: Connection, service: str = "", timeout: float = 3.0) -> str:
    """The standard gRPC health status name, or ``UNREACHABLE: <why>``."""
    async with grpc.aio.insecure_channel(connection.target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = await stub.Check(
                health_pb2.HealthCheckRequest(service=service),
                timeout=timeout,
                metadata=_metadata(connection.token),
            )
        except grpc.aio.AioRpcError as exc:
            return f"UNREACHABLE: {exc.code().name} {exc.details() or ''}".rstrip()
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))

"""The two ``SandboxFactory`` adapters: sandboxd over gRPC, and a local folder."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from runtime_client.grpc_transport import GrpcTransport
from runtime_client.sandbox import Sandbox
from sandboxd.contract.models import SandboxOptions

#: Where ``sandboxd serve`` listens unless told otherwise.
DEFAULT_TARGET = "unix:///run/sandboxd/sandboxd.sock"

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from 3.11; the client runs on 3.10

    from sandboxd.backends.local.backend import LocalBackend
    from sandboxd.service.sandbox_service import SandboxService


def _with_cwd(options: SandboxOptions, cwd: str | None) -> SandboxOptions:
    return dataclasses.replace(options, workdir=cwd) if cwd else options


class _ClosingFactory:
    """``async with factory:`` closes it at the end."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class GrpcSandboxFactory(_ClosingFactory):
    """Sandboxes served by a sandboxd daemon (Docker workspaces, isolated).

    ``target`` is a gRPC target: ``unix:///run/sandboxd/sandboxd.sock`` or
    ``host:port``; a TCP listener needs the bearer ``token``. ``options``
    apply to every sandbox this factory creates.
    """

    def __init__(
        self, target: str, *, token: str | None = None, options: SandboxOptions | None = None
    ) -> None:
        self.transport = GrpcTransport(target, token=token)
        self.options = options or SandboxOptions()

    async def create_sandbox(self, instance_id: str, *, cwd: str | None = None) -> Sandbox:
        await self.transport.create_sandbox(instance_id, _with_cwd(self.options, cwd))
        return Sandbox(self.transport, instance_id)

    async def aclose(self) -> None:
        await self.transport.close()


class LocalSandboxFactory(_ClosingFactory):
    """Sandboxes that are plain folders under ``root`` on this host.

    NO ISOLATION: commands run as the current user, with its environment and
    its network, and absolute paths reach the whole host. Use it for
    development, tests, and agents that already run inside a sandbox of
    their own. ``cwd`` names a folder under ``/workspace``, which here is
    ``root/<instance_id>``.

    Needs the ``local`` extra (the daemon's service runs in this process).
    It is configured by these arguments alone, never by ``SANDBOXD_*``
    variables; a limit left ``None`` is the daemon's default.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        options: SandboxOptions | None = None,
        max_payload_bytes: int | None = None,
        max_output_bytes: int | None = None,
        exec_timeout_ms: int | None = None,
        max_exec_timeout_ms: int | None = None,
    ) -> None:
        from sandboxd.contract.extras import require

        require("local", "LocalSandboxFactory")
        from sandboxd.backends.local.backend import LocalBackend
        from sandboxd.daemon.settings import Settings
        from sandboxd.service.sandbox_service import SandboxService

        limits = {
            "max_payload_bytes": max_payload_bytes,
            "max_output_bytes": max_output_bytes,
            "exec_timeout_ms": exec_timeout_ms,
            "max_exec_timeout_ms": max_exec_timeout_ms,
        }
        settings = Settings.from_arguments(
            backend="local",
            local_root=Path(root),
            **{name: value for name, value in limits.items() if value is not None},
        )
        self._backend: LocalBackend = LocalBackend(settings)
        self.service: SandboxService = SandboxService(self._backend, settings)
        self.options = options or SandboxOptions()
        self._started = False

    async def create_sandbox(self, instance_id: str, *, cwd: str | None = None) -> Sandbox:
        if not self._started:
            await self._backend.start()
            self._started = True
        await self.service.create_sandbox(instance_id, _with_cwd(self.options, cwd))
        return Sandbox(self.service, instance_id)

    async def aclose(self) -> None:
        await self._backend.close()

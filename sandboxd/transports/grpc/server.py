"""The gRPC listener: ``SandboxService`` over grpc.aio, with health and reflection.

Assembled and driven by ``sandboxd.daemon.assembly.Daemon`` (which owns the backend,
the service, auth, the HTTP listener, signals and the settings these values
come from). The unix socket is created
with mode 0600 from the start (umask held while binding), so there is no
moment at which another user can connect.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from sandboxd.contract.errors import SandboxUnavailable
from sandboxd.contract.v1 import sandbox_pb2, sandbox_pb2_grpc
from sandboxd.service.sandbox_service import SandboxService
from sandboxd.transports.auth import Authenticator
from sandboxd.transports.grpc.lifetimes import LifetimesServicer
from sandboxd.transports.grpc.network import NetworkServicer
from sandboxd.transports.grpc.port_stream import PortsServicer
from sandboxd.transports.grpc.servicer import SandboxServicer
from sandboxd.transports.grpc.snapshots import SnapshotsServicer
from sandboxd.transports.grpc.templates import TemplatesServicer

SERVICE_NAME = sandbox_pb2.DESCRIPTOR.services_by_name["SandboxService"].full_name
PORTS_SERVICE_NAME = sandbox_pb2.DESCRIPTOR.services_by_name["SandboxPorts"].full_name
LIFETIMES_NAME = sandbox_pb2.DESCRIPTOR.services_by_name["Lifetimes"].full_name
SNAPSHOTS_NAME = sandbox_pb2.DESCRIPTOR.services_by_name["Snapshots"].full_name
TEMPLATES_NAME = sandbox_pb2.DESCRIPTOR.services_by_name["Templates"].full_name
NETWORK_NAME = sandbox_pb2.DESCRIPTOR.services_by_name["Network"].full_name


def _claim_socket_path(path: Path) -> None:
    """Remove a stale socket file; refuse if a live server answers on it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() and not path.is_symlink():
        return
    probe = socket.socket(socket.AF_UNIX)
    try:
        probe.connect(str(path))
    except OSError:
        path.unlink()
    else:
        raise SandboxUnavailable(f"another server is already listening on {path}")
    finally:
        probe.close()


class GrpcListener:
    """The grpc.aio server of one daemon: unix socket, optional TCP, health, reflection."""

    def __init__(
        self,
        service: SandboxService,
        authenticator: Authenticator,
        *,
        socket_path: Path,
        tcp: str | None,
        max_receive_bytes: int,
        max_send_bytes: int,
    ) -> None:
        self.socket_path = socket_path
        self.tcp = tcp
        self.health = health.aio.HealthServicer()
        # Messages may run well past the payload limit (the daemon's Settings
        # say by how much) so the service can answer an oversize payload with
        # its own message; only absurd sizes meet gRPC's terser RESOURCE_EXHAUSTED.
        self._server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", max_receive_bytes),
                ("grpc.max_send_message_length", max_send_bytes),
            ]
        )
        sandbox_pb2_grpc.add_SandboxServiceServicer_to_server(  # type: ignore[no-untyped-call]
            SandboxServicer(service, authenticator), self._server
        )
        sandbox_pb2_grpc.add_SandboxPortsServicer_to_server(  # type: ignore[no-untyped-call]
            PortsServicer(service, authenticator), self._server
        )
        sandbox_pb2_grpc.add_LifetimesServicer_to_server(  # type: ignore[no-untyped-call]
            LifetimesServicer(service, authenticator), self._server
        )
        sandbox_pb2_grpc.add_SnapshotsServicer_to_server(  # type: ignore[no-untyped-call]
            SnapshotsServicer(service, authenticator), self._server
        )
        sandbox_pb2_grpc.add_TemplatesServicer_to_server(  # type: ignore[no-untyped-call]
            TemplatesServicer(service, authenticator), self._server
        )
        sandbox_pb2_grpc.add_NetworkServicer_to_server(  # type: ignore[no-untyped-call]
            NetworkServicer(service, authenticator), self._server
        )
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        reflection.enable_server_reflection(
            (
                SERVICE_NAME,
                PORTS_SERVICE_NAME,
                LIFETIMES_NAME,
                SNAPSHOTS_NAME,
                TEMPLATES_NAME,
                NETWORK_NAME,
                health.SERVICE_NAME,
                reflection.SERVICE_NAME,
            ),
            self._server,
        )
        self.tcp_port: int | None = None

    async def start(self) -> None:
        socket_path = self.socket_path
        _claim_socket_path(socket_path)
        previous = os.umask(0o177)
        try:
            self._server.add_insecure_port(f"unix://{socket_path}")
            if self.tcp:
                self.tcp_port = self._server.add_insecure_port(self.tcp)
            await self._server.start()
        finally:
            os.umask(previous)
        os.chmod(socket_path, 0o600)

    async def set_serving(self) -> None:
        for name in ("", SERVICE_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)

    async def enter_graceful_shutdown(self) -> None:
        await self.health.enter_graceful_shutdown()

    async def stop(self, grace: float | None) -> None:
        await self._server.stop(grace=grace)

    def release_socket(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

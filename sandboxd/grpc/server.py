"""Serve ``SandboxService`` over grpc.aio, with health and reflection.

The unix socket is created with mode 0600 from the start (umask held while
binding), so there is no moment at which another user can connect. SIGTERM
drains: health turns NOT_SERVING, new calls are refused, in-flight calls get
``drain_seconds`` to finish, and workspaces keep running for the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from sandboxd.auth import Authenticator, load_tokens
from sandboxd.backends.docker import DockerBackend
from sandboxd.backends.local import LocalBackend
from sandboxd.config import Settings
from sandboxd.errors import InvalidArgument, SandboxUnavailable
from sandboxd.grpc.servicer import SandboxServicer
from sandboxd.observability import calls
from sandboxd.ports import WorkspaceBackend
from sandboxd.service import SandboxService
from sandboxd.v1 import sandbox_pb2, sandbox_pb2_grpc

if TYPE_CHECKING:
    from sandboxd.http.server import HttpServer

log = logging.getLogger(__name__)

SERVICE_NAME = sandbox_pb2.DESCRIPTOR.services_by_name["SandboxService"].full_name
_OVERSIZE_ROOM = 64 << 20


def make_backend(settings: Settings) -> WorkspaceBackend:
    if settings.backend == "local":
        return LocalBackend(settings)
    return DockerBackend(settings)


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


class Server:
    def __init__(self, settings: Settings, backend: WorkspaceBackend | None = None) -> None:
        self.settings = settings
        self.backend = backend or make_backend(settings)
        self.service = SandboxService(self.backend, settings)
        secret = settings.token.get_secret_value() if settings.token else None
        self.authenticator = Authenticator(load_tokens(settings.tokens_file, secret))
        if (settings.tcp or settings.http) and not self.authenticator.enabled:
            listener = "a TCP" if settings.tcp else "an HTTP"
            raise InvalidArgument(
                f"{listener} listener needs bearer tokens: set SANDBOXD_TOKEN or "
                "SANDBOXD_TOKENS_FILE"
            )
        calls.configure(access_log_enabled=settings.access_log)
        self.health = health.aio.HealthServicer()
        # Accept messages well past the payload limit so the service can answer
        # an oversize payload with its own message (limit, setting name); only
        # absurd sizes meet gRPC's terser RESOURCE_EXHAUSTED.
        message_limit = 2 * settings.max_payload_bytes + _OVERSIZE_ROOM
        self._server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", message_limit),
                ("grpc.max_send_message_length", 2 * settings.max_output_bytes + message_limit),
            ]
        )
        sandbox_pb2_grpc.add_SandboxServiceServicer_to_server(  # type: ignore[no-untyped-call]
            SandboxServicer(self.service, self.authenticator), self._server
        )
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        reflection.enable_server_reflection(
            (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), self._server
        )
        self.tcp_port: int | None = None
        self.http_port: int | None = None
        self._http: HttpServer | None = None
        self.ready = False  # read by /readyz
        self._stopped = asyncio.Event()

    @property
    def draining(self) -> bool:
        return self._stopped.is_set()

    async def start(self) -> None:
        await self.backend.start()
        socket_path = self.settings.socket
        _claim_socket_path(socket_path)
        previous = os.umask(0o177)
        try:
            self._server.add_insecure_port(f"unix://{socket_path}")
            if self.settings.tcp:
                self.tcp_port = self._server.add_insecure_port(self.settings.tcp)
            await self._server.start()
        finally:
            os.umask(previous)
        os.chmod(socket_path, 0o600)
        if self.settings.http:
            self._http = _http_server(self)
            try:
                await self._http.start()
            except BaseException:
                await self._server.stop(grace=None)  # nobody will call stop() on a failed start
                raise
            self.http_port = self._http.port
        for name in ("", SERVICE_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        self.ready = True
        log.info(
            "sandboxd serving on unix://%s%s (backend %s, namespace %s)",
            socket_path,
            f" and {self.settings.tcp} (port {self.tcp_port})" if self.settings.tcp else "",
            self.backend.name,
            self.settings.namespace,
        )

    async def stop(self) -> None:
        """Drain in-flight calls, then let go of the backend (workspaces stay up)."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.ready = False
        await self.health.enter_graceful_shutdown()
        # HTTP keeps answering (503 to new calls, /readyz not ready) while gRPC drains.
        await self._server.stop(grace=self.settings.drain_seconds)
        if self._http is not None:
            await self._http.stop()
        await self.backend.close()
        with contextlib.suppress(FileNotFoundError):
            self.settings.socket.unlink()
        log.info("sandboxd stopped")

    async def serve_until_signalled(self) -> None:
        await self.start()
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("signal received: draining for up to %.0f s", self.settings.drain_seconds)
        await self.stop()


def _http_server(server: Server) -> HttpServer:
    # Imported here: a daemon without SANDBOXD_HTTP never loads FastAPI.
    from sandboxd.http import create_app
    from sandboxd.http.server import HttpServer

    app = create_app(server.service, server.authenticator, server)
    assert server.settings.http is not None
    return HttpServer(app, server.settings.http, drain_seconds=server.settings.drain_seconds)

"""The one assembly point of the daemon: backend, service, auth, listeners, signals.

``Daemon`` builds the pieces from ``Settings`` and owns their lifetime: the
workspace backend, the ``SandboxService`` every transport calls, the bearer
token ``Authenticator``, the gRPC listener (unix socket, optional TCP) and the
optional HTTP/JSON listener. Transports know only the service, the
authenticator and the daemon's ``ready``/``draining`` state, never each other.

SIGTERM drains: health turns NOT_SERVING and /readyz 503, new calls are
refused, in-flight calls get ``drain_seconds`` to finish, and workspaces keep
running for the next start.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from sandboxd.backends import backend_class
from sandboxd.contract.errors import SandboxUnavailable
from sandboxd.daemon.auth import make_authenticator
from sandboxd.daemon.settings import Settings
from sandboxd.egress.ca import CertificateAuthority
from sandboxd.egress.intercept import SecretInterceptor
from sandboxd.observability import calls
from sandboxd.service.lifetimes import LifetimeKeeper
from sandboxd.service.ports import WorkspaceBackend
from sandboxd.service.sandbox_service import SandboxService
from sandboxd.transports.grpc.server import GrpcListener

if TYPE_CHECKING:
    from sandboxd.transports.http.server import HttpServer

log = logging.getLogger(__name__)


def _egress_ca(state_dir: Path) -> CertificateAuthority:
    try:
        return CertificateAuthority.load_or_create(state_dir)
    except (OSError, ValueError) as exc:
        # The daemon serves everything else; this create says why it cannot have secrets.
        log.warning("egress: no CA in %s: %s", state_dir, exc)
        raise SandboxUnavailable(
            f"this daemon cannot use secrets: its egress CA could not be made or read in "
            f"{state_dir} ({exc}); set SANDBOXD_STATE_DIR to a folder it can write"
        ) from None


def make_backend(settings: Settings) -> WorkspaceBackend:
    # The registry imports only the chosen engine: a local daemon never loads docker-py.
    backend: WorkspaceBackend = backend_class(settings.backend)(settings)
    return backend


class Daemon:
    def __init__(self, settings: Settings, backend: WorkspaceBackend | None = None) -> None:
        self.settings = settings
        self.authenticator = make_authenticator(settings)
        self.backend = backend or make_backend(settings)
        # Secrets at egress: values in memory (the book); the CA, made once in
        # the state folder when the first sandbox with secrets is created (a
        # daemon never given secrets writes nothing there); the gateway hands
        # connections to hosts with a secret to the interceptor (egress/intercept.py).
        self.interceptor = SecretInterceptor(
            lambda: _egress_ca(settings.state_dir), upstream_cafile=settings.egress_upstream_ca
        )
        self.secrets = self.interceptor.book
        self.service = SandboxService(self.backend, settings, secrets=self.secrets)
        # The gateways hand a secret's hosts' connections to the interceptor.
        self.service.gateways.interceptor = self.interceptor
        self.keeper = LifetimeKeeper(
            self.backend,
            settings,
            quotas=self.service.quotas,
            forget=self.service.forget_sandbox,
            bury=self.service.bury,
            refresh_network=self.service.network.refresh,
        )
        calls.configure(access_log_enabled=settings.access_log)
        self.grpc = GrpcListener(
            self.service,
            self.authenticator,
            socket_path=settings.socket,
            tcp=settings.tcp,
            max_receive_bytes=settings.grpc_max_receive_bytes,
            max_send_bytes=settings.grpc_max_send_bytes,
        )
        self.http_port: int | None = None
        self._http: HttpServer | None = None
        self.ready = False  # read by /readyz
        self._stopped = asyncio.Event()

    @property
    def draining(self) -> bool:
        return self._stopped.is_set()

    @property
    def tcp_port(self) -> int | None:
        return self.grpc.tcp_port

    async def start(self) -> None:
        await self.backend.start()
        # Before any listener: the gateway must never see a sandbox's policy as unknown.
        restored = await self.service.restore_network()
        if restored:
            log.info("network policies restored for %d sandboxes", restored)
        self.keeper.start()
        await self.grpc.start()
        if self.settings.http:
            self._http = self._http_server()
            try:
                await self._http.start()
            except BaseException:
                await self.grpc.stop(grace=None)  # nobody will call stop() on a failed start
                raise
            self.http_port = self._http.port
        await self.grpc.set_serving()
        self.ready = True
        log.info(
            "sandboxd serving on unix://%s%s%s (backend %s, namespace %s)",
            self.settings.socket,
            f" and {self.settings.tcp} (port {self.tcp_port})" if self.settings.tcp else "",
            f", HTTP on port {self.http_port}" if self.http_port else "",
            self.backend.name,
            self.settings.namespace,
        )

    async def stop(self) -> None:
        """Drain in-flight calls, then let go of the backend (workspaces stay up)."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.ready = False
        await self.grpc.enter_graceful_shutdown()
        # HTTP keeps answering (503 to new calls, /readyz not ready) while gRPC drains.
        await self.grpc.stop(grace=self.settings.drain_seconds)
        if self._http is not None:
            await self._http.stop()
        await self.keeper.close()
        await self.service.gateways.close()
        await self.backend.close()
        self.grpc.release_socket()
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

    def _http_server(self) -> HttpServer:
        # Imported here: a daemon without SANDBOXD_HTTP never loads FastAPI.
        from sandboxd.transports.http.app import create_app
        from sandboxd.transports.http.server import HttpServer

        app = create_app(
            self.service,
            self.authenticator,
            self,
            max_body_bytes=self.settings.http_max_body_bytes,
            preview_domain=self.settings.preview_domain,
        )
        assert self.settings.http is not None
        return HttpServer(
            app,
            self.settings.http,
            drain_seconds=self.settings.drain_seconds,
            limits=self.settings.http_connection_limits,
        )

"""Run the HTTP app with uvicorn inside the daemon's own event loop.

The socket is bound here, before uvicorn starts, so a taken port fails
``start`` with a sandboxd error (uvicorn would ``sys.exit``) and port 0
yields its real number at once. Signals stay with the daemon: it stops this
server along with gRPC.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator

import uvicorn

from sandboxd.contract.errors import InvalidArgument, SandboxUnavailable
from sandboxd.transports.http.connection_limits import ConnectionLimits
from sandboxd.transports.http.guard import guarded_protocol

log = logging.getLogger(__name__)

_START_TIMEOUT_S = 10.0


class _QuietSignals(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The daemon owns SIGTERM/SIGINT (drain gRPC and HTTP together).
        yield


def parse_address(address: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port``."""
    host, sep, port = address.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise InvalidArgument(
            f"SANDBOXD_HTTP must be host:port, e.g. 127.0.0.1:8080 (got {address!r})"
        )
    return host, int(port)


class HttpServer:
    def __init__(
        self, app: object, address: str, *, drain_seconds: float, limits: ConnectionLimits
    ) -> None:
        self._host, self._port = parse_address(address)
        config = uvicorn.Config(
            app,  # type: ignore[arg-type]
            # h11 with head/body timeouts and a connection cap (slow clients), never httptools.
            http=guarded_protocol(limits),
            log_config=None,  # the daemon's JSON logging
            access_log=False,  # sandboxd.access logs calls, with ids
            lifespan="off",
            timeout_graceful_shutdown=max(int(drain_seconds), 1),
            server_header=False,
        )
        self._server = _QuietSignals(config)
        self._socket: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self._host, self._port))
        except OSError as exc:
            sock.close()
            raise SandboxUnavailable(
                f"cannot listen for HTTP on {self._host}:{self._port}: {exc.strerror}"
            ) from None
        self._socket = sock
        self.port = int(sock.getsockname()[1])
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="sandboxd-http")
        async with asyncio.timeout(_START_TIMEOUT_S):
            while not self._server.started:
                if self._task.done():
                    self._task.result()  # raises what stopped it
                    raise SandboxUnavailable("the HTTP server stopped while starting")
                await asyncio.sleep(0.01)
        log.info("HTTP API serving on http://%s:%d", self._host, self.port)

    async def stop(self) -> None:
        """Stop accepting, let in-flight requests finish (up to the drain time)."""
        if self._task is None:
            return
        self._server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        if self._socket is not None:
            self._socket.close()

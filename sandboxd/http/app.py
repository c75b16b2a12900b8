"""Assemble the FastAPI application from its routers, guards and error handlers."""

from __future__ import annotations

from fastapi import FastAPI

from sandboxd import __version__
from sandboxd.auth import Authenticator
from sandboxd.http import errors, openapi
from sandboxd.http.app_state import AppState, Lifecycle
from sandboxd.http.limits import BodyLimit
from sandboxd.http.observe import ObserveCalls
from sandboxd.http.routes import files, lifecycle, ops, process, processes, tools, transfer
from sandboxd.service import SandboxService

__all__ = ["Lifecycle", "create_app"]


def create_app(
    service: SandboxService, authenticator: Authenticator, lifecycle_state: Lifecycle
) -> FastAPI:
    app = FastAPI(
        title="sandboxd",
        version=__version__,
        description="Isolated workspaces for AI agents and the six agent tools, over HTTP/JSON. "
        "The same service as the gRPC API: same checks, same errors. Send "
        "`Authorization: Bearer <token>` on every /v1 call.",
    )
    app.state.sandboxd = AppState(service, authenticator, lifecycle_state)
    for module in (lifecycle, tools, files, process, processes, ops, transfer):
        app.include_router(module.router)
    errors.install(app)
    openapi.install(app)
    # Added innermost first: ObserveCalls wraps BodyLimit, so refusals are counted too.
    app.add_middleware(BodyLimit, max_bytes=service.settings.http_max_body_bytes)
    app.add_middleware(ObserveCalls)
    return app

"""Assemble the FastAPI application from its routers, guards and error handlers."""

from __future__ import annotations

from fastapi import FastAPI

from sandboxd import __version__
from sandboxd.service.sandbox_service import SandboxService
from sandboxd.transports.auth import Authenticator
from sandboxd.transports.http import errors, openapi
from sandboxd.transports.http.app_state import AppState, Lifecycle
from sandboxd.transports.http.limits import BodyLimit
from sandboxd.transports.http.observe import ObserveCalls
from sandboxd.transports.http.preview import Previews
from sandboxd.transports.http.routes import (
    files,
    lifecycle,
    network,
    ops,
    ports,
    process,
    processes,
    snapshots,
    templates,
    tools,
    transfer,
)

__all__ = ["Lifecycle", "create_app"]


def create_app(
    service: SandboxService,
    authenticator: Authenticator,
    lifecycle_state: Lifecycle,
    *,
    max_body_bytes: int,
    preview_domain: str | None = None,
) -> FastAPI:
    app = FastAPI(
        title="sandboxd",
        version=__version__,
        description="Isolated workspaces for AI agents and the six agent tools, over HTTP/JSON. "
        "The same service as the gRPC API: same checks, same errors. Send "
        "`Authorization: Bearer <token>` on every /v1 call.",
    )
    app.state.sandboxd = AppState(service, authenticator, lifecycle_state)
    for module in (
        lifecycle,
        snapshots,
        templates,
        network,
        tools,
        files,
        process,
        processes,
        ops,
        transfer,
        ports,
    ):
        app.include_router(module.router)
    errors.install(app)
    openapi.install(app)
    # Added innermost first: ObserveCalls wraps BodyLimit, so refusals are counted too.
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    # Outside the body limit: a preview streams bodies of any size.
    app.add_middleware(Previews, state=app.state.sandboxd, domain=preview_domain)
    app.add_middleware(ObserveCalls)
    return app

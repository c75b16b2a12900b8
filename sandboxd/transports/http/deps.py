"""Per-request dependencies: the caller's scope, and the service to call.

Authentication is exactly the TCP gRPC rule (``sandboxd.transports.auth``): the
``Authorization: Bearer`` header is checked by the same ``Authenticator``,
and the scope it yields is entered on the same contextvar the service reads,
so a scoped token reaches the same instances on both transports.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPBearer

from sandboxd.contract.errors import SandboxUnavailable
from sandboxd.observability.calls import current_call
from sandboxd.service.sandbox_service import SandboxService
from sandboxd.service.scope import Scope, enter_scope, leave_scope
from sandboxd.transports.http.app_state import AppState

# Declares the scheme in the OpenAPI document; the check itself is ours, below.
_bearer = HTTPBearer(auto_error=False, description="a token from SANDBOXD_TOKEN(S_FILE)")


def app_state(request: Request) -> AppState:
    state: AppState = request.app.state.sandboxd
    return state


async def caller_scope(
    request: Request,
    state: Annotated[AppState, Depends(app_state)],
    _: Annotated[object, Depends(_bearer)],
) -> AsyncIterator[Scope]:
    if state.lifecycle.draining:
        raise SandboxUnavailable("sandboxd is shutting down; retry against another instance")
    client = request.client
    # Never "unix:": the HTTP listener is TCP, so the token is always required.
    peer = f"http:{client.host}:{client.port}" if client else "http:unknown"
    header = request.headers.get("authorization", "")
    call = current_call()
    if call is not None:  # so log lines written during the call name the instance
        call.instance_id = str(request.path_params.get("instance_id", ""))
    scope = state.authenticator.scope_for(peer, [("authorization", header)])
    token = enter_scope(scope)
    try:
        yield scope
    finally:
        leave_scope(token)


async def service(
    state: Annotated[AppState, Depends(app_state)],
    _: Annotated[Scope, Depends(caller_scope)],
) -> SandboxService:
    """The service, reachable only through an authenticated caller."""
    return state.service


Service = Annotated[SandboxService, Depends(service)]

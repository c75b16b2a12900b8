"""The one place where errors become HTTP responses.

The table is keyed by the error tree's ``status_name`` (the gRPC code), so
the HTTP status follows from the same fact the gRPC server uses, and the JSON
body carries that code name: ``{"error": {"code": "NOT_FOUND", "message": ...}}``.
RESOURCE_EXHAUSTED is 413 for the size limits (payload, output) and 429 for
a tenant's quota (``QuotaExceeded``, the one subclass with a status of its own).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from sandboxd.contract.errors import InvalidArgument, QuotaExceeded, SandboxdError, Timeout
from sandboxd.observability.calls import mark_failed

log = logging.getLogger(__name__)

HTTP_STATUS: dict[str, int] = {
    "INVALID_ARGUMENT": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "FAILED_PRECONDITION": 412,
    "RESOURCE_EXHAUSTED": 413,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}

# Starlette's own refusals (no such route, wrong method, body too large).
_CODE_OF_HTTP = {404: "NOT_FOUND", 405: "UNIMPLEMENTED", 413: "RESOURCE_EXHAUSTED"}


def http_status(error: SandboxdError) -> int:
    if isinstance(error, QuotaExceeded):
        return 429
    return HTTP_STATUS.get(error.status_name, 500)


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


def sandboxd_error_response(exc: SandboxdError) -> JSONResponse:
    mark_failed(exc)
    headers = {"WWW-Authenticate": "Bearer"} if exc.status_name == "UNAUTHENTICATED" else None
    return error_response(http_status(exc), exc.status_name, exc.message, headers)


async def _on_sandboxd_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, SandboxdError)
    return sandboxd_error_response(exc)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    message = _describe(exc.errors())
    mark_failed(InvalidArgument(message))
    return error_response(400, "INVALID_ARGUMENT", message)


async def _on_http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = _CODE_OF_HTTP.get(exc.status_code, "UNKNOWN")
    return error_response(exc.status_code, code, str(exc.detail), dict(exc.headers or {}))


async def _on_client_gone(request: Request, exc: Exception) -> JSONResponse:
    # The client left mid-body, or the slow-client guard (sandboxd.transports.http.guard)
    # answered 408 and closed: not a bug, and nobody reads this response.
    assert isinstance(exc, ClientDisconnect)
    log.info(
        "%s %s: the client left before its request body was complete",
        request.method,
        request.url.path,
    )
    return sandboxd_error_response(Timeout("the request body was not complete"))


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    # A bug: the client gets an incident id to quote, the log gets the traceback.
    incident = uuid.uuid4().hex[:12]
    log.error("internal error %s", incident, exc_info=exc)
    return error_response(
        500, "INTERNAL", f"internal error {incident}; the daemon log has the details"
    )


def install(app: FastAPI) -> None:
    app.add_exception_handler(SandboxdError, _on_sandboxd_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(HTTPException, _on_http_exception)
    app.add_exception_handler(ClientDisconnect, _on_client_gone)
    app.add_exception_handler(Exception, _on_unexpected)


def _describe(errors: Sequence[Any]) -> str:
    """pydantic's errors as one line a person can act on: where, and what is wrong."""
    parts = []
    for error in list(errors)[:5]:
        where = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
        parts.append(f"{where or 'body'}: {error.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(parts)

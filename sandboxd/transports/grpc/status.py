"""The one place where domain errors become gRPC status codes.

Every servicer method runs inside ``unary`` or ``streaming``, which first
authenticate the caller (``sandboxd.transports.auth``) and then map any error; nothing
else in the server calls ``context.abort``. The table is the error tree's own
``status_name``, which runtime_client reads too, so both ends agree.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol, TypeVar

import grpc

from sandboxd.contract.errors import SandboxdError
from sandboxd.observability.calls import mark_failed, observe
from sandboxd.service.scope import enter_scope, leave_scope
from sandboxd.transports.auth import Authenticator

log = logging.getLogger(__name__)


class Guarded(Protocol):
    authenticator: Authenticator


Self = TypeVar("Self", bound=Guarded)
Request = TypeVar("Request")
Response = TypeVar("Response")


def status_code(error: SandboxdError) -> grpc.StatusCode:
    return getattr(grpc.StatusCode, error.status_name, grpc.StatusCode.INTERNAL)


def describe(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status a failed call ends with: its code, and a message for the caller."""
    if isinstance(exc, SandboxdError):
        return status_code(exc), exc.message
    incident = uuid.uuid4().hex[:12]
    log.error("internal error %s", incident, exc_info=exc)
    return grpc.StatusCode.INTERNAL, f"internal error {incident}; the daemon log has the details"


async def _abort(context: grpc.aio.ServicerContext, exc: BaseException) -> None:
    mark_failed(exc)  # the abort that follows hides the cause from ``observe``
    await context.abort(*describe(exc))


def unary(
    method: Callable[[Self, Request, grpc.aio.ServicerContext], Awaitable[Response]],
) -> Callable[[Self, Request, grpc.aio.ServicerContext], Awaitable[Response]]:
    @functools.wraps(method)
    async def wrapper(self: Self, request: Request, context: grpc.aio.ServicerContext) -> Response:
        try:
            scope = self.authenticator.scope_for(
                context.peer(), context.invocation_metadata() or ()
            )
            token = enter_scope(scope)
            try:
                return await method(self, request, context)
            finally:
                leave_scope(token)
        except Exception as exc:
            if _is_abort(exc):
                raise
            await _abort(context, exc)
            raise AssertionError("unreachable") from exc

    return _observed_unary(wrapper)


def streaming(
    method: Callable[[Self, Request, grpc.aio.ServicerContext], AsyncIterator[Response]],
) -> Callable[[Self, Request, grpc.aio.ServicerContext], AsyncIterator[Response]]:
    @functools.wraps(method)
    async def wrapper(
        self: Self, request: Request, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Response]:
        try:
            scope = self.authenticator.scope_for(
                context.peer(), context.invocation_metadata() or ()
            )
            token = enter_scope(scope)
            try:
                async for item in method(self, request, context):
                    yield item
            finally:
                # A stream the client abandoned is closed by grpc from another
                # context, where this token cannot be reset (nor needs to be).
                with contextlib.suppress(ValueError):
                    leave_scope(token)
        except Exception as exc:
            if _is_abort(exc):
                raise
            await _abort(context, exc)

    return _observed_streaming(wrapper)


# ------------------------------------------------------------ metrics and access log
# Outermost, so that an unauthenticated call is counted too.


def _observed_unary(
    wrapper: Callable[[Self, Request, grpc.aio.ServicerContext], Awaitable[Response]],
) -> Callable[[Self, Request, grpc.aio.ServicerContext], Awaitable[Response]]:
    name = wrapper.__name__

    @functools.wraps(wrapper)
    async def observed(self: Self, request: Request, context: grpc.aio.ServicerContext) -> Response:
        with observe("grpc", name, **_call_labels(name, request)) as call:
            response = await wrapper(self, request, context)
            call.tool_error = bool(call.tool and getattr(response, "is_error", False))
            return response

    return observed


def _observed_streaming(
    wrapper: Callable[[Self, Request, grpc.aio.ServicerContext], AsyncIterator[Response]],
) -> Callable[[Self, Request, grpc.aio.ServicerContext], AsyncIterator[Response]]:
    name = wrapper.__name__

    @functools.wraps(wrapper)
    async def observed(
        self: Self, request: Request, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Response]:
        with observe("grpc", name, **_call_labels(name, request)):
            async for item in wrapper(self, request, context):
                yield item

    return observed


_TYPED_TOOLS = frozenset({"Read", "Write", "Edit", "Bash", "Grep", "Glob"})


def _call_labels(name: str, request: object) -> dict[str, str]:
    """What the metrics and the access log say about a request, read defensively:
    the message may be malformed and must not fail here."""
    target = getattr(request, "exec", request) if name == "ExecStream" else request
    tool = name.lower() if name in _TYPED_TOOLS else ""
    if name == "CallTool":
        tool = str(getattr(request, "name", ""))[:32]
    return {
        "instance_id": str(getattr(target, "instance_id", "")),
        "tool": tool,
        "tool_call_id": str(getattr(request, "tool_call_id", "")),
    }


def _is_abort(exc: BaseException) -> bool:
    # context.abort raises this to unwind the handler; it must pass through.
    return isinstance(exc, grpc.aio.AbortError)

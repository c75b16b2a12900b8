"""The one place on the client where gRPC status codes become exceptions."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

import grpc

from sandboxd.contract.errors import (
    ERROR_CLASSES,
    Internal,
    SandboxdError,
    SandboxUnavailable,
    Timeout,
)

# Built from the error tree's own table, so server and client cannot disagree.
_BY_STATUS: dict[str, type[SandboxdError]] = {
    **{cls.status_name: cls for cls in reversed(ERROR_CLASSES)},
    "CANCELLED": SandboxUnavailable,
    "DEADLINE_EXCEEDED": Timeout,
}

P = ParamSpec("P")
T = TypeVar("T")


def error_from_status(name: str, message: str) -> SandboxdError:
    """The exception for a status code name (e.g. ``NOT_FOUND``) and its message."""
    return _BY_STATUS.get(name, Internal)(message or f"sandboxd answered {name}")


def error_from_rpc(error: grpc.RpcError) -> SandboxdError:
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else None
    return error_from_status(code.name if code is not None else "UNKNOWN", details or "")


def mapped(func: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    @functools.wraps(func)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await func(*args, **kwargs)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from None

    return wrapper


def mapped_stream(func: Callable[P, AsyncIterator[T]]) -> Callable[P, AsyncIterator[T]]:
    @functools.wraps(func)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        try:
            async for item in func(*args, **kwargs):
                yield item
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from None

    return wrapper

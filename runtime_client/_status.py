"""The one place on the client where gRPC status codes become exceptions."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
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


def status_of(error: grpc.RpcError) -> tuple[str, str]:
    """The status code name and message an RPC error carries."""
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else None
    return code.name if code is not None else "UNKNOWN", details or ""


def error_from_rpc(error: grpc.RpcError) -> SandboxdError:
    return error_from_status(*status_of(error))


#: What grpc.aio says in place of a call's status when a write of the client's
#: loses the race with the call's end (grpc/grpc#36066, open at grpcio 1.85).
_LOST_STATUS = ("INTERNAL", "Internal error from Core")


def _at_once(step: Coroutine[Any, Any, T]) -> T | None:
    """The value of a coroutine that finishes without waiting, else None.

    An ended call's ``code()`` and ``details()`` do: they only read the status.
    """
    try:
        step.send(None)
    except StopIteration as done:
        value: T = done.value
        return value
    step.close()
    return None


class CallEnd:
    """The status a streaming call ended with, kept from grpc's own write.

    When the daemon ends a call the client is still writing on (it refused the
    token, the sandbox is gone, an older daemon lacks the method), grpc.aio
    gives the call the daemon's status, and then the write, failing for that
    very end, sets INTERNAL "Internal error from Core" over it: whoever reads
    the status later sees INTERNAL (1 in 300 refused ToolCalls calls on an
    idle machine, 1 in 100 on a loaded one; Upload, ConnectProcess and
    OpenPort alike). A call's done callbacks run once, with the first status,
    so that one is noted as it comes and stands in for grpc's INTERNAL.
    """

    def __init__(self, call: Any) -> None:
        self._first: tuple[str, str] | None = None
        self._call = call
        call.add_done_callback(self._ended)

    def _ended(self, call: Any) -> None:
        code = _at_once(call.code())
        if code is not None and self._first is None:
            self._first = (code.name, _at_once(call.details()) or "")

    def status(self, error: grpc.RpcError) -> tuple[str, str]:
        return self.instead_of(status_of(error))

    def instead_of(self, said: tuple[str, str]) -> tuple[str, str]:
        """``said`` (a code name and message), or the first status if grpc lost it."""
        if said == _LOST_STATUS and self._first is not None:
            return self._first
        return said

    def error(self, error: grpc.RpcError) -> SandboxdError:
        return error_from_status(*self.status(error))

    @contextlib.contextmanager
    def mapped(self) -> Iterator[None]:
        """Raise the call's failures as what the daemon said."""
        try:
            yield
        except grpc.RpcError as exc:
            raise self.error(exc) from None
        except asyncio.InvalidStateError:
            # grpc.aio's answer to a write on a call that has ended ("RPC
            # already finished"), perhaps before the done callbacks ran: the
            # end is the call's own status.
            self._ended(self._call)
            if self._first is None:
                raise
            raise error_from_status(*self._first) from None


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

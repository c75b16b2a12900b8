"""The one place on the client where gRPC status codes become exceptions."""

from __future__ import annotations

import asyncio
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
    token, the sandbox is gone, an older daemon lacks the method), the write
    fails for that very end and grpc.aio sets INTERNAL "Internal error from
    Core" on the call: whoever reads the status then sees INTERNAL (1 in 300
    refused ToolCalls calls on an idle machine, 1 in 100 on a loaded one;
    Upload, ConnectProcess and OpenPort alike). Two orders happen. The
    daemon's status arrives first: the call's done callbacks run once, with
    it, so it is noted as it comes. The write fails first: the callbacks ran
    with INTERNAL, and the daemon's status, received a loop turn later,
    replaces it on the call, so it is waited for (``LOST_STATUS_WAIT`` at
    most).
    """

    #: Seconds a lost status is waited for: grpc has the daemon's within a few
    #: loop turns of the failed write; a call whose end really was INTERNAL
    #: pays this once.
    LOST_STATUS_WAIT = 1.0

    def __init__(self, call: Any) -> None:
        self._first: tuple[str, str] | None = None
        self._call = call
        call.add_done_callback(self._ended)

    def _ended(self, call: Any) -> None:
        code = _at_once(call.code())
        if code is not None and self._first is None:
            self._first = (code.name, _at_once(call.details()) or "")

    async def status(self, error: grpc.RpcError) -> tuple[str, str]:
        return await self.instead_of(status_of(error))

    async def instead_of(self, said: tuple[str, str]) -> tuple[str, str]:
        """``said`` (a code name and message), or the daemon's status if grpc lost it."""
        if said != _LOST_STATUS:
            return said
        if self._first is not None and self._first != _LOST_STATUS:
            return self._first
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.LOST_STATUS_WAIT
        while True:
            code = _at_once(self._call.code())
            if code is not None:
                now = (code.name, _at_once(self._call.details()) or "")
                if now != _LOST_STATUS:
                    return now
            if loop.time() >= deadline:
                return said
            await asyncio.sleep(0.005)

    async def error(self, error: grpc.RpcError) -> SandboxdError:
        return error_from_status(*await self.status(error))

    def mapped(self) -> _Mapped:
        """``async with``: the call's failures raised as what the daemon said."""
        return _Mapped(self)

    async def ended(self) -> SandboxdError | None:
        """What a write on the ended call stands for (grpc.aio's InvalidStateError,
        perhaps before the done callbacks ran); None while the call runs."""
        self._ended(self._call)
        if self._first is None:
            return None
        return error_from_status(*await self.instead_of(self._first))


class _Mapped:
    """``CallEnd.mapped``: a class, not a generator, for its place on every write."""

    __slots__ = ("_end",)

    def __init__(self, end: CallEnd) -> None:
        self._end = end

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        if isinstance(exc, grpc.RpcError):
            raise await self._end.error(exc) from None
        if isinstance(exc, asyncio.InvalidStateError):
            # grpc.aio's answer to a write on a call that has ended ("RPC
            # already finished"): the end is the call's own status.
            error = await self._end.ended()
            if error is not None:
                raise error from None
        return False


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

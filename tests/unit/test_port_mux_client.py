"""The client end of OpenPorts opening its stream, and CallEnd, over a fake call
(unit tier): what each way a call can end before its headers becomes."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from runtime_client._status import CallEnd
from runtime_client.errors import Internal, PermissionDenied, Unauthenticated
from runtime_client.port_mux import MuxUnsupported, PortStream

pytestmark = pytest.mark.anyio


class _CoreInternal(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.INTERNAL

    def details(self) -> str:
        return "Internal error from Core"


class EndedCall:
    """A call the daemon ended at once; asking its headers after that fails as core does."""

    def __init__(self, code: grpc.StatusCode, details: str, *, headers_fail: bool) -> None:
        self._code, self._details, self._headers_fail = code, details, headers_fail
        self.cancelled = False

    async def initial_metadata(self) -> Any:
        if self._headers_fail:
            raise _CoreInternal()
        return ()

    def done(self) -> bool:
        return True

    async def code(self) -> grpc.StatusCode:
        return self._code

    async def details(self) -> str:
        return self._details

    def add_done_callback(self, callback: Any) -> None:
        callback(self)  # ended already: at once, with the status it ended with

    async def done_writing(self) -> None:
        pass

    def cancel(self) -> None:
        self.cancelled = True


@pytest.mark.parametrize("headers_fail", [False, True])
async def test_a_refused_caller_hears_its_own_status(headers_fail: bool) -> None:
    call = EndedCall(grpc.StatusCode.UNAUTHENTICATED, "bad token", headers_fail=headers_fail)
    with pytest.raises(Unauthenticated, match="bad token"):
        await PortStream.start(lambda: call)


async def test_a_daemon_without_the_rpc_is_told_apart() -> None:
    call = EndedCall(grpc.StatusCode.UNIMPLEMENTED, "Method not found", headers_fail=True)
    with pytest.raises(MuxUnsupported):
        await PortStream.start(lambda: call)


async def test_other_ends_keep_their_status() -> None:
    for code, error in (
        (grpc.StatusCode.PERMISSION_DENIED, PermissionDenied),
        (grpc.StatusCode.INTERNAL, Internal),
    ):
        with pytest.raises(error):
            await PortStream.start(lambda c=code: EndedCall(c, "x", headers_fail=False))  # type: ignore[misc]


async def test_a_status_grpc_lost_to_a_write_is_the_first_one() -> None:
    """grpc writes INTERNAL "Internal error from Core" over the daemon's
    status when a write fails for that very end (grpc/grpc#36066)."""
    call = EndedCall(grpc.StatusCode.UNAUTHENTICATED, "bad token", headers_fail=False)

    def lose(cb: Any) -> None:
        cb(call)
        call._code, call._details = grpc.StatusCode.INTERNAL, "Internal error from Core"

    call.add_done_callback = lose  # type: ignore[method-assign]
    with pytest.raises(Unauthenticated, match="bad token"):
        await PortStream.start(lambda: call)


async def test_a_write_on_an_ended_call_says_how_it_ended() -> None:
    """grpc.aio answers a write on an ended call with asyncio's InvalidStateError
    ("RPC already finished"), done callbacks perhaps not yet run: the call's
    own status is raised (ConnectProcess's send, any CallEnd.mapped write)."""
    call = EndedCall(grpc.StatusCode.UNAUTHENTICATED, "bad token", headers_fail=False)
    call.add_done_callback = lambda cb: None  # type: ignore[method-assign]  # not run yet
    end = CallEnd(call)
    with pytest.raises(Unauthenticated, match="bad token"):
        async with end.mapped():
            raise asyncio.InvalidStateError("RPC already finished.")


async def test_a_write_that_fails_before_the_status_comes_gets_the_daemons_status() -> None:
    """The other order of grpc/grpc#36066: the write fails first, grpc sets
    INTERNAL and runs the done callbacks with it; the daemon's status comes a
    loop turn later and replaces it on the call (an OpenPort refused as the
    open was written, once in a full CI run)."""
    call = EndedCall(grpc.StatusCode.INTERNAL, "Internal error from Core", headers_fail=False)
    end = CallEnd(call)

    async def status_arrives() -> None:
        await asyncio.sleep(0.02)
        call._code, call._details = grpc.StatusCode.UNAUTHENTICATED, "bad token"

    arrival = asyncio.create_task(status_arrives())
    with pytest.raises(Unauthenticated, match="bad token"):
        async with end.mapped():
            raise _CoreInternal()
    await arrival


async def test_an_internal_end_that_stays_is_raised_after_the_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(CallEnd, "LOST_STATUS_WAIT", 0.05)
    call = EndedCall(grpc.StatusCode.INTERNAL, "Internal error from Core", headers_fail=False)
    end = CallEnd(call)
    with pytest.raises(Internal, match="Internal error from Core"):
        async with end.mapped():
            raise _CoreInternal()


async def test_other_failures_pass_through_the_mapping_unchanged() -> None:
    end = CallEnd(EndedCall(grpc.StatusCode.OK, "", headers_fail=False))
    with pytest.raises(KeyError):
        async with end.mapped():
            raise KeyError("mine")

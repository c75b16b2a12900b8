"""Slow-client protection for uvicorn's HTTP/1.1 protocol (h11).

uvicorn closes idle kept-alive connections, but once a single byte arrives
it waits for the rest of a request head or body for ever, and it has no cap
on open connections (``limit_concurrency`` answers 503 only after reading a
request head, which a slow client never finishes). This subclass of
uvicorn's ``H11Protocol`` adds, per ``ConnectionLimits``:

- a head deadline, set when the connection opens and again when a response
  completes; bytes dripping in do not move it. On expiry a client that sent
  part of a head gets ``408``, an idle one just sees the connection close;
- a body idle timeout, counted only while the server is reading (uvicorn
  pauses reading while the application is busy with what it has), so a long
  upload that keeps flowing is never cut, nor while a client that sent
  ``Expect: 100-continue`` waits to be told to go on. On expiry: ``408`` if
  no response has started, then close;
- a connection cap: the connection beyond it is answered ``503`` at once,
  without reading anything, and closed.

It leans on uvicorn internals (``conn``, ``cycle``, ``flow``,
``on_response_complete``); ``check_uvicorn`` says at start-up if they are
gone, and tests/http/test_slow_clients.py fails if their meaning changes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import h11
from uvicorn.protocols.http import flow_control
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from sandboxd.contract.errors import SandboxUnavailable
from sandboxd.transports.http.connection_limits import ConnectionLimits

log = logging.getLogger(__name__)

#: How long a refused connection is kept half-closed, its input discarded, so
#: that closing it does not reset the 503 away before the client reads it.
_REFUSED_LINGER_S = 1.0
#: At most one log line per this many seconds about refused connections.
_REFUSAL_LOG_EVERY_S = 10.0

#: What this module touches inside uvicorn (checked by ``check_uvicorn``).
_H11_METHODS = ("connection_made", "connection_lost", "data_received", "on_response_complete")
_CYCLE_ATTRIBUTES = (
    "response_started",
    "disconnected",
    "message_event",
    "waiting_for_100_continue",
)


def check_uvicorn() -> None:
    """Raise if the installed uvicorn lacks what the guard overrides or reads."""
    missing = [name for name in _H11_METHODS if not callable(getattr(H11Protocol, name, None))]
    if not hasattr(flow_control, "FlowControl"):
        missing.append("flow_control.FlowControl")
    cycle_init = RequestResponseCycle.__init__.__code__.co_names
    missing += [f"RequestResponseCycle.{a}" for a in _CYCLE_ATTRIBUTES if a not in cycle_init]
    if missing:
        raise SandboxUnavailable(
            "this uvicorn version is not supported by sandboxd's HTTP guard "
            f"(missing {', '.join(missing)}); install the version pinned in pyproject.toml"
        )


def guarded_protocol(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """The ``uvicorn.Config(http=...)`` class that enforces ``limits``."""
    check_uvicorn()
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits})


class _WatchedFlow(flow_control.FlowControl):
    """uvicorn's flow control, telling the protocol when reading pauses or resumes."""

    def __init__(self, transport: asyncio.Transport, changed: Callable[[], None]) -> None:
        super().__init__(transport)
        self._changed = changed

    def pause_reading(self) -> None:
        was = self.read_paused
        super().pause_reading()
        if not was:
            self._changed()

    def resume_reading(self) -> None:
        super().resume_reading()
        # Every time: uvicorn calls this as the application asks for more body,
        # which is also when it answers a waiting "Expect: 100-continue".
        self._changed()


class GuardedH11Protocol(H11Protocol):
    limits: ClassVar[ConnectionLimits]
    #: Refused connections still lingering (per server: each has its own subclass).
    lingering: ClassVar[int] = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refused = False
        self._lingers = False
        self._timer: asyncio.TimerHandle | None = None
        self._waiting_for: Literal["head", "body"] | None = None
        self._last_read = 0.0

    # -- asyncio.Protocol -------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.server_state.connections) >= self.limits.max_connections:
            self._refuse(transport)
            return
        super().connection_made(transport)
        self.flow = _WatchedFlow(transport, self._follow)
        self._follow()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # discarded: the 503 is already on its way
        self._last_read = self.loop.time()
        super().data_received(data)
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        if self._lingers:
            type(self).lingering -= 1
            self._lingers = False
        if self._refused:
            return  # never admitted: uvicorn knows nothing of it
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        if not self._refused:
            super().pause_writing()

    def resume_writing(self) -> None:
        if not self._refused:
            super().resume_writing()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    # -- the timers -------------------------------------------------------

    def _follow(self) -> None:
        """Keep the one timer the connection's state calls for."""
        if self.transport is None or self.transport.is_closing():
            self._stop_timer()
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            if self._waiting_for != "head":  # a new deadline only for a new head
                self._start_timer("head", self.limits.header_timeout_s)
        elif state is h11.SEND_BODY and not self.flow.read_paused and not self._awaits_continue():
            if self._waiting_for != "body":
                self._last_read = self.loop.time()
                self._start_timer("body", self.limits.body_idle_timeout_s)
        else:
            self._stop_timer()

    def _awaits_continue(self) -> bool:
        # A client that sent "Expect: 100-continue" may wait, body unsent, until told to go on.
        return self.cycle is not None and self.cycle.waiting_for_100_continue

    def _start_timer(self, waiting_for: Literal["head", "body"], delay: float) -> None:
        self._stop_timer()
        self._waiting_for = waiting_for
        self._timer = self.loop.call_later(delay, self._expired)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._waiting_for = None

    def _expired(self) -> None:
        self._timer = None
        if self._waiting_for == "body":
            # One timer per body, not one per chunk: re-armed lazily while bytes flow.
            idle = self.loop.time() - self._last_read
            if idle < self.limits.body_idle_timeout_s:
                self._timer = self.loop.call_later(
                    self.limits.body_idle_timeout_s - idle, self._expired
                )
                return
            self._waiting_for = None
            self._body_stalled()
        elif self._waiting_for == "head":
            self._waiting_for = None
            self._head_late()

    def _head_late(self) -> None:
        if self.transport.is_closing():
            return
        if self.conn.trailing_data[0]:  # part of a head arrived: say why
            log.warning(
                "HTTP request head from %s not complete within %.0f s: closed",
                _peer(self.client),
                self.limits.header_timeout_s,
            )
            self.transport.write(
                _raw_response(408, "Request Timeout", "DEADLINE_EXCEEDED", self._head_message())
            )
        self.transport.close()

    def _body_stalled(self) -> None:
        if self.transport.is_closing():
            return
        log.warning(
            "HTTP request body from %s stalled for %.0f s: closed",
            _peer(self.client),
            self.limits.body_idle_timeout_s,
        )
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            # The application sees a disconnect and its own response goes nowhere.
            cycle.response_started = True
            cycle.disconnected = True
            cycle.message_event.set()
            self.transport.write(
                _raw_response(408, "Request Timeout", "DEADLINE_EXCEEDED", self._body_message())
            )
        self.transport.close()

    def _head_message(self) -> str:
        return f"request head not complete within {self.limits.header_timeout_s:g} s"

    def _body_message(self) -> str:
        return f"request body stalled for {self.limits.body_idle_timeout_s:g} s"

    # -- the connection cap ----------------------------------------------

    def _refuse(self, transport: asyncio.Transport) -> None:
        self._refused = True
        self.transport = transport
        _note_refusal(self.limits.max_connections)
        transport.write(
            _raw_response(
                503,
                "Service Unavailable",
                "UNAVAILABLE",
                f"more than {self.limits.max_connections} open HTTP connections; retry later",
                retry_after=1,
            )
        )
        cls = type(self)
        if cls.lingering >= self.limits.max_connections or not transport.can_write_eof():
            # A flood: refused connections may not hold descriptors beyond the cap
            # either, so these close at once (the 503 may then be lost to a reset).
            transport.close()
            return
        cls.lingering += 1
        self._lingers = True
        transport.write_eof()
        self._timer = self.loop.call_later(_REFUSED_LINGER_S, transport.close)


def _raw_response(
    status: int, reason: str, code: str, message: str, *, retry_after: int | None = None
) -> bytes:
    """A complete response written past h11 (its state machine allows none here).

    The body has the shape of every sandboxd HTTP error (``sandboxd.transports.http.errors``).
    """
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    head = [
        f"HTTP/1.1 {status} {reason}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
    ]
    if retry_after is not None:
        head.append(f"retry-after: {retry_after}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


_refusals = {"count": 0, "logged_at": 0.0}


def _note_refusal(limit: int) -> None:
    # Under a flood every refusal would be a line: one per interval, with the count.
    _refusals["count"] += 1
    now = time.monotonic()
    if now - _refusals["logged_at"] >= _REFUSAL_LOG_EVERY_S:
        log.warning(
            "HTTP connection limit (%d) reached: %d connection(s) answered 503",
            limit,
            _refusals["count"],
        )
        _refusals["count"] = 0
        _refusals["logged_at"] = now


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "?"

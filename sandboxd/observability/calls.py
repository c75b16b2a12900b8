"""One served call: timed, counted, access-logged, and known to every log line.

``observe`` wraps a call on either transport. While it runs, the call's
instance id and tool call id ride on a contextvar, so any log line written
during the call (a workspace restart, an internal error) carries them; the
JSON formatter asks ``log_fields`` for them.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sandboxd.contract.errors import SandboxdError
from sandboxd.observability import metrics

access_log = logging.getLogger("sandboxd.access")

OK = "OK"


@dataclass
class Call:
    transport: str
    method: str
    instance_id: str = ""
    tool: str = ""
    tool_call_id: str = ""
    code: str = OK
    cause: str = ""
    tool_error: bool = False
    started: float = field(default_factory=time.perf_counter)
    finished: bool = False

    def finish(self) -> None:
        """Count and log the call, once. A transport may call this before its
        last byte goes out, so a client never sees a response its call is not
        yet counted for; ``observe`` calls it in any case."""
        if not self.finished:
            self.finished = True
            _finish(self, time.perf_counter() - self.started)

    def fail(self, exc: BaseException) -> None:
        """Record why the call failed; the first cause recorded wins."""
        if self.code != OK:
            return
        if isinstance(exc, SandboxdError):
            self.code, self.cause = exc.status_name, exc.kind
        else:
            self.code, self.cause = "INTERNAL", "unexpected"


_current: contextvars.ContextVar[Call | None] = contextvars.ContextVar(
    "sandboxd_call", default=None
)
_access_level = logging.DEBUG


def configure(*, access_log_enabled: bool) -> None:
    """INFO when the access log is wanted; otherwise DEBUG, so it is there when debugging."""
    global _access_level
    _access_level = logging.INFO if access_log_enabled else logging.DEBUG


def current_call() -> Call | None:
    return _current.get()


def mark_failed(exc: BaseException) -> None:
    """Let a layer that turns an exception into a response say what it was."""
    call = _current.get()
    if call is not None:
        call.fail(exc)


@contextlib.contextmanager
def observe(
    transport: str, method: str, *, instance_id: str = "", tool: str = "", tool_call_id: str = ""
) -> Iterator[Call]:
    call = Call(transport, method, instance_id, tool, tool_call_id)
    token = _current.set(call)
    try:
        yield call
    except BaseException as exc:
        call.fail(exc)
        raise
    finally:
        # A generator closed from another context cannot reset; the context dies with it.
        with contextlib.suppress(ValueError):
            _current.reset(token)
        call.finish()


def _finish(call: Call, seconds: float) -> None:
    metrics.record_call(
        call.transport,
        call.method,
        call.tool,
        call.code,
        seconds,
        cause=call.cause,
        tool_error=call.tool_error,
    )
    if access_log.isEnabledFor(_access_level):
        access_log.log(
            _access_level,
            "%s %s %s",
            call.transport,
            call.method,
            call.code,
            extra={
                "fields": {
                    "transport": call.transport,
                    "method": call.method,
                    "instance_id": call.instance_id,
                    "tool": call.tool,
                    "tool_call_id": call.tool_call_id,
                    "status": call.code,
                    "is_error": call.tool_error,
                    "duration_ms": round(seconds * 1000, 3),
                }
            },
        )


def log_fields(record: logging.LogRecord) -> dict[str, Any]:
    """Structured fields for a JSON log line: the record's own, else the current call's."""
    fields = getattr(record, "fields", None)
    if isinstance(fields, dict):
        return fields
    call = _current.get()
    if call is None:
        return {}
    found = {"instance_id": call.instance_id, "tool_call_id": call.tool_call_id}
    return {key: value for key, value in found.items() if value}

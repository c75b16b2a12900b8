"""Commands run to completion: ``exec`` (one result) and ``exec_stream`` (output as it comes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from sandboxd.backends.shared.bounds import EXEC_TIMEOUT, setting_name
from sandboxd.contract import validation
from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.models import (
    ExecEvent,
    ExecExit,
    ExecOutput,
    ExecRequest,
    ExecResult,
)
from sandboxd.service.core import ServiceCore


class Exec(ServiceCore):
    def _exec_args(self, request: ExecRequest) -> dict[str, Any]:
        validation.command(request.argv, request.shell, request.cwd, request.env)
        self._check_payload(len(request.stdin), "stdin")
        timeout_ms = request.timeout_ms or self.settings.exec_timeout_ms
        maximum = getattr(self.settings, EXEC_TIMEOUT.maximum)
        if not 1 <= timeout_ms <= maximum:
            raise InvalidArgument(
                f"timeout_ms must be between 1 and {maximum} "
                f"({setting_name(EXEC_TIMEOUT.maximum)}; got {request.timeout_ms})"
            )
        return {
            "argv": list(request.argv) if request.argv is not None else None,
            "shell": request.shell,
            "cwd": request.cwd,
            "env": dict(request.env),
            "stdin": request.stdin,
            "timeout_ms": timeout_ms,
        }

    async def exec(self, instance_id: str, request: ExecRequest) -> ExecResult:
        args = self._exec_args(request)
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("exec", args)
        return ExecResult(
            stdout=raw["stdout"],
            stderr=raw["stderr"],
            exit_code=int(raw["exit_code"]),
            timed_out=bool(raw["timed_out"]),
            duration_ms=int(raw["duration_ms"]),
            stdout_truncated=bool(raw.get("stdout_truncated")),
            stderr_truncated=bool(raw.get("stderr_truncated")),
        )

    async def exec_stream(self, instance_id: str, request: ExecRequest) -> AsyncIterator[ExecEvent]:
        args = self._exec_args(request)
        workspace = await self._workspace(instance_id)
        async for event in workspace.stream("exec", args):
            result = event.get("result")
            if isinstance(result, dict):
                yield ExecExit(
                    exit_code=int(result["exit_code"]),
                    timed_out=bool(result["timed_out"]),
                    duration_ms=int(result["duration_ms"]),
                )
                return
            for stream in ("stdout", "stderr"):
                chunk = event.get(stream)
                if isinstance(chunk, bytes):
                    yield ExecOutput(stream=stream, data=chunk)

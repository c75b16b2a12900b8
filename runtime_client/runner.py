"""``ToolRunner``: runs the model's tool calls and wraps each outcome for the model.

Whatever a call does — unknown tool, arguments that do not parse, a ``run``
that raises or overruns its timeout — the runner answers with a result the
model can act on. Only cancellation of the runner itself propagates.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import anyio
import pydantic

from runtime_client.tools import (
    ArgumentsError,
    LogSink,
    Tool,
    ToolContext,
    ToolResult,
    describe_validation_error,
)
from runtime_client.toolset import ToolSet

if TYPE_CHECKING:
    from runtime_client.sandbox import Sandbox


@dataclass(frozen=True)
class ToolCall:
    """One call as a model made it. ``arguments`` is a JSON object, or its text
    (OpenAI sends text, which may not even parse — that is the model's error
    to see, not an exception)."""

    id: str
    name: str
    arguments: str | Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.arguments, str):
            object.__setattr__(self, "arguments", MappingProxyType(dict(self.arguments)))

    def arguments_json(self) -> str:
        """The arguments as JSON text, unchanged when the model sent text."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), ensure_ascii=False)

    def arguments_object(self) -> Mapping[str, Any]:
        """The arguments as a mapping; raises ``ArgumentsError`` when they are not one."""
        if not isinstance(self.arguments, str):
            return self.arguments
        if not self.arguments.strip():
            return {}
        try:
            value = json.loads(self.arguments)
        except json.JSONDecodeError as exc:
            raise ArgumentsError(f"the arguments are not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise ArgumentsError(f"the arguments must be a JSON object, got {type(value).__name__}")
        return value


@dataclass(frozen=True)
class ToolCallResult:
    """The envelope of one call's outcome.

    ``content`` is exactly what the model is shown; ``output`` is the JSON
    value behind it (``None`` for an error the runner produced); ``fields``
    are for the application only.
    """

    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    terminate: bool = False
    output: Any = None
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))


class ToolRunner:
    """Runs calls against one ``ToolSet`` (and the agent's sandbox, if any).

    ``default_timeout`` (seconds) applies to tools that set none; ``None``
    means no limit. ``on_log`` receives every ``ToolLog`` a tool emits.
    """

    def __init__(
        self,
        tools: ToolSet | Iterable[Tool[Any]],
        *,
        sandbox: Sandbox | None = None,
        on_log: LogSink | None = None,
        default_timeout: float | None = None,
    ) -> None:
        self.tools = tools if isinstance(tools, ToolSet) else ToolSet(tools)
        self.sandbox = sandbox
        self.on_log = on_log
        self.default_timeout = default_timeout

    async def run_turn(self, calls: Sequence[ToolCall]) -> list[ToolCallResult]:
        """Run one turn's calls concurrently, except that calls sharing a lock key
        run one at a time in the order given. Results come back in call order."""
        waits_for: list[list[int]] = []
        last_holder: dict[str, int] = {}
        for index, call in enumerate(calls):
            keys = self._lock_keys(call)
            # Waiting on each key's latest holder is enough: holders form a chain.
            waits_for.append(sorted({last_holder[k] for k in keys if k in last_holder}))
            for key in keys:
                last_holder[key] = index

        done = [anyio.Event() for _ in calls]
        results: list[ToolCallResult | None] = [None] * len(calls)

        async def run_one(index: int) -> None:
            try:
                for earlier in waits_for[index]:
                    await done[earlier].wait()
                results[index] = await self.run(calls[index])
            finally:
                done[index].set()

        async with anyio.create_task_group() as group:
            for index in range(len(calls)):
                group.start_soon(run_one, index)
        return [result for result in results if result is not None]

    async def run(self, call: ToolCall) -> ToolCallResult:
        """Run one call; never raises except on cancellation of the caller."""
        tool = self.tools.get(call.name)
        if tool is None:
            available = ", ".join(self.tools.names) or "(none)"
            return _error(
                call,
                f"Error: there is no tool named {call.name!r}. Available tools: {available}.",
            )
        try:
            arguments = MappingProxyType(dict(call.arguments_object()))
            data = tool.parse(arguments)
        except ArgumentsError as exc:
            return _error(
                call,
                f"Error: invalid arguments for {tool.name}: {exc}. "
                f"Call {tool.name} again with corrected arguments.",
            )

        timeout = tool.timeout if tool.timeout is not None else self.default_timeout
        deadline = anyio.current_time() + timeout if timeout is not None else math.inf
        with anyio.CancelScope(deadline=deadline) as scope:
            context = ToolContext(
                data=data,
                arguments=arguments,
                tool_call_id=call.id,
                tool_name=tool.name,
                cancel_scope=scope,
                sandbox=self.sandbox,
                _log_sink=self.on_log,
            )
            try:
                returned = await tool.run(context)
            except Exception as exc:
                return _error(call, f"Error: {tool.name} failed: {_describe(exc)}")
        if scope.cancelled_caught or scope.cancel_called:
            if timeout is not None and anyio.current_time() >= deadline:
                return _error(
                    call,
                    f"Error: {tool.name} timed out after {timeout:g} s and was stopped. "
                    "Try a smaller task, or split it.",
                )
            return _error(call, f"Error: {tool.name} was cancelled.")
        return _envelope(call, tool, returned)

    def _lock_keys(self, call: ToolCall) -> frozenset[str]:
        tool = self.tools.get(call.name)
        if tool is None:
            return frozenset()
        try:
            return tool.lock_keys(call.arguments_object())
        except Exception:
            # Unparseable arguments end in an error result anyway; a broken
            # lock_keys must not let the call overtake its predecessors.
            return frozenset({f"tool:{tool.name}"})


def _envelope(call: ToolCall, tool: Tool[Any], returned: object) -> ToolCallResult:
    if isinstance(returned, str):
        returned = ToolResult(output=returned)
    if not isinstance(returned, ToolResult):
        return _error(
            call,
            f"Error: {tool.name} failed: it returned {type(returned).__name__}, "
            "not a ToolResult or str.",
        )
    try:
        output = _checked_output(tool, returned.output)
        content = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    except (pydantic.ValidationError, TypeError, ValueError) as exc:
        detail = (
            describe_validation_error(exc) if isinstance(exc, pydantic.ValidationError) else exc
        )
        return _error(call, f"Error: {tool.name} returned an invalid result: {detail}")
    return ToolCallResult(
        tool_call_id=call.id,
        name=tool.name,
        # A string is shown as it is: JSON-quoting text only adds escapes the
        # model has to read through.
        content=content,
        is_error=returned.is_error,
        terminate=returned.terminate,
        output=output,
        fields=returned.fields,
    )


def _checked_output(tool: Tool[Any], output: object) -> Any:
    if tool.output is not None:
        if isinstance(output, pydantic.BaseModel) and not isinstance(output, tool.output):
            output = output.model_dump(mode="json")
        validated = tool.output.model_validate(output)
        return validated.model_dump(mode="json")
    if isinstance(output, pydantic.BaseModel):
        return output.model_dump(mode="json")
    # Round-trip, so the value handed on is plain JSON (no tuples, no NaN).
    return json.loads(json.dumps(output, allow_nan=False))


def _error(call: ToolCall, message: str) -> ToolCallResult:
    return ToolCallResult(tool_call_id=call.id, name=call.name, content=message, is_error=True)


def _describe(exc: Exception) -> str:
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__

"""``ScriptedModel``: a model adapter that plays a fixed script, for tests and examples."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runtime_client.model import ModelRequest, ModelResponse
from runtime_client.runner import ToolCall

# One turn of a script:
# - a str: the model answers with that text and calls no tool;
# - a sequence of (tool name, arguments) pairs: the model calls those tools;
# - a ModelResponse: used as it is;
# - a callable: given the request (to look at earlier results), returns one of the above.
ScriptTurn = (
    str
    | Sequence[tuple[str, Mapping[str, Any] | str]]
    | ModelResponse
    | Callable[
        [ModelRequest], "str | Sequence[tuple[str, Mapping[str, Any] | str]] | ModelResponse"
    ]
)


class ScriptExhausted(RuntimeError):
    """The agent asked the scripted model for more turns than the script has."""


class ScriptedModel:
    """Answers each request with the next turn of ``script``.

    Tool call ids are ``call_1``, ``call_2``... in order, so transcripts are
    reproducible. Every request is kept in ``requests`` for assertions.
    """

    def __init__(self, script: Sequence[ScriptTurn]) -> None:
        self._script = list(script)
        self._next_call = 1
        self.requests: list[ModelRequest] = []

    @property
    def remaining(self) -> int:
        return len(self._script) - len(self.requests)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        turn_index = len(self.requests)
        self.requests.append(request)
        if turn_index >= len(self._script):
            raise ScriptExhausted(
                f"the script has {len(self._script)} turns and the agent asked for another"
            )
        turn = self._script[turn_index]
        if callable(turn) and not isinstance(turn, ModelResponse):
            turn = turn(request)
        return self._response(turn)

    def _response(
        self, turn: str | Sequence[tuple[str, Mapping[str, Any] | str]] | ModelResponse
    ) -> ModelResponse:
        if isinstance(turn, ModelResponse):
            return turn
        if isinstance(turn, str):
            return ModelResponse(text=turn)
        calls = []
        for name, arguments in turn:
            calls.append(ToolCall(id=f"call_{self._next_call}", name=name, arguments=arguments))
            self._next_call += 1
        return ModelResponse(tool_calls=tuple(calls))

"""The port to a language model: ``ModelAdapter``, and the messages it is given.

Messages are provider-neutral; an adapter maps them to its API (see
``runtime_client.openai_chat``). ``format_transcript`` renders a conversation
as plain text that depends on nothing but the messages, so two runs of the same
session on different sandbox backends can be compared byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from runtime_client.runner import ToolCall, ToolCallResult
from runtime_client.schema import ToolSpec


@dataclass(frozen=True)
class UserMessage:
    text: str


@dataclass(frozen=True)
class AssistantMessage:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ToolResultsMessage:
    """The results of one turn's tool calls, in the order of the calls."""

    results: tuple[ToolCallResult, ...]


Message = UserMessage | AssistantMessage | ToolResultsMessage


@dataclass(frozen=True)
class ModelRequest:
    instructions: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()


@dataclass(frozen=True)
class ModelResponse:
    """A model's turn: some text, and the tools it wants called (maybe none)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = field(default=())


class ModelAdapter(Protocol):
    """Messages and tool schemas in, text and tool calls out."""

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


def format_transcript(messages: Sequence[Message]) -> str:
    """A plain-text rendering of a conversation, stable across sandbox backends."""
    lines: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            lines.append(f"user: {message.text}")
        elif isinstance(message, AssistantMessage):
            if message.text:
                lines.append(f"assistant: {message.text}")
            for call in message.tool_calls:
                lines.append(f"assistant -> {call.name} {call.arguments_json()}  [{call.id}]")
        else:
            for result in message.results:
                status = "error" if result.is_error else "ok"
                if result.terminate:
                    status += ", terminate"
                lines.append(f"tool <- {result.name} [{result.tool_call_id}] ({status})")
                lines.extend(f"    {line}" if line else "" for line in result.content.splitlines())
    return "\n".join(lines) + "\n"

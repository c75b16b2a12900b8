"""The public surface is pinned: changing it must be a conscious act."""

from __future__ import annotations

import pytest

import runtime_client
from sandboxd.contract import errors

pytestmark = pytest.mark.unit


def test_runtime_client_all_is_pinned() -> None:
    assert sorted(runtime_client.__all__) == [
        "Agent",
        "AgentRun",
        "AlreadyExists",
        "AssistantMessage",
        "Conflict",
        "ExecExit",
        "ExecOutput",
        "ExecResult",
        "ExistsResult",
        "FileInfo",
        "FileType",
        "GrpcSandboxFactory",
        "Internal",
        "InvalidArgument",
        "LocalSandboxFactory",
        "Message",
        "ModelAdapter",
        "ModelError",
        "ModelRequest",
        "ModelResponse",
        "NotFound",
        "OpenAIChatModel",
        "PermissionDenied",
        "Process",
        "ProcessChunk",
        "ProcessExit",
        "ProcessInfo",
        "RESERVED_TOOL_NAMES",
        "ReadFileResult",
        "ResourceExhausted",
        "Runtime",
        "Sandbox",
        "SandboxFactory",
        "SandboxInfo",
        "SandboxOptions",
        "SandboxToolResult",
        "SandboxUnavailable",
        "SandboxdError",
        "ScriptExhausted",
        "ScriptedModel",
        "Secret",
        "Timeout",
        "Tool",
        "ToolCall",
        "ToolCallResult",
        "ToolContext",
        "ToolDefinitionError",
        "ToolLog",
        "ToolNameConflictError",
        "ToolResult",
        "ToolResultsMessage",
        "ToolRunner",
        "ToolSet",
        "ToolSpec",
        "Unauthenticated",
        "UserMessage",
        "WriteFileResult",
        "define_tool",
        "format_transcript",
        "to_anthropic_tools",
        "to_openai_chat_tools",
        "to_openai_responses_tools",
    ]
    for name in runtime_client.__all__:
        assert hasattr(runtime_client, name), name


def test_client_errors_are_the_daemon_errors() -> None:
    assert runtime_client.NotFound is errors.NotFound
    assert runtime_client.SandboxdError is errors.SandboxdError

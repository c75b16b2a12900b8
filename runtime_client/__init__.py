"""runtime_client: the thin agent runtime's side of sandboxd.

    factory = GrpcSandboxFactory("unix:///run/sandboxd/sandboxd.sock")
    sandbox = await factory.create_sandbox("agent-42")
    await sandbox.write_file("hello.py", "print('hi')")
    result = await sandbox.exec("python3 hello.py")

Swap ``GrpcSandboxFactory`` for ``LocalSandboxFactory(root)`` and nothing
else changes. The agent runtime builds on it:

    agent = Agent(model=model, instructions="...", tools=[define_tool(...)], sandbox=factory)
    run = await agent.run("Fix the failing test", instance_id="agent-42")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Every name loads on first use (PEP 562), so `import runtime_client` (and
# loading the pytest plugin) costs nothing. The client names need only the
# base install (grpcio, protobuf: the contract layer); the agent runtime's
# need the `agent` extra (pydantic, anyio) and say so when it is missing.
_AGENT_EXTRA_MODULES = frozenset(
    {
        "runtime_client.agent",
        "runtime_client.model",
        "runtime_client.openai_chat",
        "runtime_client.runner",
        "runtime_client.scripted",
        "runtime_client.tools",
        "runtime_client.toolset",
    }
)

_WHERE: dict[str, str] = {
    "Agent": "runtime_client.agent",
    "AgentRun": "runtime_client.agent",
    "AlreadyExists": "runtime_client.errors",
    "Conflict": "runtime_client.errors",
    "Internal": "runtime_client.errors",
    "InvalidArgument": "runtime_client.errors",
    "NotFound": "runtime_client.errors",
    "PermissionDenied": "runtime_client.errors",
    "ResourceExhausted": "runtime_client.errors",
    "SandboxdError": "runtime_client.errors",
    "SandboxUnavailable": "runtime_client.errors",
    "Timeout": "runtime_client.errors",
    "Unauthenticated": "runtime_client.errors",
    "GrpcSandboxFactory": "runtime_client.factories",
    "LocalSandboxFactory": "runtime_client.factories",
    "AssistantMessage": "runtime_client.model",
    "Message": "runtime_client.model",
    "ModelAdapter": "runtime_client.model",
    "ModelRequest": "runtime_client.model",
    "ModelResponse": "runtime_client.model",
    "ToolResultsMessage": "runtime_client.model",
    "UserMessage": "runtime_client.model",
    "format_transcript": "runtime_client.model",
    "ModelError": "runtime_client.openai_chat",
    "OpenAIChatModel": "runtime_client.openai_chat",
    "ToolCall": "runtime_client.runner",
    "ToolCallResult": "runtime_client.runner",
    "ToolRunner": "runtime_client.runner",
    "Process": "runtime_client.processes",
    "Sandbox": "runtime_client.sandbox",
    "SandboxFactory": "runtime_client.sandbox",
    "ToolSpec": "runtime_client.schema",
    "to_anthropic_tools": "runtime_client.schema",
    "to_openai_chat_tools": "runtime_client.schema",
    "to_openai_responses_tools": "runtime_client.schema",
    "ScriptedModel": "runtime_client.scripted",
    "ScriptExhausted": "runtime_client.scripted",
    "Tool": "runtime_client.tools",
    "ToolContext": "runtime_client.tools",
    "ToolDefinitionError": "runtime_client.tools",
    "ToolLog": "runtime_client.tools",
    "ToolResult": "runtime_client.tools",
    "define_tool": "runtime_client.tools",
    "RESERVED_TOOL_NAMES": "runtime_client.toolset",
    "ToolNameConflictError": "runtime_client.toolset",
    "ToolSet": "runtime_client.toolset",
    "ExecExit": "sandboxd.contract.models",
    "ExecOutput": "sandboxd.contract.models",
    "ExecResult": "sandboxd.contract.models",
    "ExistsResult": "sandboxd.contract.models",
    "FileInfo": "sandboxd.contract.models",
    "FileType": "sandboxd.contract.models",
    "ProcessChunk": "sandboxd.contract.models",
    "ProcessExit": "sandboxd.contract.models",
    "ProcessInfo": "sandboxd.contract.models",
    "ReadFileResult": "sandboxd.contract.models",
    "Runtime": "sandboxd.contract.models",
    "SandboxInfo": "sandboxd.contract.models",
    "SandboxOptions": "sandboxd.contract.models",
    "SandboxToolResult": "sandboxd.contract.models",
    "Secret": "sandboxd.contract.secrets",
    "WriteFileResult": "sandboxd.contract.models",
}

if TYPE_CHECKING:
    from runtime_client.agent import Agent, AgentRun
    from runtime_client.errors import (
        AlreadyExists,
        Conflict,
        Internal,
        InvalidArgument,
        NotFound,
        PermissionDenied,
        ResourceExhausted,
        SandboxdError,
        SandboxUnavailable,
        Timeout,
        Unauthenticated,
    )
    from runtime_client.factories import GrpcSandboxFactory, LocalSandboxFactory
    from runtime_client.model import (
        AssistantMessage,
        Message,
        ModelAdapter,
        ModelRequest,
        ModelResponse,
        ToolResultsMessage,
        UserMessage,
        format_transcript,
    )
    from runtime_client.openai_chat import ModelError, OpenAIChatModel
    from runtime_client.processes import Process
    from runtime_client.runner import ToolCall, ToolCallResult, ToolRunner
    from runtime_client.sandbox import Sandbox, SandboxFactory
    from runtime_client.schema import (
        ToolSpec,
        to_anthropic_tools,
        to_openai_chat_tools,
        to_openai_responses_tools,
    )
    from runtime_client.scripted import ScriptedModel, ScriptExhausted
    from runtime_client.tools import (
        Tool,
        ToolContext,
        ToolDefinitionError,
        ToolLog,
        ToolResult,
        define_tool,
    )
    from runtime_client.toolset import RESERVED_TOOL_NAMES, ToolNameConflictError, ToolSet
    from sandboxd.contract.models import (
        ExecExit,
        ExecOutput,
        ExecResult,
        ExistsResult,
        FileInfo,
        FileType,
        ProcessChunk,
        ProcessExit,
        ProcessInfo,
        ReadFileResult,
        Runtime,
        SandboxInfo,
        SandboxOptions,
        SandboxToolResult,
        WriteFileResult,
    )
    from sandboxd.contract.secrets import Secret


def __getattr__(name: str) -> Any:
    module_name = _WHERE.get(name)
    if module_name is None:
        raise AttributeError(f"module 'runtime_client' has no attribute {name!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        from sandboxd.contract.extras import EXTRAS, message

        if module_name not in _AGENT_EXTRA_MODULES or exc.name not in EXTRAS["agent"]:
            raise
        raise ImportError(message("agent", f"runtime_client.{name}"), name=exc.name) from exc
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__all__ = [
    "RESERVED_TOOL_NAMES",
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

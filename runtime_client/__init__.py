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
from sandboxd.models import (
    ExecExit,
    ExecOutput,
    ExecResult,
    ExistsResult,
    FileInfo,
    FileType,
    ReadFileResult,
    Runtime,
    SandboxInfo,
    SandboxOptions,
    SandboxToolResult,
    WriteFileResult,
)

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

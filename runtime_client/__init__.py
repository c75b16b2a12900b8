"""runtime_client: the thin agent runtime's side of sandboxd.

    factory = GrpcSandboxFactory("unix:///run/sandboxd/sandboxd.sock")
    sandbox = await factory.create_sandbox("agent-42")
    await sandbox.write_file("hello.py", "print('hi')")
    result = await sandbox.exec("python3 hello.py")

Swap ``GrpcSandboxFactory`` for ``LocalSandboxFactory(root)`` and nothing
else changes.
"""

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
)
from runtime_client.factories import GrpcSandboxFactory, LocalSandboxFactory
from runtime_client.sandbox import Sandbox, SandboxFactory
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
    WriteFileResult,
)

__all__ = [
    "AlreadyExists",
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
    "NotFound",
    "PermissionDenied",
    "ReadFileResult",
    "ResourceExhausted",
    "Runtime",
    "Sandbox",
    "SandboxFactory",
    "SandboxInfo",
    "SandboxOptions",
    "SandboxUnavailable",
    "SandboxdError",
    "Timeout",
    "WriteFileResult",
]

"""The public surface is pinned: changing it must be a conscious act."""

from __future__ import annotations

import pytest

import runtime_client
from sandboxd import errors

pytestmark = pytest.mark.unit


def test_runtime_client_all_is_pinned() -> None:
    assert sorted(runtime_client.__all__) == [
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
    for name in runtime_client.__all__:
        assert hasattr(runtime_client, name), name


def test_client_errors_are_the_daemon_errors() -> None:
    assert runtime_client.NotFound is errors.NotFound
    assert runtime_client.SandboxdError is errors.SandboxdError

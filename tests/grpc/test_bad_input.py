"""Every malformed request: its status code, its message, and nothing changed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest

from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.contract.v1 import sandbox_pb2_grpc as pb_grpc
from sandboxd.daemon.assembly import Daemon

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED

CASES: list[tuple[str, Callable[[Any], Awaitable[Any]], grpc.StatusCode, str]] = [
    (
        "invalid id on create",
        lambda s: s.CreateSandbox(pb.CreateSandboxRequest(instance_id="bad id")),
        INVALID,
        "invalid instance id 'bad id'",
    ),
    (
        "empty id",
        lambda s: s.GetSandbox(pb.GetSandboxRequest(instance_id="")),
        INVALID,
        "invalid instance id ''",
    ),
    (
        "overlong id",
        lambda s: s.GetSandbox(pb.GetSandboxRequest(instance_id="a" * 129)),
        INVALID,
        "1-128 characters",
    ),
    (
        "unknown id",
        lambda s: s.ReadFile(pb.ReadFileRequest(instance_id="ghost", path="f")),
        NOT_FOUND,
        "no sandbox with instance id 'ghost'",
    ),
    (
        "unknown id delete",
        lambda s: s.DeleteSandbox(pb.DeleteSandboxRequest(instance_id="ghost")),
        NOT_FOUND,
        "no sandbox with instance id 'ghost'",
    ),
    (
        "empty path",
        lambda s: s.ReadFile(pb.ReadFileRequest(instance_id="box", path="")),
        INVALID,
        "path must not be empty",
    ),
    (
        "NUL path read",
        lambda s: s.ReadFile(pb.ReadFileRequest(instance_id="box", path="a\x00b")),
        INVALID,
        "path contains a NUL byte",
    ),
    (
        "NUL path write",
        lambda s: s.WriteFile(pb.WriteFileRequest(instance_id="box", path="a\x00b", data=b"x")),
        INVALID,
        "path contains a NUL byte",
    ),
    (
        "negative offset",
        lambda s: s.ReadFile(pb.ReadFileRequest(instance_id="box", path="f", offset=-1)),
        INVALID,
        "offset must not be negative (got -1)",
    ),
    (
        "negative length",
        lambda s: s.ReadFile(pb.ReadFileRequest(instance_id="box", path="f", length=-5)),
        INVALID,
        "length must not be negative (got -5)",
    ),
    (
        "oversize write",
        lambda s: s.WriteFile(
            pb.WriteFileRequest(instance_id="box", path="big", data=b"x" * 70000)
        ),
        EXHAUSTED,
        "data is 70000 bytes, over the payload limit of 65536 bytes",
    ),
    (
        "oversize read length",
        lambda s: s.ReadFile(pb.ReadFileRequest(instance_id="box", path="f", length=70000)),
        EXHAUSTED,
        "payload limit of 65536",
    ),
    (
        "bad hash",
        lambda s: s.WriteFile(
            pb.WriteFileRequest(instance_id="box", path="f", data=b"x", expected_sha256="abc")
        ),
        INVALID,
        "expected_sha256 must be 64 lowercase hex digits",
    ),
    (
        "stale hash",
        lambda s: s.WriteFile(
            pb.WriteFileRequest(instance_id="box", path="f", data=b"x", expected_sha256="0" * 64)
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        "content changed",
    ),
    (
        "bad mode",
        lambda s: s.WriteFile(
            pb.WriteFileRequest(instance_id="box", path="g", data=b"x", mode=0o70000)
        ),
        INVALID,
        "mode must be a permission value",
    ),
    (
        "missing file",
        lambda s: s.ReadFile(pb.ReadFileRequest(instance_id="box", path="nope")),
        NOT_FOUND,
        "no such file or directory",
    ),
    (
        "read a directory",
        lambda s: s.ReadFile(pb.ReadFileRequest(instance_id="box", path=".")),
        INVALID,
        "is a directory",
    ),
    (
        "exec without command",
        lambda s: s.Exec(pb.ExecRequest(instance_id="box")),
        INVALID,
        "give exactly one of argv and shell",
    ),
    (
        "exec empty argv",
        lambda s: s.Exec(pb.ExecRequest(instance_id="box", argv=pb.ArgV())),
        INVALID,
        "argv must be non-empty",
    ),
    (
        "exec negative timeout",
        lambda s: s.Exec(pb.ExecRequest(instance_id="box", shell="true", timeout_ms=-1)),
        INVALID,
        "timeout_ms must be between 1 and",
    ),
    (
        "exec timeout over its maximum",
        lambda s: s.Exec(pb.ExecRequest(instance_id="box", shell="true", timeout_ms=1 << 40)),
        INVALID,
        "timeout_ms must be between 1 and 3600000 (SANDBOXD_MAX_EXEC_TIMEOUT_MS",
    ),
    (
        "exec bad env",
        lambda s: s.Exec(pb.ExecRequest(instance_id="box", shell="true", env={"A=B": "x"})),
        INVALID,
        "invalid variable name",
    ),
    (
        "exec missing program",
        lambda s: s.Exec(pb.ExecRequest(instance_id="box", argv=pb.ArgV(args=["/no/such/prog"]))),
        NOT_FOUND,
        "program not found",
    ),
    (
        "bad option",
        lambda s: s.CreateSandbox(
            pb.CreateSandboxRequest(instance_id="opt", options=pb.SandboxOptions(memory_bytes=5))
        ),
        INVALID,
        "memory_bytes must be at least",
    ),
    # Issue 23 item 9: no option past the operator's maximum, on create or fork.
    *[
        (
            f"{field} over its maximum on {rpc}",
            call,
            INVALID,
            f"{field} {shown} is over this daemon's maximum of",
        )
        for field, value, shown in [
            ("memory_bytes", 1 << 40, str(1 << 40)),
            ("cpus", 4096.0, "4096"),
            ("pids_limit", 1 << 30, str(1 << 30)),
            ("idle_ttl_seconds", 1 << 40, str(1 << 40)),
        ]
        for rpc, call in [
            (
                "create",
                lambda s, f=field, v=value: s.CreateSandbox(
                    pb.CreateSandboxRequest(instance_id="big", options=pb.SandboxOptions(**{f: v}))
                ),
            ),
            (
                "fork",
                lambda s, f=field, v=value: s.ForkSandbox(
                    pb.ForkSandboxRequest(
                        source_id="box", new_id="big", options=pb.SandboxOptions(**{f: v})
                    )
                ),
            ),
        ]
    ],
    # Issue 23 item 11: typed answers, not INTERNAL or UNAVAILABLE.
    *[
        (
            f"cpus {value} on {rpc}",
            call,
            INVALID,
            "cpus must be a finite number",
        )
        for value in (float("nan"), float("inf"), float("-inf"))
        for rpc, call in [
            (
                "create",
                lambda s, v=value: s.CreateSandbox(
                    pb.CreateSandboxRequest(instance_id="cpu", options=pb.SandboxOptions(cpus=v))
                ),
            ),
            (
                "fork",
                lambda s, v=value: s.ForkSandbox(
                    pb.ForkSandboxRequest(
                        source_id="box", new_id="cpu", options=pb.SandboxOptions(cpus=v)
                    )
                ),
            ),
        ]
    ],
    (
        "an image that is an engine flag",
        lambda s: s.CreateSandbox(
            pb.CreateSandboxRequest(
                instance_id="img", options=pb.SandboxOptions(image="--privileged")
            )
        ),
        INVALID,
        "image '--privileged' is not an image reference",
    ),
    (
        "an unknown runtime",
        lambda s: s.CreateSandbox(
            pb.CreateSandboxRequest(
                instance_id="rt",
                options=pb.SandboxOptions(runtime=7),  # type: ignore[arg-type]
            )
        ),
        INVALID,
        "options.runtime 7 is not a runtime: use RUNTIME_UNSPECIFIED, RUNTIME_RUNC, RUNTIME_RUNSC",
    ),
    (
        "an unknown runtime on fork",
        lambda s: s.ForkSandbox(
            pb.ForkSandboxRequest(
                source_id="box",
                new_id="rt",
                options=pb.SandboxOptions(runtime=7),  # type: ignore[arg-type]
            )
        ),
        INVALID,
        "options.runtime 7 is not a runtime",
    ),
    (
        "bad label selector",
        lambda s: s.ListSandboxes(pb.ListSandboxesRequest(label_selector={"bad key": "v"})),
        INVALID,
        "invalid key",
    ),
    (
        "unknown tool",
        lambda s: s.CallTool(
            pb.CallToolRequest(instance_id="box", name="rm_rf", arguments_json="{}")
        ),
        INVALID,
        "unknown tool 'rm_rf'; the tools are read, write, edit, bash, grep, glob",
    ),
    (
        "tool arguments not JSON",
        lambda s: s.CallTool(
            pb.CallToolRequest(instance_id="box", name="read", arguments_json="{")
        ),
        INVALID,
        "arguments_json is not valid JSON",
    ),
    (
        "tool arguments not an object",
        lambda s: s.CallTool(
            pb.CallToolRequest(instance_id="box", name="read", arguments_json="[1]")
        ),
        INVALID,
        "arguments_json must be a JSON object",
    ),
    (
        "tool on unknown instance",
        lambda s: s.Read(pb.ReadRequest(instance_id="ghost", file_path="f")),
        NOT_FOUND,
        "no sandbox with instance id 'ghost'",
    ),
    (
        "remove workspace root",
        lambda s: s.Remove(pb.RemoveRequest(instance_id="box", path=".", recursive=True)),
        INVALID,
        "workspace root",
    ),
]


@pytest.mark.parametrize(("name", "call", "code", "message"), CASES, ids=[c[0] for c in CASES])
async def test_bad_input_gets_a_clear_status_and_changes_nothing(
    server: Daemon,
    name: str,
    call: Callable[[Any], Awaitable[Any]],
    code: grpc.StatusCode,
    message: str,
) -> None:
    async with grpc.aio.insecure_channel(f"unix://{server.settings.socket}") as channel:
        stub = pb_grpc.SandboxServiceStub(channel)
        await stub.CreateSandbox(pb.CreateSandboxRequest(instance_id="box"))
        await stub.WriteFile(pb.WriteFileRequest(instance_id="box", path="f", data=b"original"))
        before = await stub.ListDir(pb.ListDirRequest(instance_id="box", path="."))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(stub)
        assert caught.value.code() == code
        assert message in (caught.value.details() or "")
        after = await stub.ListDir(pb.ListDirRequest(instance_id="box", path="."))
        assert [(e.name, e.size) for e in after.entries] == [
            (e.name, e.size) for e in before.entries
        ]
        content = await stub.ReadFile(pb.ReadFileRequest(instance_id="box", path="f"))
        assert content.data == b"original"
        listed = await stub.ListSandboxes(pb.ListSandboxesRequest())
        assert [s.instance_id for s in listed.sandboxes] == ["box"]
        # The daemon is still healthy after every bad request.
        assert (
            await stub.GetSandbox(pb.GetSandboxRequest(instance_id="box"))
        ).sandbox.state == "running"

"""CallTool's per-call folder (``cwd``): every tool resolves against it.

Adapters whose framework gives each agent a working folder (Flue's
``useSandbox(factory, {cwd})``) send it with every call instead of relying on
the instance workdir.
"""

from __future__ import annotations

import json

import grpc
import pytest

from runtime_client import GrpcSandboxFactory, InvalidArgument
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.contract.v1 import sandbox_pb2_grpc as pb_grpc
from sandboxd.daemon.assembly import Daemon

pytestmark = pytest.mark.anyio


async def _call(
    stub: pb_grpc.SandboxServiceStub, name: str, args: dict[str, object], cwd: str = "", **kw: str
) -> pb.CallToolResponse:
    return await stub.CallTool(
        pb.CallToolRequest(
            instance_id="cwd", name=name, arguments_json=json.dumps(args), cwd=cwd, **kw
        )
    )


async def test_every_tool_resolves_relative_paths_against_cwd(server: Daemon) -> None:
    async with grpc.aio.insecure_channel(f"unix://{server.settings.socket}") as channel:
        stub = pb_grpc.SandboxServiceStub(channel)
        await stub.CreateSandbox(pb.CreateSandboxRequest(instance_id="cwd"))
        root = (await _call(stub, "bash", {"command": "mkdir -p sub/deep && pwd"})).text
        root = root.splitlines()[0]
        sub = f"{root}/sub"

        wrote = await _call(stub, "write", {"file_path": "a.txt", "content": "alpha\n"}, sub)
        assert not wrote.is_error, wrote.text
        on_disk = await stub.ReadFile(pb.ReadFileRequest(instance_id="cwd", path="sub/a.txt"))
        assert on_disk.data == b"alpha\n"

        read = await _call(stub, "read", {"file_path": "a.txt"}, sub)
        assert read.text == "     1\talpha"
        edited = await _call(
            stub, "edit", {"file_path": "a.txt", "old_string": "alpha", "new_string": "beta"}, sub
        )
        assert not edited.is_error, edited.text
        grep = await _call(stub, "grep", {"pattern": "beta"}, sub)
        assert grep.text.splitlines()[-1] == "a.txt"
        glob = await _call(stub, "glob", {"pattern": "*.txt"}, sub)
        assert glob.text.splitlines()[-1] == "a.txt"
        # bash starts there; a relative workdir resolves against it; the saved
        # cwd of plain calls is untouched.
        pwd = await _call(stub, "bash", {"command": "pwd"}, sub)
        assert pwd.text.splitlines()[0] == sub
        deep = await _call(stub, "bash", {"command": "pwd", "workdir": "deep"}, sub)
        assert deep.text.splitlines()[0] == f"{sub}/deep"
        await _call(stub, "bash", {"command": "cd /tmp"}, sub)
        plain = await _call(stub, "bash", {"command": "pwd"})
        assert plain.text.splitlines()[0] == root
        # Relative cwd: relative to the workdir, like any path.
        relative = await _call(stub, "read", {"file_path": "a.txt"}, "sub")
        assert relative.text == "     1\tbeta"


async def test_a_missing_cwd_is_a_model_facing_error(server: Daemon) -> None:
    async with grpc.aio.insecure_channel(f"unix://{server.settings.socket}") as channel:
        stub = pb_grpc.SandboxServiceStub(channel)
        await stub.CreateSandbox(pb.CreateSandboxRequest(instance_id="cwd"))
        root = (await _call(stub, "bash", {"command": "pwd"})).text.splitlines()[0]
        missing = await _call(stub, "write", {"file_path": "x", "content": ""}, "nope")
        assert missing.is_error
        assert missing.text.startswith(f"Error: the working folder {root}/nope")
        listed = await stub.ListDir(pb.ListDirRequest(instance_id="cwd", path="."))
        assert [e.name for e in listed.entries] == []
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await _call(stub, "read", {"file_path": "x"}, "a\x00b")
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_replayed_call_id_from_another_folder_is_refused(server: Daemon) -> None:
    async with grpc.aio.insecure_channel(f"unix://{server.settings.socket}") as channel:
        stub = pb_grpc.SandboxServiceStub(channel)
        await stub.CreateSandbox(pb.CreateSandboxRequest(instance_id="cwd"))
        await _call(stub, "bash", {"command": "mkdir -p one two"})
        args = {"file_path": "f", "content": "x"}
        first = await _call(stub, "write", args, "one", tool_call_id="t1")
        again = await _call(stub, "write", args, "one", tool_call_id="t1")
        assert again.text == first.text
        with pytest.raises(grpc.aio.AioRpcError) as other:
            await _call(stub, "write", args, "two", tool_call_id="t1")
        assert other.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_tool_calls_stream_carries_the_folder(server: Daemon) -> None:
    async with grpc.aio.insecure_channel(f"unix://{server.settings.socket}") as channel:
        stub = pb_grpc.SandboxServiceStub(channel)
        await stub.CreateSandbox(pb.CreateSandboxRequest(instance_id="cwd"))
        await _call(stub, "bash", {"command": "mkdir -p in/here"})
        stream = stub.ToolCalls()
        call = pb.CallToolRequest(
            instance_id="cwd", name="bash", arguments_json='{"command": "pwd"}', cwd="in/here"
        )
        await stream.write(pb.ToolCallsRequest(call_id=7, call=call))
        answer = await stream.read()
        await stream.done_writing()
        assert answer.call_id == 7
        assert answer.result.text.splitlines()[0].endswith("/in/here")


async def test_the_python_runtime_sends_the_folder(factory: GrpcSandboxFactory) -> None:
    sandbox = await factory.create_sandbox("cwd-runtime")
    root = (await sandbox.call_tool("bash", {"command": "mkdir -p in/here && pwd"})).text
    root = root.splitlines()[0]
    wrote = await sandbox.call_tool("write", {"file_path": "w.txt", "content": "x\n"}, cwd="in")
    assert not wrote.is_error, wrote.text
    assert (await sandbox.read_file("in/w.txt")).data == b"x\n"
    here = await sandbox.call_tool("bash", {"command": "pwd"}, cwd="in/here")
    assert here.text.splitlines()[0] == f"{root}/in/here"
    # None and "" are the workdir, as an unset field on the wire.
    for plain in (None, ""):
        pwd = await sandbox.call_tool("bash", {"command": "pwd"}, cwd=plain)
        assert pwd.text.splitlines()[0] == root
    missing = await sandbox.call_tool("read", {"file_path": "w.txt"}, cwd="gone")
    assert missing.is_error and missing.text.startswith(f"Error: the working folder {root}/gone")
    with pytest.raises(InvalidArgument, match="cwd"):
        await sandbox.call_tool("read", {"file_path": "w.txt"}, cwd="a\x00b")

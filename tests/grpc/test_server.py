"""The daemon over real gRPC: lifecycle, verbs, health, reflection, drain."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import anyio
import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from runtime_client import (
    AlreadyExists,
    ExecExit,
    ExecOutput,
    FileType,
    GrpcSandboxFactory,
    InvalidArgument,
    NotFound,
    SandboxOptions,
)
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.contract.v1 import sandbox_pb2_grpc as pb_grpc
from sandboxd.daemon import assembly
from tests.helpers import Daemon, health_status

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]


async def test_socket_is_private_and_health_serving(server: assembly.Daemon) -> None:
    mode = server.settings.socket.stat().st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o600
    target = f"unix://{server.settings.socket}"
    assert await anyio.to_thread.run_sync(health_status, target) == "SERVING"


def _reflected_services(target: str) -> list[str]:
    with grpc.insecure_channel(target) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        reply = next(iter(stub.ServerReflectionInfo(iter([request]))))
    return sorted(s.name for s in reply.list_services_response.service)


async def test_reflection_lists_the_service(server: assembly.Daemon) -> None:
    services = await anyio.to_thread.run_sync(
        _reflected_services, f"unix://{server.settings.socket}"
    )
    assert "sandboxd.v1.SandboxService" in services
    assert "grpc.health.v1.Health" in services


async def test_lifecycle_is_idempotent_and_listable(factory: GrpcSandboxFactory) -> None:
    transport = factory.transport
    info, created = await transport.create_sandbox("a1", SandboxOptions(labels={"team": "x"}))
    assert created is True and info.instance_id == "a1"
    again, created_again = await transport.create_sandbox("a1")
    assert created_again is False and again.created_at_ms == info.created_at_ms
    await transport.create_sandbox("a2")
    assert [i.instance_id for i in await transport.list_sandboxes()] == ["a1", "a2"]
    assert [i.instance_id for i in await transport.list_sandboxes({"team": "x"})] == ["a1"]
    await transport.delete_sandbox("a1")
    with pytest.raises(NotFound, match="no sandbox with instance id 'a1'"):
        await transport.get_sandbox("a1")
    with pytest.raises(NotFound):
        await transport.delete_sandbox("a1")


async def test_file_verbs_round_trip(factory: GrpcSandboxFactory) -> None:
    box = await factory.create_sandbox("files")
    written = await box.write_file("deep/dir/f.bin", bytes(range(256)))
    assert written.created and written.size == 256
    assert (await box.read_file("deep/dir/f.bin", offset=250)).data == bytes(range(250, 256))
    info = await box.stat("deep/dir/f.bin")
    assert info.type is FileType.FILE and info.size == 256
    assert [e.name for e in await box.list_dir("deep")] == ["dir"]
    assert (await box.exists("deep/dir")).type is FileType.DIRECTORY
    assert (await box.exists("nope")).exists is False
    assert await box.make_dir("other/x") is True
    assert await box.remove("deep", recursive=True) is True
    assert (await box.exists("deep")).exists is False


async def test_exec_and_exec_stream(factory: GrpcSandboxFactory) -> None:
    box = await factory.create_sandbox("exec")
    result = await box.exec("echo $GREETING; echo oops >&2; exit 4", env={"GREETING": "hi"})
    assert (result.stdout, result.stderr, result.exit_code) == (b"hi\n", b"oops\n", 4)
    argv = await box.exec(["printf", "%s|", "a b", "c"])
    assert argv.stdout == b"a b|c|"
    events = [e async for e in box.exec_stream("echo one; sleep 0.2; echo two >&2; exit 2")]
    assert events[:-1] == [ExecOutput("stdout", b"one\n"), ExecOutput("stderr", b"two\n")]
    final = events[-1]
    assert isinstance(final, ExecExit) and final.exit_code == 2 and final.duration_ms >= 200


async def test_sigterm_drains_in_flight_calls(tmp_path: Path) -> None:
    daemon = Daemon(
        tmp_path / "d.sock",
        "--backend",
        "local",
        "--local-root",
        str(tmp_path / "root"),
        "--drain-seconds",
        "20",
    )
    await anyio.to_thread.run_sync(daemon.start)
    try:
        async with GrpcSandboxFactory(daemon.target) as factory:
            box = await factory.create_sandbox("drain")
            call = asyncio.create_task(box.exec("sleep 1.5; echo finished"))
            await asyncio.sleep(0.5)
            code = await anyio.to_thread.run_sync(daemon.terminate)
            result = await call
        assert result.stdout == b"finished\n" and result.exit_code == 0
        assert code == 0
        assert not daemon.socket.exists()
    finally:
        daemon.stop()


async def test_tool_call_id_makes_retries_safe(factory: GrpcSandboxFactory) -> None:
    box = await factory.create_sandbox("retry")
    first = await box.call_tool("bash", {"command": "echo once >> log.txt"}, tool_call_id="t-1")
    retry = await box.call_tool("bash", {"command": "echo once >> log.txt"}, tool_call_id="t-1")
    assert retry.text == first.text and retry.fields["replayed"] is True
    assert (await box.read_file("log.txt")).data == b"once\n"
    with pytest.raises(InvalidArgument, match="already used for a different call"):
        await box.call_tool("bash", {"command": "echo other"}, tool_call_id="t-1")
    with pytest.raises(InvalidArgument, match="tool_call_id must be 1-256"):
        await box.call_tool("bash", {"command": "true"}, tool_call_id="x" * 300)


async def test_read_guard_is_on_by_default_and_an_option_turns_it_off(
    factory: GrpcSandboxFactory,
) -> None:
    guarded = await factory.create_sandbox("guarded")
    await guarded.exec("echo old > f.txt")
    refused = await guarded.write("f.txt", "new")
    assert refused.is_error and refused.text.startswith("Error: ")
    assert (await guarded.read_file("f.txt")).data == b"old\n"

    await factory.transport.create_sandbox("free", SandboxOptions(disable_read_guard=True))
    free = await factory.create_sandbox("free")
    await free.exec("echo old > f.txt")
    written = await free.write("f.txt", "new")
    assert not written.is_error, written.text
    assert (await free.read_file("f.txt")).data == b"new"
    # Unset flags match anything; an explicit, different value does not.
    await factory.transport.create_sandbox("free")
    with pytest.raises(AlreadyExists, match="different disable_read_guard"):
        await factory.transport.create_sandbox("free", SandboxOptions(disable_read_guard=False))


async def test_model_mistakes_are_results_not_statuses(server: assembly.Daemon) -> None:
    """Bad tool arguments are the model's to fix: is_error results, never a status."""
    async with grpc.aio.insecure_channel(f"unix://{server.settings.socket}") as channel:
        stub = pb_grpc.SandboxServiceStub(channel)
        await stub.CreateSandbox(pb.CreateSandboxRequest(instance_id="m"))
        short = await stub.Bash(pb.BashRequest(instance_id="m", command="true", timeout=500))
        assert short.is_error and "milliseconds" in short.text
        unknown = await stub.CallTool(
            pb.CallToolRequest(instance_id="m", name="read", arguments_json='{"file": "x"}')
        )
        assert unknown.is_error and "Valid parameters: file_path, offset, limit" in unknown.text
        wrong_type = await stub.CallTool(
            pb.CallToolRequest(instance_id="m", name="read", arguments_json='{"file_path": 5}')
        )
        assert wrong_type.is_error and wrong_type.text.startswith("Error: ")
        negative = await stub.Read(pb.ReadRequest(instance_id="m", file_path="f", limit=-1))
        assert negative.is_error
        regex = await stub.Grep(pb.GrepRequest(instance_id="m", pattern="a(b"))
        assert regex.is_error and "literal=true" in regex.text
        braces = await stub.Glob(pb.GlobRequest(instance_id="m", pattern="{a,b"))
        assert braces.is_error and braces.text.startswith("Error: ")
        typed = await stub.Write(pb.WriteRequest(instance_id="m", file_path="d/n.txt", content=""))
        assert not typed.is_error and typed.created and typed.bytes == 0
        fields = json.loads(
            (
                await stub.CallTool(
                    pb.CallToolRequest(
                        instance_id="m", name="read", arguments_json='{"path": "d/n.txt"}'
                    )
                )
            ).fields_json
        )
        assert fields["path"] == "d/n.txt"


async def test_typed_tool_rpcs_carry_the_structured_fields(server: assembly.Daemon) -> None:
    async with grpc.aio.insecure_channel(f"unix://{server.settings.socket}") as channel:
        stub = pb_grpc.SandboxServiceStub(channel)
        await stub.CreateSandbox(pb.CreateSandboxRequest(instance_id="typed"))
        written = await stub.Write(
            pb.WriteRequest(instance_id="typed", file_path="src/a.py", content="x = 1\ny = 2\n")
        )
        assert (written.created, written.lines, written.bytes) == (True, 2, 12)
        read = await stub.Read(pb.ReadRequest(instance_id="typed", file_path="src/a.py", limit=1))
        assert read.text == "     1\tx = 1\n\n[Showing lines 1-1 of 2. Use offset=2 to read more.]"
        assert (read.start_line, read.end_line, read.total_lines, read.next_offset) == (1, 1, 2, 2)
        assert read.HasField("next_offset") and read.truncated
        edited = await stub.Edit(
            pb.EditRequest(
                instance_id="typed", file_path="src/a.py", old_string="y = 2", new_string="y = 3"
            )
        )
        assert (edited.replacements, list(edited.lines), edited.match_level) == (1, [2], "exact")
        ran = await stub.Bash(pb.BashRequest(instance_id="typed", command="exit 3"))
        assert ran.is_error and ran.exit_code == 3 and ran.text.endswith("Exit code: 3")
        grep = await stub.Grep(
            pb.GrepRequest(instance_id="typed", pattern="y = 3", output_mode="content")
        )
        assert grep.text == "src/a.py:2:y = 3" and grep.matches == 1 and grep.mode == "content"
        found = await stub.Glob(pb.GlobRequest(instance_id="typed", pattern="*.py"))
        assert list(found.files) == ["src/a.py"] and found.total == 1
        nothing = await stub.Grep(pb.GrepRequest(instance_id="typed", pattern="zzz"))
        assert not nothing.is_error and nothing.text.startswith("No matches found")


async def test_restart_keeps_files_and_ends_every_process(factory: GrpcSandboxFactory) -> None:
    box = await factory.create_sandbox("restart")
    await box.write_file("kept.txt", "stays")
    job = await box.bash("sleep 300", run_in_background=True)
    pid = job.fields["pid"]
    await box.bash("cd /tmp && export SAVED=1")
    info = await box.restart()
    assert info.instance_id == "restart"
    assert (await box.read_file("kept.txt")).data == b"stays"
    gone = await box.exec(f"kill -0 {pid} 2>/dev/null && echo alive || echo gone")
    assert gone.stdout == b"gone\n"
    fresh = await box.bash("echo ${SAVED:-unset}")
    assert fresh.text.startswith("unset")
    with pytest.raises(NotFound):
        await factory.transport.restart_sandbox("never-made")

"""Access control: bearer tokens on TCP, id scopes and tenants, the 0600 socket."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from runtime_client import (
    GrpcSandboxFactory,
    InvalidArgument,
    PermissionDenied,
    Unauthenticated,
)
from runtime_client.grpc_transport import GrpcPortConnection, GrpcProcessConnection
from sandboxd.contract.models import SandboxOptions
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.contract.v1 import sandbox_pb2_grpc as pb_grpc
from sandboxd.daemon.assembly import Daemon
from sandboxd.daemon.auth import load_tokens
from sandboxd.daemon.settings import Settings
from sandboxd.service.scope import TENANT_LABEL, IdRule, Scope
from sandboxd.transports.auth import Authenticator
from tests.grpc.conftest import Refusal

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

ADMIN = "admin-token-0123456789abcdef"
TEAM_A = "team-a-token-0123456789abcdef"
TEAM_B = "team-b-token-0123456789abcdef"
ACME = "acme-token-0123456789abcdef"
BETA = "beta-token-0123456789abcdef"


@pytest.fixture
async def tcp_server(tmp_path: Path) -> AsyncIterator[Daemon]:
    tokens = tmp_path / "tokens"
    tokens.write_text(
        f"# who may call\n{ADMIN}\n{TEAM_A}   team-a-   # scoped\n"
        f"{TEAM_B} team-b-*,team-b\n{ACME} tenant=acme\n{BETA} scope=box-* tenant=beta\n"
    )
    settings = Settings(
        backend="local",
        local_root=tmp_path / "root",
        socket=tmp_path / "s.sock",
        tcp="127.0.0.1:0",
        tokens_file=tokens,
    )
    server = Daemon(settings)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _tcp(server: Daemon) -> str:
    return f"127.0.0.1:{server.tcp_port}"


async def test_tcp_without_or_with_a_wrong_token_is_unauthenticated(tcp_server: Daemon) -> None:
    async with GrpcSandboxFactory(_tcp(tcp_server)) as anonymous:
        with pytest.raises(Unauthenticated, match="needs an `authorization: Bearer"):
            await anonymous.create_sandbox("x1")
    async with GrpcSandboxFactory(_tcp(tcp_server), token="wrong-token-0123456789") as wrong:
        with pytest.raises(Unauthenticated, match="not valid"):
            await wrong.transport.list_sandboxes()
    async with GrpcSandboxFactory(_tcp(tcp_server), token=ADMIN) as admin:
        assert await admin.transport.list_sandboxes() == []  # nothing was created


class _WithToken:
    """A stub whose streaming calls carry the token themselves (no interceptor):
    the client's own write meets the refusal, not grpc's request task."""

    def __init__(self, stub: Any, token: str) -> None:
        self._stub, self._token = stub, (("authorization", f"Bearer {token}"),)

    def ConnectProcess(self) -> Any:
        return self._stub.ConnectProcess(metadata=self._token)

    def OpenPort(self) -> Any:
        return self._stub.OpenPort(metadata=self._token)


@pytest.mark.parametrize("method", ["ConnectProcess", "OpenPort", "BuildTemplate"])
async def test_a_refused_stream_is_unauthenticated_when_a_write_races_the_refusal(
    tcp_server: Daemon, refusal: Refusal, method: str
) -> None:
    # The first write leaves just as the refusal arrives: grpc overwrote the
    # daemon's status with INTERNAL "Internal error from Core" (test_tool_stream
    # has the same race on ToolCalls).
    async with grpc.aio.insecure_channel(_tcp(tcp_server)) as channel:
        wrong = "wrong-token-0123456789"
        if method == "ConnectProcess":
            stub = _WithToken(pb_grpc.SandboxServiceStub(channel), wrong)  # type: ignore[no-untyped-call]
            process = GrpcProcessConnection(stub, "box", "proc_1", None)  # type: ignore[arg-type]
            await refusal.passed()
            with pytest.raises(Unauthenticated, match=r"^the bearer token is not valid$"):
                await process.send(b"stdin")
            await process.aclose()
        elif method == "OpenPort":
            ports = _WithToken(pb_grpc.SandboxPortsStub(channel), wrong)  # type: ignore[no-untyped-call]
            port = GrpcPortConnection(ports.OpenPort())
            await refusal.passed()
            with pytest.raises(Unauthenticated, match=r"^the bearer token is not valid$"):
                await port.open(pb.PortInput(instance_id="box", port=80), wait=True)
            await port.close()
        else:  # through the client's token interceptor and grpc's request task

            async def context() -> AsyncIterator[bytes]:
                await refusal.passed()
                yield b"late"

            async with GrpcSandboxFactory(_tcp(tcp_server), token=wrong) as factory:
                with pytest.raises(Unauthenticated, match=r"^the bearer token is not valid$"):
                    async for _ in factory.transport.build_template("FROM scratch", context()):
                        pass


async def test_scoped_token_reaches_only_its_prefix(tcp_server: Daemon) -> None:
    async with (
        GrpcSandboxFactory(_tcp(tcp_server), token=ADMIN) as admin,
        GrpcSandboxFactory(_tcp(tcp_server), token=TEAM_A) as team,
    ):
        await admin.create_sandbox("team-b-1")
        mine = await team.create_sandbox("team-a-1")
        await mine.write_file("f", "ok")
        with pytest.raises(PermissionDenied, match="starting with 'team-a-'"):
            await team.create_sandbox("team-b-2")
        with pytest.raises(PermissionDenied):
            await team.transport.read_file("team-b-1", "f")
        with pytest.raises(PermissionDenied):
            await team.transport.delete_sandbox("team-b-1")
        assert [i.instance_id for i in await team.transport.list_sandboxes()] == ["team-a-1"]
        listed = await admin.transport.list_sandboxes()
        assert [i.instance_id for i in listed] == ["team-a-1", "team-b-1"]


async def test_a_prefix_scope_stops_at_its_separator(tcp_server: Daemon) -> None:
    """#23 item 14: a token for `team-b` used to reach `team-bzz-1`."""
    async with (
        GrpcSandboxFactory(_tcp(tcp_server), token=ADMIN) as admin,
        GrpcSandboxFactory(_tcp(tcp_server), token=TEAM_B) as team,
    ):
        await admin.create_sandbox("team-bzz-1")
        with pytest.raises(PermissionDenied, match="starting with 'team-b-' or 'team-b'"):
            await team.create_sandbox("team-bzz-2")
        with pytest.raises(PermissionDenied):
            await team.transport.read_file("team-bzz-1", "f")
        await team.create_sandbox("team-b")  # the exact id
        await team.create_sandbox("team-b-1")
        listed = [i.instance_id for i in await team.transport.list_sandboxes()]
        assert sorted(listed) == ["team-b", "team-b-1"]


def _requests(instance_id: str) -> dict[str, Any]:
    """A request for every RPC that names a sandbox, naming ``instance_id``."""
    exec_request = pb.ExecRequest(instance_id=instance_id, shell="true")
    upload_header = pb.UploadHeader(instance_id=instance_id, path="f")
    tree_header = pb.UploadTreeHeader(instance_id=instance_id, path="d")
    call = pb.CallToolRequest(
        instance_id=instance_id, name="read", arguments_json='{"file_path": "f"}'
    )
    return {
        "CreateSandbox": pb.CreateSandboxRequest(instance_id=instance_id),
        "GetSandbox": pb.GetSandboxRequest(instance_id=instance_id),
        "DeleteSandbox": pb.DeleteSandboxRequest(instance_id=instance_id),
        "RestartSandbox": pb.RestartSandboxRequest(instance_id=instance_id),
        "ReadFile": pb.ReadFileRequest(instance_id=instance_id, path="f"),
        "WriteFile": pb.WriteFileRequest(instance_id=instance_id, path="g", data=b"x"),
        "Stat": pb.StatRequest(instance_id=instance_id, path="f"),
        "ListDir": pb.ListDirRequest(instance_id=instance_id, path="."),
        "Exists": pb.ExistsRequest(instance_id=instance_id, path="f"),
        "MakeDir": pb.MakeDirRequest(instance_id=instance_id, path="d"),
        "Remove": pb.RemoveRequest(instance_id=instance_id, path="f"),
        "Exec": exec_request,
        "ExecStream": pb.ExecStreamRequest(exec=exec_request),
        "CallTool": call,
        "Read": pb.ReadRequest(instance_id=instance_id, file_path="f"),
        "Write": pb.WriteRequest(instance_id=instance_id, file_path="g", content="x"),
        "Edit": pb.EditRequest(instance_id=instance_id, file_path="f", old_string="o",
                               new_string="n"),
        "Bash": pb.BashRequest(instance_id=instance_id, command="true"),
        "Grep": pb.GrepRequest(instance_id=instance_id, pattern="o"),
        "Glob": pb.GlobRequest(instance_id=instance_id, pattern="*"),
        "ToolCalls": [pb.ToolCallsRequest(call_id=1, call=call)],
        "Upload": [pb.UploadRequest(header=upload_header), pb.UploadRequest(data=b"x")],
        "Download": pb.DownloadRequest(instance_id=instance_id, path="f"),
        "UploadTree": [pb.UploadTreeRequest(header=tree_header)],
        "DownloadTree": pb.DownloadTreeRequest(instance_id=instance_id, path="."),
        "ForkSandbox": pb.ForkSandboxRequest(source_id=instance_id, new_id="box-fork"),
        "StartProcess": pb.StartProcessRequest(instance_id=instance_id, shell="true"),
        "ConnectProcess": [pb.ProcessInput(instance_id=instance_id, handle="p1")],
        "ResizeProcess": pb.ResizeProcessRequest(
            instance_id=instance_id, handle="p1", size=pb.TerminalSize(rows=1, cols=1)
        ),
        "SignalProcess": pb.SignalProcessRequest(instance_id=instance_id, handle="p1", signal=15),
        "ListProcesses": pb.ListProcessesRequest(instance_id=instance_id),
        "ExtendSandbox": pb.ExtendSandboxRequest(instance_id=instance_id, seconds=60),
        "SetNetworkPolicy": pb.SetNetworkPolicyRequest(instance_id=instance_id),
        "GetNetworkLog": pb.GetNetworkLogRequest(instance_id=instance_id),
        "OpenPort": [pb.PortInput(instance_id=instance_id, port=8000, host="127.0.0.1")],
        "OpenPorts": [pb.PortsInput(conn_id=1, open=pb.PortInput(
            instance_id=instance_id, port=8000, host="127.0.0.1"))],
        "ListPorts": pb.ListPortsRequest(instance_id=instance_id),
        "CreatePreview": pb.CreatePreviewRequest(instance_id=instance_id, port=8000, ttl_s=60),
        "CreateSnapshot": pb.CreateSnapshotRequest(instance_id=instance_id, name="theirs"),
        "RestoreSnapshot": pb.RestoreSnapshotRequest(instance_id=instance_id, name="theirs"),
        # A snapshot is found by name in the caller's tenant: another's is not there.
        "DeleteSnapshot": pb.DeleteSnapshotRequest(name="theirs"),
        "CreateFromSnapshot": pb.CreateFromSnapshotRequest(name="theirs", new_id="box-from"),
        "TemplateFromSnapshot": pb.TemplateFromSnapshotRequest(name="theirs"),
    }  # fmt: skip


#: The RPCs that name no sandbox (and what they show a tenant is tested apart).
_NO_SANDBOX = {"ListSandboxes", "GetStatus", "ListTools", "ListSnapshots", "BuildTemplate"}


def _methods(channel: grpc.aio.Channel) -> dict[str, Any]:
    """Every RPC of every service of the contract, by method name."""
    found = {}
    for service in pb.DESCRIPTOR.services_by_name.values():
        stub = getattr(pb_grpc, f"{service.name}Stub")(channel)
        found.update({method.name: getattr(stub, method.name) for method in service.methods})
    return found


async def _outcome(call: Any, method: str, request: Any, token: str) -> grpc.StatusCode:
    """The status one RPC ends with (a ToolCalls call's in-band error counts)."""
    metadata = (("authorization", f"Bearer {token}"),)
    try:
        if isinstance(request, list):

            async def messages() -> AsyncIterator[Any]:
                for message in request:
                    yield message

            result = call(messages(), metadata=metadata)
        else:
            result = call(request, metadata=metadata)
        if hasattr(result, "__aiter__"):
            async for response in result:
                if method in ("ToolCalls", "OpenPorts") and response.HasField("error"):
                    return grpc.StatusCode[response.error.code]
        else:
            await result
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def test_a_tenant_sees_and_touches_only_its_own_sandboxes(tcp_server: Daemon) -> None:
    """Every RPC that names a sandbox, for a sandbox of another tenant: NOT_FOUND,
    as for one that does not exist, and the sandbox is untouched."""
    async with (
        GrpcSandboxFactory(_tcp(tcp_server), token=ADMIN) as admin,
        GrpcSandboxFactory(_tcp(tcp_server), token=ACME) as acme,
        GrpcSandboxFactory(_tcp(tcp_server), token=BETA) as beta,
        grpc.aio.insecure_channel(_tcp(tcp_server)) as channel,
    ):
        theirs = await acme.create_sandbox("box-1")
        await theirs.write_file("f", "acme's\n")
        await theirs.snapshot("theirs")
        info = await admin.transport.get_sandbox("box-1")
        assert info.options.labels[TENANT_LABEL] == "acme"
        methods = _methods(channel)
        requests = _requests("box-1")
        assert set(methods) == set(requests) | _NO_SANDBOX  # a new RPC is added to this table
        for method, request in requests.items():
            if method == "CreateSandbox":
                expected = grpc.StatusCode.ALREADY_EXISTS  # the id is taken: all it learns
            else:
                expected = grpc.StatusCode.NOT_FOUND
            assert await _outcome(methods[method], method, request, BETA) == expected, method
        assert (await theirs.read_file("f")).data == b"acme's\n"
        assert {f.name for f in await theirs.list_dir(".")} == {"f"}
        assert [i.instance_id for i in await beta.transport.list_sandboxes()] == []
        assert await beta.transport.list_sandboxes({TENANT_LABEL: "acme"}) == []
        assert [s.name for s in await acme.transport.list_snapshots()] == ["theirs"]
        assert await beta.transport.list_snapshots() == []
        mine = await beta.create_sandbox("box-2")
        assert (await mine.exec("echo ok")).stdout == b"ok\n"
        assert [i.instance_id for i in await beta.transport.list_sandboxes()] == ["box-2"]
        assert [i.instance_id for i in await acme.transport.list_sandboxes()] == ["box-1"]
        listed = [i.instance_id for i in await admin.transport.list_sandboxes()]
        assert listed == ["box-1", "box-2"]
        with pytest.raises(InvalidArgument, match="reserved"):
            await beta.transport.create_sandbox(
                "box-3", SandboxOptions(labels={TENANT_LABEL: "acme"})
            )
        # Created again with the labels it set: the tenant's label is not its to repeat.
        await beta.transport.create_sandbox("box-4", SandboxOptions(labels={"k": "v"}))
        again, created = await beta.transport.create_sandbox(
            "box-4", SandboxOptions(labels={"k": "v"})
        )
        assert not created and again.options.labels == {"k": "v", TENANT_LABEL: "beta"}


async def test_unix_socket_needs_no_token(tcp_server: Daemon) -> None:
    async with GrpcSandboxFactory(f"unix://{tcp_server.settings.socket}") as local:
        box = await local.create_sandbox("anything")
        assert (await box.exec("echo ok")).stdout == b"ok\n"


async def test_tokens_are_never_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    settings = Settings(
        backend="local",
        local_root=tmp_path / "root",
        socket=tmp_path / "s.sock",
        tcp="127.0.0.1:0",
        token=ADMIN,
    )
    server = Daemon(settings)
    await server.start()
    async with GrpcSandboxFactory(
        f"127.0.0.1:{server.tcp_port}", token="bad-token-0123456789"
    ) as f:
        with pytest.raises(Unauthenticated):
            await f.transport.list_sandboxes()
    await server.stop()
    assert ADMIN not in caplog.text and "bad-token" not in caplog.text
    assert ADMIN not in repr(settings)


async def test_tcp_without_tokens_refuses_to_start(tmp_path: Path) -> None:
    settings = Settings(
        backend="local", local_root=tmp_path, socket=tmp_path / "s", tcp="127.0.0.1:0"
    )
    with pytest.raises(InvalidArgument, match="TCP listener needs bearer tokens"):
        Daemon(settings)


def test_token_file_rules(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_text("abc\n")
    with pytest.raises(InvalidArgument, match="at least 16 characters"):
        load_tokens(short, None)
    bad = tmp_path / "bad"
    bad.write_text(f"{ADMIN} a b*\n")
    with pytest.raises(InvalidArgument, match="bad:1: scope 'b\\*' is a bare prefix"):
        load_tokens(bad, None)
    with pytest.raises(InvalidArgument, match="cannot read tokens file"):
        load_tokens(tmp_path / "missing", None)


def test_token_scope_rules(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{ADMIN}\n{TEAM_A} team-a-\n{TEAM_B} scope=team-b-*,team-b tenant=acme\n")
    assert load_tokens(tokens, None) == [
        (ADMIN, Scope()),
        # A fenced token sets network modes up to allow unless its line says network=.
        (TEAM_A, Scope((IdRule("team-a-", prefix=True),), network="allow")),
        (TEAM_B, Scope((IdRule("team-b-", prefix=True), IdRule("team-b")), "acme", "allow")),
    ]
    for line, error in (
        (f"{TEAM_B} team-b*", "bare prefix"),
        (f"{TEAM_B} scope=-x", "write an instance id"),
        (f"{TEAM_B} tenant=Acme", "1-63 characters"),
        (f"{TEAM_B} tenant=a tenant=b", "one tenant a token"),
        (f"{TEAM_B} owner=a", "unknown field 'owner'"),
        (f"{TEAM_B} network=open", "network='open': use one of none, allow, full"),
    ):
        tokens.write_text(line + "\n")
        with pytest.raises(InvalidArgument, match=error):
            load_tokens(tokens, None)


def test_scope_matching() -> None:
    team_a = Scope((IdRule("team-a-", prefix=True),))
    auth = Authenticator([(ADMIN, Scope()), (TEAM_A, team_a)])
    assert auth.scope_for("unix:/x", []) == Scope()
    assert auth.scope_for("ipv4:127.0.0.1:5", [("authorization", f"Bearer {TEAM_A}")]) == team_a
    assert auth.scope_for("ipv4:127.0.0.1:5", [("authorization", f"bearer {ADMIN}")]) == Scope()
    with pytest.raises(Unauthenticated):
        auth.scope_for("ipv4:127.0.0.1:5", [("authorization", f"Basic {ADMIN}")])

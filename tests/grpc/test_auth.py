"""Access control: bearer tokens on TCP, instance-prefix scopes, the 0600 socket."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_client import (
    GrpcSandboxFactory,
    InvalidArgument,
    PermissionDenied,
    Unauthenticated,
)
from sandboxd.auth import Authenticator, Scope, load_tokens
from sandboxd.config import Settings
from sandboxd.grpc.server import Server

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

ADMIN = "admin-token-0123456789abcdef"
TEAM_A = "team-a-token-0123456789abcdef"


@pytest.fixture
async def tcp_server(tmp_path: Path) -> AsyncIterator[Server]:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# who may call\n{ADMIN}\n{TEAM_A}   team-a-   # scoped\n")
    settings = Settings(
        backend="local",
        local_root=tmp_path / "root",
        socket=tmp_path / "s.sock",
        tcp="127.0.0.1:0",
        tokens_file=tokens,
    )
    server = Server(settings)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _tcp(server: Server) -> str:
    return f"127.0.0.1:{server.tcp_port}"


async def test_tcp_without_or_with_a_wrong_token_is_unauthenticated(tcp_server: Server) -> None:
    async with GrpcSandboxFactory(_tcp(tcp_server)) as anonymous:
        with pytest.raises(Unauthenticated, match="needs an `authorization: Bearer"):
            await anonymous.create_sandbox("x1")
    async with GrpcSandboxFactory(_tcp(tcp_server), token="wrong-token-0123456789") as wrong:
        with pytest.raises(Unauthenticated, match="not valid"):
            await wrong.transport.list_sandboxes()
    async with GrpcSandboxFactory(_tcp(tcp_server), token=ADMIN) as admin:
        assert await admin.transport.list_sandboxes() == []  # nothing was created


async def test_scoped_token_reaches_only_its_prefix(tcp_server: Server) -> None:
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


async def test_unix_socket_needs_no_token(tcp_server: Server) -> None:
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
    server = Server(settings)
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
        Server(settings)


def test_token_file_rules(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_text("abc\n")
    with pytest.raises(InvalidArgument, match="at least 16 characters"):
        load_tokens(short, None)
    bad = tmp_path / "bad"
    bad.write_text(f"{ADMIN} a b\n")
    with pytest.raises(InvalidArgument, match="bad:1: expected"):
        load_tokens(bad, None)
    with pytest.raises(InvalidArgument, match="cannot read tokens file"):
        load_tokens(tmp_path / "missing", None)


def test_scope_matching() -> None:
    auth = Authenticator([(ADMIN, ""), (TEAM_A, "team-a-")])
    assert auth.scope_for("unix:/x", []) == Scope("")
    assert auth.scope_for("ipv4:127.0.0.1:5", [("authorization", f"Bearer {TEAM_A}")]) == Scope(
        "team-a-"
    )
    assert auth.scope_for("ipv4:127.0.0.1:5", [("authorization", f"bearer {ADMIN}")]) == Scope("")
    with pytest.raises(Unauthenticated):
        auth.scope_for("ipv4:127.0.0.1:5", [("authorization", f"Basic {ADMIN}")])

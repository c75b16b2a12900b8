"""A provider suite for openai-agents sandbox clients, run against sandboxd.

openai-agents ships no provider suite. This one is modelled on what its
repository tests its own Docker client for (tests/sandbox/test_docker.py,
test_session_state_roundtrip.py, test_exposed_ports.py, test_client_options.py;
the upstream test each case follows is named in its docstring), against a real
daemon on the Docker backend instead of the fakes upstream uses: files and paths,
the workspace tar both ways, exec, the terminal processes, session state, resume.
"""

from __future__ import annotations

import asyncio
import io
import json
import secrets
import tarfile
from pathlib import Path

import anyio
import pytest
from agents.sandbox import LocalSnapshotSpec, Manifest, SandboxPathGrant, User
from agents.sandbox.entries import Dir, File, LocalFile
from agents.sandbox.errors import (
    ExecTimeoutError,
    ExposedPortUnavailableError,
    InvalidManifestPathError,
    PtySessionNotFoundError,
    WorkspaceArchiveReadError,
    WorkspaceArchiveWriteError,
    WorkspaceReadNotFoundError,
)
from agents.sandbox.manifest import Environment
from agents.sandbox.session.sandbox_client import BaseSandboxClientOptions
from agents.sandbox.session.sandbox_session import SandboxSession
from agents.sandbox.session.sandbox_session_state import SandboxSessionState
from agents.sandbox.types import ExposedPortEndpoint
from pydantic import ValidationError

from runtime_client.contrib._common import transport_for
from runtime_client.contrib.openai_agents import (
    SandboxdSandboxClient,
    SandboxdSandboxClientOptions,
    SandboxdSandboxSessionState,
    SandboxdUnsupportedError,
)
from runtime_client.errors import NotFound
from sandboxd.daemon.settings import Settings
from tests.docker_fixtures import IMAGE, RUN_PREFIX
from tests.frameworks.openai_agents.conftest import OpenSession
from tests.helpers import Daemon

pytestmark = pytest.mark.anyio


def _tar(*members: tuple[str, bytes | None, str | None]) -> bytes:
    """A tar of (name, file bytes, symlink target) members."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            elif data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _members(archive: io.IOBase) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=archive, mode="r:*") as tar:
        return {member.name: member for member in tar.getmembers()}


# ------------------------------------------------------------ files and paths


async def test_read_and_write_reject_paths_outside_the_workspace_root(
    open_session: OpenSession,
) -> None:
    """test_docker_read_and_write_reject_paths_outside_workspace_root"""
    session = await open_session()
    with pytest.raises(InvalidManifestPathError, match="must not escape root"):
        await session.read(Path("../secret.txt"))
    with pytest.raises(InvalidManifestPathError, match="must not escape root"):
        await session.write(Path("../secret.txt"), io.BytesIO(b"nope"))
    with pytest.raises(InvalidManifestPathError):
        await session.read(Path("/etc/passwd"))


async def test_write_then_read_keeps_every_byte_past_the_payload_limit(
    open_session: OpenSession,
) -> None:
    """test_docker_read_returns_file_bytes_without_archive_api; past the daemon's unary
    payload limit, so both ways stream."""
    session = await open_session()
    payload = bytes(range(256)) * (Settings().max_payload_bytes // 256 + 1) + b"hello\x00world"
    await session.write(Path("deep/er/blob.bin"), io.BytesIO(payload))  # parents made
    assert (await session.read(Path("deep/er/blob.bin"))).read() == payload
    assert await session.read_bounded(Path("deep/er/blob.bin"), max_bytes=5) == payload[:5]
    await session.write(Path("empty.txt"), io.BytesIO(b""))
    assert (await session.read(Path("empty.txt"))).read() == b""


async def test_read_missing_path_raises_not_found(open_session: OpenSession) -> None:
    """test_docker_read_missing_path_raises_not_found_error"""
    session = await open_session()
    with pytest.raises(WorkspaceReadNotFoundError):
        await session.read(Path("missing.txt"))
    with pytest.raises(WorkspaceReadNotFoundError):
        await session.read_bounded(Path("missing.txt"), max_bytes=10)


async def test_read_of_a_folder_is_an_archive_read_error(open_session: OpenSession) -> None:
    """test_docker_read_existing_unreadable_path_raises_archive_error"""
    session = await open_session()
    await session.mkdir(Path("directory"))
    with pytest.raises(WorkspaceArchiveReadError):
        await session.read(Path("directory"))


async def test_rm_unlinks_a_safe_leaf_symlink_not_its_target(open_session: OpenSession) -> None:
    """test_docker_rm_unlinks_safe_internal_leaf_symlink"""
    session = await open_session()
    await session.write(Path("target.txt"), io.BytesIO(b"hello"))
    await session.exec("ln -s target.txt link.txt")
    await session.rm(Path("link.txt"))
    assert (await session.read(Path("target.txt"))).read() == b"hello"
    assert [entry.path for entry in await session.ls(Path("."))] == ["/workspace/target.txt"]


async def test_file_operations_refuse_a_symlink_out_of_the_workspace(
    open_session: OpenSession,
) -> None:
    """test_docker_workspace_file_ops_reject_symlink_escape: resolved in the workspace."""
    session = await open_session()
    await session.exec("mkdir -p /tmp/outside && echo secret > /tmp/outside/secret.txt")
    await session.exec("ln -s /tmp/outside link")
    with pytest.raises(InvalidManifestPathError, match="must not escape root"):
        await session.read(Path("link/secret.txt"))
    with pytest.raises(InvalidManifestPathError, match="must not escape root"):
        await session.write(Path("link/secret.txt"), io.BytesIO(b"overwrite"))
    with pytest.raises(InvalidManifestPathError, match="must not escape root"):
        await session.ls(Path("link"))
    with pytest.raises(InvalidManifestPathError, match="must not escape root"):
        await session.mkdir(Path("link/newdir"), parents=True)
    with pytest.raises(InvalidManifestPathError, match="must not escape root"):
        await session.rm(Path("link/secret.txt"))
    assert (await session.exec("cat /tmp/outside/secret.txt")).stdout == b"secret\n"


async def test_a_read_only_path_grant_reads_but_refuses_writes(open_session: OpenSession) -> None:
    """test_docker_write_rejects_read_only_extra_path_grant (a path-only grant)."""
    manifest = Manifest(extra_path_grants=(SandboxPathGrant(path="/etc", read_only=True),))
    session = await open_session(manifest)
    assert b"sandbox" in (await session.read(Path("/etc/passwd"))).read()
    with pytest.raises(WorkspaceArchiveWriteError):
        await session.write(Path("/etc/motd"), io.BytesIO(b"x"))


async def test_manifest_entries_and_environment_reach_the_workspace(
    open_session: OpenSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manifest materialized by the SDK through write/mkdir/exec (test_manifest_application)."""
    (tmp_path / "local.txt").write_text("from the host\n")
    monkeypatch.chdir(tmp_path)  # local sources are read relative to the working directory
    manifest = Manifest(
        entries={
            "notes.txt": File(content=b"inline\n"),
            "pkg": Dir(children={"module.py": File(content=b"VALUE = 1\n")}),
            "copied.txt": LocalFile(src=Path("local.txt")),
        },
        environment=Environment(value={"GREETING": "hello from the manifest"}),
    )
    session = await open_session(manifest)
    assert (await session.read(Path("notes.txt"))).read() == b"inline\n"
    assert (await session.read(Path("pkg/module.py"))).read() == b"VALUE = 1\n"
    assert (await session.read(Path("copied.txt"))).read() == b"from the host\n"
    assert (await session.exec("echo $GREETING")).stdout == b"hello from the manifest\n"


async def test_apply_patch_edits_through_the_session(open_session: OpenSession) -> None:
    session = await open_session(Manifest(entries={"app.py": File(content=b'print("Hi")\n')}))
    await session.apply_patch(
        {"type": "update_file", "path": "app.py", "diff": '@@\n-print("Hi")\n+print("Hello")\n'}
    )
    assert (await session.exec("python3 app.py")).stdout == b"Hello\n"


# ------------------------------------------------------------ the workspace as a tar


@pytest.mark.parametrize(
    ("member_name", "reason"),
    [("/etc/passwd", "absolute path"), ("../escape.txt", "parent traversal")],
)
async def test_hydrate_refuses_unsafe_members_before_extracting_anything(
    open_session: OpenSession, member_name: str, reason: str
) -> None:
    """test_docker_hydrate_workspace_rejects_unsafe_tar_members"""
    session = await open_session()
    archive = _tar(("first.txt", b"would land first", None), (member_name, b"x", None))
    with pytest.raises(WorkspaceArchiveWriteError) as caught:
        await session.hydrate_workspace(io.BytesIO(archive))
    assert str(caught.value) == "failed to write archive for path: /workspace"
    assert caught.value.context == {"path": "/workspace", "reason": reason, "member": member_name}
    assert [entry.path for entry in await session.ls(Path("."))] == []  # nothing landed


async def test_hydrate_refuses_a_workspace_root_symlink(open_session: OpenSession) -> None:
    """test_docker_hydrate_workspace_rejects_workspace_root_symlink"""
    session = await open_session()
    with pytest.raises(WorkspaceArchiveWriteError) as caught:
        await session.hydrate_workspace(io.BytesIO(_tar((".", None, "/tmp/outside"))))
    assert caught.value.context == {
        "path": "/workspace",
        "reason": "archive root symlink",
        "member": ".",
    }


async def test_persist_then_hydrate_moves_the_workspace_portably(
    open_session: OpenSession,
) -> None:
    """test_docker_persist_workspace_* and the tar workspace tests: members relative to the
    root, modes and symlinks kept, absolute links into the root made relative, ephemeral
    entries and runtime skip paths left out; the tar restores into another workspace."""
    manifest = Manifest(
        entries={
            "kept.txt": File(content=b"durable\n"),
            "scratch": Dir(ephemeral=True, children={"tmp.txt": File(content=b"ephemeral\n")}),
        }
    )
    source = await open_session(manifest)
    await source.exec(
        "mkdir -p src/empty && printf '#!/bin/sh\\necho run\\n' > src/run.sh"
        " && chmod 755 src/run.sh && ln -s kept.txt rel-link"
        " && ln -s /workspace/kept.txt abs-link && mkdir cache && echo junk > cache/junk"
    )
    source.register_persist_workspace_skip_path("cache")

    archive = await source.persist_workspace()
    members = _members(archive)
    assert "kept.txt" in members and "src/empty" in members and "src/run.sh" in members
    assert not {"scratch", "scratch/tmp.txt", "cache", "cache/junk"} & set(members)
    assert all(not name.startswith(("/", "workspace/")) for name in members)
    assert members["src/run.sh"].mode & 0o777 == 0o755
    assert members["rel-link"].linkname == "kept.txt"
    assert members["abs-link"].linkname == "kept.txt"  # portable: relative to its folder

    archive.seek(0)
    target = await open_session()
    await target.hydrate_workspace(archive)
    assert (
        await target.exec("src/run.sh; cat rel-link abs-link; ls -A src/empty | wc -l")
    ).stdout == (b"run\ndurable\ndurable\n0\n")


# ------------------------------------------------------------ exec


async def test_sessions_are_named_by_the_clients_prefix_or_their_options(
    frameworks_daemon: Daemon,
) -> None:
    client = SandboxdSandboxClient(frameworks_daemon.target, id_prefix="team-x")
    named = SandboxdSandboxClientOptions(instance_id=f"team-x-given-{secrets.token_hex(2)}")
    sessions = [await client.create(), await client.create(options=named)]
    try:
        ids = [session.state.instance_id for session in sessions]  # type: ignore[attr-defined]
        assert ids[0].startswith("team-x-") and len(ids[0]) == len("team-x-") + 32
        assert ids[1] == named.instance_id
    finally:
        for session in sessions:
            await client.delete(session)


async def test_exec_runs_in_the_manifest_root(open_session: OpenSession) -> None:
    """test_docker_exec_uses_manifest_root_as_workdir_after_workspace_ready"""
    default = await open_session()
    assert (await default.exec("pwd")).stdout == b"/workspace\n"
    nested = await open_session(Manifest(root="/workspace/project"))
    assert (await nested.exec("pwd")).stdout == b"/workspace/project\n"
    await nested.write(Path("file.txt"), io.BytesIO(b"in the project"))
    assert (await nested.exec("cat /workspace/project/file.txt")).stdout == b"in the project"


async def test_exec_results_timeouts_and_signals(open_session: OpenSession) -> None:
    """test_docker_exec_timeout_*: a timeout raises ExecTimeoutError, as upstream."""
    session = await open_session()
    result = await session.exec("echo out; echo err >&2; exit 3")
    assert (result.stdout, result.stderr, result.exit_code) == (b"out\n", b"err\n", 3)
    assert (await session.exec("ls", "-d", "with space", shell=False)).exit_code == 2
    killed = await session.exec("kill -9 $$")
    assert killed.exit_code == 128 + 9  # as a shell reports it
    with pytest.raises(ExecTimeoutError):
        await session.exec("sleep 30", timeout=1)


async def test_exec_as_the_workspace_user_works_and_as_another_is_refused(
    open_session: OpenSession,
) -> None:
    """test_docker_exec_uses_native_docker_user_without_sudo: sandboxd has one user."""
    session = await open_session()
    assert (await session.exec("id -un", user="sandbox")).stdout == b"sandbox\n"
    assert (await session.exec("id -un", user=User(name="sandbox"))).stdout == b"sandbox\n"
    with pytest.raises(SandboxdUnsupportedError, match="as user 'root'") as caught:
        await session.exec("id", user="root")
    assert caught.value.why == "by_design"
    with pytest.raises(SandboxdUnsupportedError):
        await session.read(Path("x"), user="root")
    with pytest.raises(SandboxdUnsupportedError):
        await session.write(Path("x"), io.BytesIO(b"x"), user="root")


# ------------------------------------------------------------ what sandboxd refuses


@pytest.mark.parametrize(
    ("manifest", "feature"),
    [
        (Manifest(users=[User(name="alice")]), "manifest users and groups (alice)"),
        (
            Manifest(extra_path_grants=(SandboxPathGrant(path="/data", host_path="/srv/data"),)),
            "host path grants (/data)",
        ),
    ],
    ids=["users", "host-path"],
)
async def test_what_a_workspace_cannot_be_is_refused_at_create(
    client: SandboxdSandboxClient, manifest: Manifest, feature: str
) -> None:
    with pytest.raises(SandboxdUnsupportedError) as caught:
        await client.create(manifest=manifest)
    assert caught.value.feature == feature
    assert caught.value.why == "by_design"


async def test_a_root_outside_the_workspace_volume_is_refused(
    client: SandboxdSandboxClient,
) -> None:
    with pytest.raises(Exception, match="workdir must be /workspace or a folder inside it"):
        await client.create(manifest=Manifest(root="/app"))


# ------------------------------------------------------------ exposed ports

#: The port the workspace's server listens on (each workspace has its own loopback).
SERVER_PORT = 8000


async def _serve_http(session: SandboxSession, page: bytes) -> None:
    """python3 -m http.server in the workspace, started through the session's exec."""
    await session.write(Path("index.html"), io.BytesIO(page))
    started = await session.exec(
        f"nohup python3 -m http.server {SERVER_PORT} --bind 127.0.0.1 >server.log 2>&1 &"
    )
    assert started.exit_code == 0


async def _http_get(endpoint: ExposedPortEndpoint, path: str = "/index.html") -> bytes:
    """The response to a GET through ``endpoint``, retried while the server comes up."""
    with anyio.fail_after(30):
        while True:
            reader, writer = await asyncio.open_connection(endpoint.host, endpoint.port)
            writer.write(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
            await writer.drain()
            answer = await reader.read()
            writer.close()
            if answer:  # nothing listening yet inside: the forward closes the connection
                return answer
            await asyncio.sleep(0.2)


async def test_an_exposed_port_reaches_a_server_in_the_workspace(
    open_session: OpenSession,
) -> None:
    """test_exposed_ports: resolve_exposed_port gives a host endpoint for a configured port
    (sandboxd: a listener on this host's loopback, the workspace's network still off)."""
    session = await open_session(
        options=SandboxdSandboxClientOptions(exposed_ports=(SERVER_PORT, 9000))
    )
    assert session.state.exposed_ports == (SERVER_PORT, 9000)
    page = b"<h1>served from " + secrets.token_hex(8).encode() + b"</h1>"
    await _serve_http(session, page)

    endpoint = await session.resolve_exposed_port(SERVER_PORT)
    assert endpoint.host == "127.0.0.1" and endpoint.port > 0
    assert endpoint.url_for("http") == f"http://127.0.0.1:{endpoint.port}/"
    answer = await _http_get(endpoint)
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(page)
    assert await session.resolve_exposed_port(SERVER_PORT) == endpoint  # one listener per port
    other = await session.resolve_exposed_port(9000)
    assert other.port != endpoint.port


async def test_a_port_not_exposed_is_not_configured(open_session: OpenSession) -> None:
    """test_exposed_ports: a port never configured is not_configured, as upstream."""
    session = await open_session(options=SandboxdSandboxClientOptions(exposed_ports=(8080,)))
    with pytest.raises(ExposedPortUnavailableError) as unavailable:
        await session.resolve_exposed_port(8081)
    assert unavailable.value.context["reason"] == "not_configured"


async def test_the_forward_ends_when_the_session_is_deleted(
    client: SandboxdSandboxClient, open_session: OpenSession
) -> None:
    session = await open_session(options=SandboxdSandboxClientOptions(exposed_ports=(SERVER_PORT,)))
    await _serve_http(session, b"until deleted")
    endpoint = await session.resolve_exposed_port(SERVER_PORT)
    assert (await _http_get(endpoint)).endswith(b"until deleted")
    # A connection left open across the delete (its request never sent) ends with it
    # too; a GET after it is served only once the forward has taken it up.
    reader, writer = await asyncio.open_connection(endpoint.host, endpoint.port)
    assert (await _http_get(endpoint)).endswith(b"until deleted")

    await client.delete(session)
    with anyio.fail_after(10):
        assert await reader.read() == b""
    writer.close()
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection(endpoint.host, endpoint.port)


@pytest.mark.parametrize("port", [0, 65536])
async def test_an_exposed_port_out_of_range_is_refused_before_a_workspace_is_made(
    frameworks_daemon: Daemon, client: SandboxdSandboxClient, port: int
) -> None:
    instance_id = f"oa-port-{secrets.token_hex(4)}"
    options = SandboxdSandboxClientOptions(instance_id=instance_id, exposed_ports=(port,))
    with pytest.raises(ValidationError, match="between 1 and 65535"):
        await client.create(options=options)
    with pytest.raises(NotFound):
        await transport_for(frameworks_daemon.target, None).get_sandbox(instance_id)


# ------------------------------------------------------------ interactive processes


async def test_pty_exec_write_and_poll(open_session: OpenSession) -> None:
    """test_docker_pty_exec_write_and_poll: a REPL on a terminal, fed and read."""
    session = await open_session()
    started = await session.pty_exec_start("python3 -q -i", tty=True, yield_time_s=1)
    assert started.process_id is not None and started.exit_code is None
    answered = await session.pty_write_stdin(
        session_id=started.process_id, chars="print(6 * 7)\n", yield_time_s=1
    )
    assert b"42" in answered.output
    ended = await session.pty_write_stdin(
        session_id=started.process_id, chars="exit()\n", yield_time_s=5
    )
    assert (ended.process_id, ended.exit_code) == (None, 0)
    with pytest.raises(PtySessionNotFoundError):
        await session.pty_write_stdin(session_id=started.process_id, chars="")


async def test_pty_fast_exit_returns_its_exit_code(open_session: OpenSession) -> None:
    """test_docker_pty_exec_returns_exit_code_for_fast_exit"""
    session = await open_session()
    update = await session.pty_exec_start("echo done; exit 7", yield_time_s=5)
    assert (update.process_id, update.exit_code, update.output) == (None, 7, b"done\n")


async def test_pty_without_a_terminal_takes_no_input_and_stop_kills_it(
    open_session: OpenSession,
) -> None:
    """test_docker_pty_non_tty_rejects_stdin_and_stop_cleans_up"""
    session = await open_session()
    started = await session.pty_exec_start("sleep 300", yield_time_s=0.3)
    assert started.process_id is not None
    with pytest.raises(RuntimeError, match="stdin is not available for this process"):
        await session.pty_write_stdin(session_id=started.process_id, chars="x")
    await session.pty_terminate_all()
    assert (await session.exec("pgrep -x sleep")).exit_code == 1  # gone


async def test_fast_exits_report_their_exit_code_every_time(open_session: OpenSession) -> None:
    """A process without a terminal gets its stdin closed at once; when it has already
    exited, that ends its output stream with Conflict before the exit arrives, and
    the exit code was lost now and then (3-4 times in 40 under load before the
    pump attached again)."""
    session = await open_session()
    missed = []
    for attempt in range(40):
        update = await session.pty_exec_start("exit 7", yield_time_s=5)
        if (update.process_id, update.exit_code) != (None, 7):
            missed.append((attempt, update))
    assert missed == []


# ------------------------------------------------------------ state, options, resume


def test_options_and_state_round_trip_by_their_type_field() -> None:
    """test_client_options and test_session_state_roundtrip: registered by ``type``."""
    options = SandboxdSandboxClientOptions(instance_id="agent-1", memory_bytes=1 << 30)
    parsed = BaseSandboxClientOptions.parse(options.model_dump(mode="json"))
    assert parsed == options and isinstance(parsed, SandboxdSandboxClientOptions)
    state = SandboxdSandboxSessionState(
        manifest=Manifest(), snapshot={"type": "noop", "id": "x"}, instance_id="agent-1",
        options=options,
    )  # fmt: skip
    again = SandboxSessionState.parse(state.model_dump(mode="json"))
    assert isinstance(again, SandboxdSandboxSessionState)
    assert (again.instance_id, again.options, again.session_id) == (
        "agent-1",
        options,
        state.session_id,
    )


async def test_resume_reattaches_to_the_live_workspace(
    client: SandboxdSandboxClient, open_session: OpenSession, tmp_path: Path
) -> None:
    """test_docker_resume_preserves_workspace_readiness_from_state"""
    first = await open_session(snapshot=LocalSnapshotSpec(base_path=tmp_path))
    await first.write(Path("progress.txt"), io.BytesIO(b"step 1"))
    payload = client.serialize_session_state(first.state)

    resumed = await client.resume(client.deserialize_session_state(payload))
    await resumed.start()
    assert resumed.state.instance_id == first.state.instance_id  # type: ignore[attr-defined]
    assert resumed._inner._workspace_state_preserved_on_start() is True
    assert (await resumed.read(Path("progress.txt"))).read() == b"step 1"


async def test_resume_of_a_deleted_workspace_restores_its_snapshot(
    client: SandboxdSandboxClient, open_session: OpenSession, tmp_path: Path
) -> None:
    """test_docker_resume_resets_workspace_readiness_when_container_is_recreated"""
    first = await open_session(snapshot=LocalSnapshotSpec(base_path=tmp_path))
    await first.write(Path("progress.txt"), io.BytesIO(b"saved"))
    await first.aclose()  # persists the snapshot
    await client.delete(first)
    assert await first.running() is False

    state = client.deserialize_session_state(client.serialize_session_state(first.state))
    resumed = await client.resume(state)
    try:
        assert resumed.state.workspace_root_ready is False
        await resumed.start()
        assert resumed._inner._workspace_state_preserved_on_start() is False
        assert (await resumed.read(Path("progress.txt"))).read() == b"saved"
    finally:
        await client.delete(resumed)


async def test_resume_after_the_daemon_is_killed_and_restarted(
    daemon_factory: type[Daemon], tmp_path: Path
) -> None:
    """Workspaces outlive the daemon: a session resumes from its serialized state on a
    restarted daemon (SIGKILL, no drain) through a new client, files and all."""
    args = (
        "--namespace", f"{RUN_PREFIX}-oa{secrets.token_hex(2)}",
        "--image", IMAGE,
        "--pool-size", "0",
        "--disk-dir", str(tmp_path / "disks"),
    )  # fmt: skip
    first = daemon_factory(tmp_path / "d.sock", *args)
    await anyio.to_thread.run_sync(first.start)
    client = SandboxdSandboxClient(first.target)
    session = await client.create()
    await session.start()
    await session.write(Path("progress.txt"), io.BytesIO(b"before the restart"))
    payload = json.dumps(client.serialize_session_state(session.state))
    first.kill()

    second = daemon_factory(tmp_path / "d.sock", *args)
    await anyio.to_thread.run_sync(second.start)
    client = SandboxdSandboxClient(second.target)  # as a new process would
    resumed = await client.resume(client.deserialize_session_state(json.loads(payload)))
    try:
        await resumed.start()
        assert resumed._inner._workspace_state_preserved_on_start() is True
        assert (await resumed.read(Path("progress.txt"))).read() == b"before the restart"
        assert (await resumed.exec("cat progress.txt")).stdout == b"before the restart"
    finally:
        await client.delete(resumed)

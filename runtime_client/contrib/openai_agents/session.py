"""``SandboxdSandboxSession``: an openai-agents sandbox session on a sandboxd workspace.

openai-agents builds everything (manifests, the shell and filesystem
capabilities, ``ls``/``mkdir``/``rm``, apply_patch, snapshots) on a few verbs;
here they are sandboxd's own calls:

- ``_exec_internal``: ``Exec`` with an argv (no shell added), in the workspace's
  working folder, with its timeout; a signal death reads as 128+N, as in a shell.
- ``read`` / ``write``: the streamed ``Download`` / ``Upload`` (no size limit).
- ``persist_workspace`` / ``hydrate_workspace``: the workspace as one tar
  stream (``workspace_tar``).
- ``pty_exec_start`` / ``pty_write_stdin``: sandboxd's processes (``pty``).
- ``resolve_exposed_port``: a local listener forwarding to the port inside
  (``Sandbox.forward_port``, over the executor channel: the workspace's
  network stays off), one per port, closed when the session shuts down.

Paths are confined to the manifest's root and grants by openai-agents' own
policy, resolved inside the workspace (symlinks included) by the SDK's own
helper script. sandboxd's ``/tmp`` is ``noexec`` and its root filesystem
read-only, so that script is never installed: each run hands it to ``sh -c``,
and nothing is left in the workspace.
"""

from __future__ import annotations

import asyncio
import io
import math
from collections.abc import AsyncIterator
from pathlib import Path, PurePath
from typing import Literal, cast

from agents.sandbox.errors import (
    ExecTimeoutError,
    ExecTransportError,
    ExposedPortUnavailableError,
    OpName,
    WorkspaceArchiveReadError,
    WorkspaceArchiveWriteError,
    WorkspaceReadNotFoundError,
    WorkspaceStartError,
)
from agents.sandbox.session.base_sandbox_session import BaseSandboxSession
from agents.sandbox.session.pty_types import PtyExecUpdate
from agents.sandbox.session.runtime_helpers import RuntimeHelperScript
from agents.sandbox.session.sandbox_session_state import SandboxSessionState
from agents.sandbox.session.workspace_payloads import coerce_write_payload
from agents.sandbox.types import ExecResult, ExposedPortEndpoint, User
from agents.sandbox.workspace_paths import sandbox_path_str
from pydantic import Field

from runtime_client.contrib._common import shell_exit_code
from runtime_client.contrib.openai_agents import policy, workspace_tar
from runtime_client.contrib.openai_agents.options import SandboxdSandboxClientOptions
from runtime_client.contrib.openai_agents.pty import PtyProcesses
from runtime_client.errors import NotFound, SandboxdError
from runtime_client.ports import PortForward
from runtime_client.sandbox import Sandbox

#: Read size for streams given to ``write`` (sandboxd moves 1 MiB chunks).
WRITE_CHUNK = 1 << 20

#: Where an exposed port's listener binds: this host only, as the SDK's Docker
#: client publishes its ports.
EXPOSED_PORT_HOST = "127.0.0.1"


class SandboxdSandboxSessionState(SandboxSessionState):
    """What resumes a session: the workspace's instance id and how to make it again."""

    type: Literal["sandboxd"] = "sandboxd"
    instance_id: str
    #: The options it was created with, to create it again if it is gone on resume.
    options: SandboxdSandboxClientOptions = Field(default_factory=SandboxdSandboxClientOptions)


class SandboxdSandboxSession(BaseSandboxSession):
    state: SandboxdSandboxSessionState

    def __init__(self, sandbox: Sandbox, state: SandboxdSandboxSessionState) -> None:
        self._sandbox = sandbox
        self.state = state
        self._helpers: dict[str, str] = {}
        self._ptys = PtyProcesses()
        self._workspace_user: str | None = None
        self._forwards: dict[int, PortForward] = {}
        self._forwards_lock = asyncio.Lock()

    @property
    def instance_id(self) -> str:
        return self._sandbox.instance_id

    def supports_pty(self) -> bool:
        return True

    def _root(self) -> str:
        return self._workspace_root_path().as_posix()

    # ------------------------------------------------------------ lifecycle

    async def _ensure_backend_started(self) -> None:
        # A workspace stopped by its idle TTL starts again on its next call.
        try:
            await self._sandbox.exec(["true"])
        except SandboxdError as exc:
            raise WorkspaceStartError(
                path=Path(self._root()),
                cause=exc,
                message=f"sandboxd workspace {self.instance_id!r} did not start: {exc}",
            ) from exc

    async def running(self) -> bool:
        try:
            return (await self._sandbox.info()).state == "running"
        except SandboxdError:
            return False

    # ------------------------------------------------------------ exec

    async def exec(
        self,
        *command: str | Path,
        timeout: float | None = None,
        shell: bool | list[str] = True,
        user: str | User | None = None,
    ) -> ExecResult:
        await self._check_user(user, "exec")
        return await super().exec(*command, timeout=timeout, shell=shell, user=None)

    async def _exec_internal(
        self, *command: str | Path, timeout: float | None = None
    ) -> ExecResult:
        argv = [str(part) for part in command]
        script = self._helpers.get(argv[0]) if argv else None
        if script is not None:
            argv = ["sh", "-c", script, *argv]  # $0 is the helper's name, then its arguments
        try:
            result = await self._sandbox.exec(argv, timeout_ms=_milliseconds(timeout))
        except SandboxdError as exc:
            raise ExecTransportError(command=command, cause=exc) from exc
        if result.timed_out:
            raise ExecTimeoutError(command=command, timeout_s=timeout)
        code = shell_exit_code(result.exit_code)
        return ExecResult(stdout=result.stdout, stderr=result.stderr, exit_code=code)

    async def _ensure_runtime_helper_installed(self, helper: RuntimeHelperScript) -> PurePath:
        # Not installed (noexec /tmp, read-only root): _exec_internal runs it from here.
        self._helpers[str(helper.install_path)] = helper.content
        return helper.install_path

    async def _validate_path_access(self, path: Path | str, *, for_write: bool = False) -> Path:
        return await self._validate_remote_path_access(path, for_write=for_write)

    async def _check_user(self, user: str | User | None, op: OpName) -> None:
        if user is None:
            return
        if self._workspace_user is None:
            found = await self._exec_internal("id", "-un")
            self._workspace_user = found.stdout.decode().strip()
        name = user.name if isinstance(user, User) else user
        policy.check_user(name, self._workspace_user, op=op)

    # ------------------------------------------------------------ files

    async def read(self, path: Path, *, user: str | User | None = None) -> io.IOBase:
        await self._check_user(user, "read")
        target = await self._validate_path_access(path)
        spool = workspace_tar.spool()
        try:
            async for item in self._download(path, target):
                spool.write(item)
        except BaseException:
            spool.close()
            raise
        spool.seek(0)
        return cast(io.IOBase, spool)

    async def _read_bounded(self, path: Path, *, max_bytes: int) -> bytes:
        target = await self._validate_path_access(path)
        return b"".join([item async for item in self._download(path, target, length=max_bytes)])

    async def _download(
        self, path: Path, target: Path, *, length: int | None = None
    ) -> AsyncIterator[bytes]:
        try:
            async for item in self._sandbox.download_iter(sandbox_path_str(target), length=length):
                if isinstance(item, bytes):
                    yield item
        except NotFound as exc:
            raise WorkspaceReadNotFoundError(path=path, cause=exc) from exc
        except SandboxdError as exc:  # a folder, no permission, a broken sandbox
            raise WorkspaceArchiveReadError(path=path, cause=exc) from exc

    async def write(self, path: Path, data: io.IOBase, *, user: str | User | None = None) -> None:
        await self._check_user(user, "write")
        payload = coerce_write_payload(path=path, data=data)
        target = await self._validate_path_access(path, for_write=True)
        try:
            # Parents are created; the file is replaced whole when the stream completes.
            await self._sandbox.upload(sandbox_path_str(target), _chunks(payload.stream))
        except SandboxdError as exc:
            raise WorkspaceArchiveWriteError(path=target, cause=exc) from exc

    async def persist_workspace(self) -> io.IOBase:
        return await workspace_tar.persist(
            self._sandbox, self._root(), self._persist_workspace_skip_relpaths()
        )

    async def hydrate_workspace(self, data: io.IOBase) -> None:
        await workspace_tar.hydrate(self._sandbox, self._root(), data)

    # ------------------------------------------------------------ interactive processes

    async def pty_exec_start(
        self,
        *command: str | Path,
        timeout: float | None = None,
        shell: bool | list[str] = True,
        user: str | User | None = None,
        tty: bool = False,
        yield_time_s: float | None = None,
        max_output_tokens: int | None = None,
    ) -> PtyExecUpdate:
        await self._check_user(user, "exec")
        argv = self._prepare_exec_command(*command, shell=shell, user=None)
        return await self._ptys.start(
            self._sandbox,
            argv,
            tty=tty,
            timeout=timeout,
            yield_time_s=yield_time_s,
            max_output_tokens=max_output_tokens,
        )

    async def pty_write_stdin(
        self,
        *,
        session_id: int,
        chars: str,
        yield_time_s: float | None = None,
        max_output_tokens: int | None = None,
    ) -> PtyExecUpdate:
        return await self._ptys.write(
            session_id, chars, yield_time_s=yield_time_s, max_output_tokens=max_output_tokens
        )

    async def pty_terminate_all(self) -> None:
        await self._ptys.terminate_all()

    # ------------------------------------------------------------ exposed ports

    async def _resolve_exposed_port(self, port: int) -> ExposedPortEndpoint:
        # The base class has checked that ``port`` is one of the state's exposed_ports.
        async with self._forwards_lock:
            forward = self._forwards.get(port)
            if forward is None:
                forward = self._sandbox.forward_port(port, local_host=EXPOSED_PORT_HOST)
                try:
                    await forward.start()
                except OSError as exc:
                    raise ExposedPortUnavailableError(
                        port=port,
                        exposed_ports=self.state.exposed_ports,
                        reason="backend_unavailable",
                        context={"backend": "sandboxd", "detail": "local_listener_failed"},
                        cause=exc,
                    ) from exc
                self._forwards[port] = forward
        return ExposedPortEndpoint(host=EXPOSED_PORT_HOST, port=forward.port)

    async def _shutdown_backend(self) -> None:
        # The workspace outlives the session (the client's delete removes it);
        # the session's local listeners and their connections end here.
        async with self._forwards_lock:
            forwards, self._forwards = list(self._forwards.values()), {}
        for forward in forwards:
            await forward.close()


def _milliseconds(timeout: float | None) -> int:
    """sandboxd's exec timeout: 0 is the daemon's default; at least 1 ms otherwise."""
    if timeout is None:
        return 0
    return max(1, math.ceil(timeout * 1000))


async def _chunks(stream: io.IOBase) -> AsyncIterator[bytes]:
    while chunk := await asyncio.to_thread(stream.read, WRITE_CHUNK):
        yield bytes(chunk)


__all__ = ["SandboxSessionState", "SandboxdSandboxSession", "SandboxdSandboxSessionState"]

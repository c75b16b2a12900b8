"""``SandboxdSandboxEnvironment``: inspect_ai's sandbox environment on sandboxd.

Each sample gets its own sandboxd workspace (created in ``sample_init``,
deleted in ``sample_cleanup``); ``exec``, ``read_file`` and ``write_file`` go
to it over gRPC. Registered as ``"sandboxd-workspace"`` (the ``inspect_ai``
entry point in pyproject.toml loads ``_registry``).
"""

from __future__ import annotations

import contextlib
import secrets
import shlex
import signal
from collections.abc import AsyncIterator
from typing import Any, Literal, overload

import anyio
from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxConnection,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    SandboxUnavailableError,
    SandboxUserUnsupportedError,
    sandboxenv,
)
from typing_extensions import override

from runtime_client.contrib._common import (
    NAME,
    SETTLE_SECONDS,
    USER_SWITCH_REFUSED,
    FileOp,
    SandboxGoneError,
    decode,
    instance_id_pattern,
    new_instance_id,
    os_error,
    sandbox_gone,
    shell_exit_code,
    transport_for,
)
from runtime_client.contrib.inspect_ai._config import SandboxdConfig
from runtime_client.errors import (
    Conflict,
    NotFound,
    PermissionDenied,
    SandboxdError,
    SandboxUnavailable,
)
from runtime_client.processes import Process
from runtime_client.sandbox import Sandbox
from sandboxd.contract.models import DownloadDone
from sandboxd.contract.validation import MAX_ARG_STRLEN, MAX_COMMAND_BYTES, command_bytes

#: stdin up to this size rides in the exec call itself; more is streamed to
#: the process (sandboxd's exec carries at most its payload limit, 16 MiB by default).
STDIN_INLINE_BYTES = 256 << 10
#: bash's half of ``_argv_through_file``: $0 is the file of NUL-ended arguments.
_EXEC_ARGV_FILE = 'mapfile -d "" -t argv < "$0" && rm -f -- "$0" && exec -- "${argv[@]}"'
_STDIN_CHUNK = 1 << 20


def _only_too_long_in_all(cmd: list[str], env: dict[str, str]) -> bool:
    """The argv is more than sandboxd takes in one request, and that is all:
    every argument is one the kernel takes (else sandboxd's typed refusal
    stands) and none holds a NUL (which a file of NUL-ended arguments would
    split)."""
    return command_bytes(cmd, None, env) > MAX_COMMAND_BYTES and all(
        len(arg.encode()) < MAX_ARG_STRLEN and "\0" not in arg for arg in cmd
    )


def _config(config: SandboxEnvironmentConfigType | None) -> SandboxdConfig:
    if config is None:
        return SandboxdConfig()
    if isinstance(config, SandboxdConfig):
        return config
    if isinstance(config, str):
        raise ValueError(
            f"{NAME} takes a SandboxdConfig, not the file {config!r}: it reads no compose "
            "file or Dockerfile (workspaces run images already in sandboxd's engine, and "
            "host paths are never mounted)"
        )
    return SandboxdConfig.model_validate(config.model_dump())


@sandboxenv(name=NAME)
class SandboxdSandboxEnvironment(SandboxEnvironment):
    """One sample's sandboxd workspace: an isolated container and volume, no
    network unless the config's options ask, an unprivileged user."""

    #: Sandboxes made and not yet deleted, per task: task_cleanup's last chance.
    _live: dict[str, dict[str, tuple[SandboxdConfig, Sandbox]]] = {}

    def __init__(self, sandbox: Sandbox, config: SandboxdConfig, working_dir: str) -> None:
        super().__init__()
        self.sandbox = sandbox
        self.config = config
        self.working_dir = working_dir
        self._identity: tuple[str, str] | None = None  # (user name, uid) commands run as

    # ------------------------------------------------------------ lifecycle

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> SandboxdConfig:
        return SandboxdConfig(**config)

    @override
    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        # Fail the task at once, with the daemon's own words, when it cannot be reached.
        settings = _config(config)
        await transport_for(settings.target, settings.token()).get_status()

    @override
    @classmethod
    async def sample_init(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        metadata: dict[str, str],
    ) -> dict[str, SandboxEnvironment]:
        settings = _config(config)
        transport = transport_for(settings.target, settings.token())
        instance_id = new_instance_id(settings.id_prefix)
        # No labels of its own: a create with the daemon's default options is
        # served from its warm pool at once.
        info, _ = await transport.create_sandbox(instance_id, settings.sandbox_options())
        sandbox = Sandbox(transport, instance_id)
        cls._live.setdefault(task_name, {})[instance_id] = (settings, sandbox)
        return {"default": cls(sandbox, settings, info.options.workdir)}

    @override
    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        for environment in environments.values():
            sandbox = environment.as_type(cls).sandbox
            with contextlib.suppress(NotFound):
                await sandbox.delete()
            cls._live.get(task_name, {}).pop(sandbox.instance_id, None)

    @override
    @classmethod
    async def task_cleanup(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool
    ) -> None:
        left = cls._live.pop(task_name, {})
        if cleanup:
            for _, sandbox in left.values():
                with contextlib.suppress(NotFound):
                    await sandbox.delete()

    @override
    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        """``inspect sandbox cleanup sandboxd-workspace [ID]`` on the default daemon:
        the sandbox ``ID``, or every sandbox an inspect task left there (by the
        default config's id prefix)."""
        defaults = SandboxdConfig()
        transport = transport_for(defaults.target)
        if id is not None:
            ids = [id]
        else:
            ours = instance_id_pattern(defaults.id_prefix)
            found = await transport.list_sandboxes()
            ids = [info.instance_id for info in found if ours.fullmatch(info.instance_id)]
        for instance_id in ids:
            with contextlib.suppress(NotFound):
                await transport.delete_sandbox(instance_id)

    @override
    async def connection(self, *, user: str | None = None) -> SandboxConnection:
        if user is not None:
            await self._check_user(user)
        command = ["sandboxctl", "--target", self.config.target, "shell", self.sandbox.instance_id]
        return SandboxConnection(type=NAME, command=shlex.join(command))

    def default_polling_interval(self) -> float:
        # Every call is a local gRPC round trip, not a `docker exec`.
        return 0.2

    # ------------------------------------------------------------ exec

    @override
    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        """Runs ``cmd`` as argv in the sample's workspace. ``timeout_retry`` is not
        needed: a timeout is the command's own (sandboxd kills its process group),
        never a slow transport, so it is not retried."""
        if user is not None:
            await self._check_user(user)
        stdin = input.encode() if isinstance(input, str) else (input or b"")
        try:
            if _only_too_long_in_all(cmd, env or {}):
                cmd = await self._argv_through_file(cmd)
            if len(stdin) <= STDIN_INLINE_BYTES:
                stdout, stderr, code = await self._exec_inline(cmd, cwd, env, stdin, timeout)
            else:
                stdout, stderr, code = await self._exec_streamed(cmd, cwd, env, stdin, timeout)
        except NotFound:
            if await sandbox_gone(self.sandbox):
                raise SandboxUnavailableError(self._gone()) from None
            # The program does not exist: a result, as a shell would give.
            stdout, stderr, code = b"", f"{cmd[0]}: command not found\n".encode(), 127
        except PermissionDenied as exc:
            raise PermissionError(str(exc)) from None
        except SandboxUnavailable as exc:
            if await sandbox_gone(self.sandbox, settle=SETTLE_SECONDS):
                raise SandboxUnavailableError(self._gone()) from None
            raise SandboxUnavailableError(str(exc)) from None
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        if len(stdout) > limit or len(stderr) > limit:
            raise OutputLimitExceededError(
                SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR, decode(stdout[:limit])
            )
        return ExecResult(
            success=code == 0, returncode=code, stdout=decode(stdout), stderr=decode(stderr)
        )

    async def _exec_inline(
        self,
        cmd: list[str],
        cwd: str | None,
        env: dict[str, str] | None,
        stdin: bytes,
        timeout: int | None,
    ) -> tuple[bytes, bytes, int]:
        result = await self.sandbox.exec(
            cmd, cwd=cwd or "", env=env, stdin=stdin, timeout_ms=(timeout or 0) * 1000
        )
        if result.timed_out:
            raise TimeoutError(f"command timed out after {timeout} s: {shlex.join(cmd)}")
        if result.stdout_truncated or result.stderr_truncated:
            # sandboxd kept only the start; more than inspect's limit came anyway.
            raise OutputLimitExceededError(
                SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR, decode(result.stdout)
            )
        return result.stdout, result.stderr, shell_exit_code(result.exit_code)

    async def _exec_streamed(
        self,
        cmd: list[str],
        cwd: str | None,
        env: dict[str, str] | None,
        stdin: bytes,
        timeout: int | None,
    ) -> tuple[bytes, bytes, int]:
        """Large stdin: a process whose input is streamed as it reads it."""
        process = await self.sandbox.start_process(cmd, cwd=cwd or "", env=env)
        output = {"stdout": bytearray(), "stderr": bytearray()}
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        overflow = False
        try:
            with anyio.fail_after(timeout):
                async with anyio.create_task_group() as group:
                    group.start_soon(_feed, process, stdin)
                    async for chunk in process:
                        output[chunk.stream] += chunk.data
                        if len(output[chunk.stream]) > limit:
                            overflow = True
                            break
                    group.cancel_scope.cancel()  # it may exit before reading all its input
        except TimeoutError:
            raise TimeoutError(f"command timed out after {timeout} s: {shlex.join(cmd)}") from None
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(SandboxdError):
                if process.exit is None:
                    await process.signal(signal.SIGKILL)  # its whole process group
                await process.detach()
        if overflow or (process.exit is not None and process.exit.missed):
            raise OutputLimitExceededError(
                SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR, decode(bytes(output["stdout"]))
            )
        assert process.exit is not None
        code = process.exit.info.exit_code
        return bytes(output["stdout"]), bytes(output["stderr"]), 0 if code is None else code

    async def _argv_through_file(self, cmd: list[str]) -> list[str]:
        """An argv past what sandboxd takes in one request (``MAX_COMMAND_BYTES``,
        half the kernel's) but within the kernel's own limit, as inspect's Docker
        sandbox passes it: the arguments go in a file in the workspace's /tmp,
        and bash reads them and execs the command with them (it deletes the
        file first). Past the kernel's limit bash answers E2BIG, exit 126."""
        path = f"/tmp/.inspect-argv-{secrets.token_hex(8)}"
        await self.sandbox.upload(path, b"".join(arg.encode() + b"\0" for arg in cmd))
        return ["bash", "-c", _EXEC_ARGV_FILE, path]

    async def _check_user(self, user: str) -> None:
        """Commands can run only as the workspace's own user; asking for any
        other (root included) is refused, by design, with the reason."""
        if self._identity is None:
            probe = await self.sandbox.exec(["sh", "-c", "id -un; id -u"])
            name, uid = decode(probe.stdout).split()[:2]
            self._identity = (name, uid)
        if user not in self._identity:
            raise SandboxUserUnsupportedError(USER_SWITCH_REFUSED.format(user=user))

    def _gone(self) -> str:
        return f"the sandboxd workspace {self.sandbox.instance_id!r} no longer exists"

    # ------------------------------------------------------------ files

    async def _file_error(self, exc: SandboxdError, op: FileOp, path: str) -> Exception:
        try:
            return await os_error(exc, self.sandbox, op, path)
        except SandboxGoneError:
            return SandboxUnavailableError(self._gone())

    @override
    async def write_file(self, file: str, contents: str | bytes) -> None:
        data = contents.encode("utf-8") if isinstance(contents, str) else contents
        try:
            await self.sandbox.upload(file, data)
        except SandboxdError as exc:
            raise await self._file_error(exc, FileOp.WRITE, file) from None

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    @override
    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        limit = SandboxEnvironmentLimits.MAX_READ_FILE_SIZE
        data = bytearray()
        try:
            async for chunk in _download(self.sandbox, file):
                data += chunk
                if len(data) > limit:
                    raise OutputLimitExceededError(
                        SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, None
                    )
        except SandboxdError as exc:
            raise await self._file_error(exc, FileOp.READ, file) from None
        # Newlines as they are (CRLF stays CRLF), like open(newline="").
        return data.decode("utf-8") if text else bytes(data)


async def _download(sandbox: Sandbox, path: str) -> AsyncIterator[bytes]:
    async for item in sandbox.download_iter(path):
        if not isinstance(item, DownloadDone):
            yield item


async def _feed(process: Process, stdin: bytes) -> None:
    try:
        for start in range(0, len(stdin), _STDIN_CHUNK):
            await process.write(stdin[start : start + _STDIN_CHUNK])
        await process.close_stdin()
    except Conflict:
        pass  # it exited before reading all of it: its exit says the rest

"""``SandboxdSandbox``: deepagents' ``BaseSandbox`` on a sandboxd workspace.

deepagents asks a sandbox for three things (``execute``, ``upload_files``,
``download_files``, each with an async twin) and derives its file tools from
them with scripts run through ``execute``. Here they are sandboxd's own calls:
``execute`` is a streamed exec (stdout and stderr merged in the order they were
written), the transfers are sandboxd's streamed ``Upload`` / ``Download`` (no
payload limit, bounded memory in the daemon). The async twins await the same
calls without holding a thread; the sync ones wait for them. Both run on the
connection's own loop (``runtime_client.contrib._loop``), which owns the gRPC
channel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

from deepagents.backends.protocol import (
    FILE_NOT_FOUND,
    INVALID_PATH,
    IS_DIRECTORY,
    PERMISSION_DENIED,
    ExecuteResponse,
    FileDownloadResponse,
    FileUploadResponse,
)
from deepagents.backends.sandbox import BaseSandbox

from runtime_client.contrib._loop import LoopThread
from runtime_client.errors import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    SandboxdError,
)
from runtime_client.factories import GrpcSandboxFactory
from runtime_client.sandbox import Sandbox
from sandboxd.contract.models import ExecExit, ExecOutput, FileType, SandboxOptions

T = TypeVar("T")

#: ``execute``'s timeout when the caller gives none, in seconds (deepagents' own
#: sandboxes use 30 minutes; sandboxd's exec allows up to an hour by default).
DEFAULT_TIMEOUT_S = 30 * 60
#: Output ``execute`` keeps per command; the rest is read and dropped (the
#: command is never held back) and the response says ``truncated``.
DEFAULT_MAX_OUTPUT_BYTES = 1 << 20
#: What a shell answers for a command that timed out (timeout(1), deepagents' local shell).
TIMEOUT_EXIT_CODE = 124
#: Transfers of one ``upload_files`` / ``download_files`` call in flight at once
#: (sandboxd allows 64 open transfers per workspace).
TRANSFERS_IN_FLIGHT = 8


class SandboxdConnection:
    """A sandboxd daemon, reached over gRPC from a loop of its own.

    ``target``, ``token`` and ``options`` are those of ``GrpcSandboxFactory``;
    ``options`` apply to every sandbox made through this connection. Close it
    (or use it as a context manager) when done: its workspaces stay until
    ``delete``.
    """

    def __init__(
        self, target: str, *, token: str | None = None, options: SandboxOptions | None = None
    ) -> None:
        self._loop = LoopThread("sandboxd-deepagents")
        try:
            self._factory = self._loop.run(_open_factory(target, token, options))
        except BaseException:
            self._loop.close()
            raise

    def sandbox(
        self,
        instance_id: str,
        *,
        cwd: str | None = None,
        timeout: int = DEFAULT_TIMEOUT_S,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> SandboxdSandbox:
        """The backend for ``instance_id``'s workspace, created if missing.

        ``cwd`` is where commands start (default ``/workspace``); ``timeout``
        is ``execute``'s when the caller gives none, in seconds.
        """
        sandbox = self._loop.run(self._factory.create_sandbox(instance_id, cwd=cwd))
        return SandboxdSandbox(sandbox, self._loop, timeout, max_output_bytes)

    async def asandbox(
        self,
        instance_id: str,
        *,
        cwd: str | None = None,
        timeout: int = DEFAULT_TIMEOUT_S,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> SandboxdSandbox:
        sandbox = await self._loop.arun(self._factory.create_sandbox(instance_id, cwd=cwd))
        return SandboxdSandbox(sandbox, self._loop, timeout, max_output_bytes)

    def delete(self, instance_id: str) -> None:
        """Remove the workspace of ``instance_id`` and its files for good."""
        self._loop.run(Sandbox(self._factory.transport, instance_id).delete())

    async def adelete(self, instance_id: str) -> None:
        await self._loop.arun(Sandbox(self._factory.transport, instance_id).delete())

    def close(self) -> None:
        try:
            self._loop.run(self._factory.aclose())
        finally:
            self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


async def _open_factory(
    target: str, token: str | None, options: SandboxOptions | None
) -> GrpcSandboxFactory:
    # Made on the connection's loop: the gRPC channel belongs to the loop it is made on.
    return GrpcSandboxFactory(target, token=token, options=options)


class SandboxdSandbox(BaseSandbox):
    """One sandboxd workspace as a deepagents sandbox (``SandboxdConnection.sandbox``)."""

    def __init__(
        self, sandbox: Sandbox, loop: LoopThread, timeout: int, max_output_bytes: int
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds (got {timeout})")
        if max_output_bytes <= 0:
            raise ValueError(f"max_output_bytes must be positive (got {max_output_bytes})")
        self._sandbox = sandbox
        self._loop = loop
        self._default_timeout = timeout
        self._max_output_bytes = max_output_bytes

    @property
    def id(self) -> str:
        return self._sandbox.instance_id

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coro)

    # ------------------------------------------------------------ execute

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Run ``command`` under ``bash -c`` in the workspace.

        ``timeout`` is in seconds; ``None`` or ``0`` mean the sandbox's default
        (sandboxd has no unbounded exec). A command that runs out of time is
        killed with its process group and answers exit code 124.
        """
        return self._run(self._execute(command, timeout))

    async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        return await self._loop.arun(self._execute(command, timeout))

    async def _execute(self, command: str, timeout: int | None) -> ExecuteResponse:
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout must be >= 0 seconds (got {timeout})")
        seconds = timeout or self._default_timeout
        kept = bytearray()
        dropped = 0
        ended: ExecExit | None = None
        async for event in self._sandbox.exec_stream(command, timeout_ms=seconds * 1000):
            if isinstance(event, ExecOutput):
                room = self._max_output_bytes - len(kept)
                kept += event.data[:room]
                dropped += max(0, len(event.data) - room)
            else:
                ended = event
        if ended is None:  # the stream always ends with the exit; a daemon that broke it raised
            raise SandboxdError(f"exec in {self.id!r} ended without an exit status")
        output = kept.decode("utf-8", errors="replace")
        if dropped:
            output += f"\n\n... Output truncated at {self._max_output_bytes} bytes."
        if ended.timed_out:
            output += (
                f"\nError: Command timed out after {seconds} seconds. "
                "For long-running commands, re-run using the timeout parameter."
            )
            exit_code = TIMEOUT_EXIT_CODE
        else:
            exit_code = ended.exit_code
        return ExecuteResponse(output=output, exit_code=exit_code, truncated=bool(dropped))

    # ------------------------------------------------------------ file transfers

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return self._run(self._upload_files(files))

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return await self._loop.arun(self._upload_files(files))

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return self._run(self._download_files(paths))

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return await self._loop.arun(self._download_files(paths))

    async def _upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        # Each file on its own: one that fails says why, the others still land.
        gate = asyncio.Semaphore(TRANSFERS_IN_FLIGHT)

        async def one(path: str, content: bytes) -> FileUploadResponse:
            if not path.startswith("/"):
                return FileUploadResponse(path=path, error=INVALID_PATH)
            async with gate:
                try:
                    await self._sandbox.upload(path, content)  # parents created
                except SandboxdError as exc:
                    return FileUploadResponse(path=path, error=await self._file_error(path, exc))
            return FileUploadResponse(path=path, error=None)

        return list(await asyncio.gather(*(one(path, content) for path, content in files)))

    async def _download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        gate = asyncio.Semaphore(TRANSFERS_IN_FLIGHT)

        async def one(path: str) -> FileDownloadResponse:
            if not path.startswith("/"):
                return FileDownloadResponse(path=path, content=None, error=INVALID_PATH)
            content = bytearray()
            async with gate:
                try:
                    async for item in self._sandbox.download_iter(path):
                        if isinstance(item, bytes):
                            content += item
                except SandboxdError as exc:
                    error = await self._file_error(path, exc)
                    return FileDownloadResponse(path=path, content=None, error=error)
            return FileDownloadResponse(path=path, content=bytes(content), error=None)

        return list(await asyncio.gather(*(one(path) for path in paths)))

    async def _file_error(self, path: str, exc: SandboxdError) -> str:
        """deepagents' error code for a failed transfer, else sandboxd's message."""
        if isinstance(exc, NotFound):
            return FILE_NOT_FOUND
        if isinstance(exc, PermissionDenied):
            return PERMISSION_DENIED
        if isinstance(exc, InvalidArgument):
            # A folder where a file was meant is the common case; ask rather than parse text.
            try:
                found = await self._sandbox.stat(path, follow_symlinks=True)
            except SandboxdError:
                return INVALID_PATH
            return IS_DIRECTORY if found.type is FileType.DIRECTORY else INVALID_PATH
        return f"{type(exc).__name__}: {exc}"

"""``SandboxdWorkspaceBackend``: a pydantic-ai workspace backend on a sandboxd sandbox."""

from __future__ import annotations

import asyncio
import math
import posixpath
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

import anyio
from pydantic_ai.workspaces import (
    CommandResult,
    FileEntry,
    SupportsCommands,
    SupportsFilesystem,
    SupportsRealpath,
    WorkspaceBackend,
    WorkspaceCommand,
    WorkspaceOutputLimitError,
    WorkspaceRef,
    WorkspaceTimeoutError,
    WorkspaceUnavailableError,
)
from pydantic_ai.workspaces.protocol import validate_timeout

from runtime_client.contrib._common import (
    NAME,
    SETTLE_SECONDS,
    FileOp,
    SandboxGoneError,
    decode,
    new_instance_id,
    os_error,
    sandbox_gone,
    shell_exit_code,
    transport_for,
)
from runtime_client.errors import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    SandboxdError,
    SandboxUnavailable,
)
from runtime_client.factories import DEFAULT_TARGET
from runtime_client.sandbox import Sandbox
from sandboxd.contract.models import DownloadDone, FileType, SandboxOptions

T = TypeVar("T")

#: ``WorkspaceRef.provider`` of every workspace this backend makes.
PROVIDER = NAME
#: What instance ids of new workspaces start with, unless told otherwise.
DEFAULT_ID_PREFIX = "pydantic-ai"

# Resolves like os.path.realpath(strict=False) inside the workspace. The
# workspace's python3 is the one program every sandboxd image must have (the
# executor is written in it), so this needs nothing else from the image.
_REALPATH = "import os, sys; sys.stdout.write(os.path.realpath(sys.argv[1]))"
_PYTHON = "/usr/bin/python3"


def _check_command_form(command: WorkspaceCommand, *, shell: bool) -> None:
    if isinstance(command, str) != shell:
        raise TypeError(
            "a string command needs shell=True, and an argv sequence shell=False"
            if isinstance(command, str)
            else "an argv sequence cannot be combined with shell=True; pass one command string"
        )


class SandboxdWorkspaceBackend(
    WorkspaceBackend, SupportsCommands, SupportsFilesystem, SupportsRealpath
):
    """A sandboxd workspace (an isolated Docker container and its volume) as a
    pydantic-ai workspace backend.

    Built without I/O. Without ``ref`` the first operation creates a sandbox
    named ``<id_prefix>-<128 random bits>``; with one it attaches to that
    sandbox and raises ``WorkspaceUnavailableError`` if it is gone, never
    creating a replacement. The backend never deletes its sandbox: whoever
    holds the ref does (``SandboxdWorkspace.destroy``). Commands run as the
    workspace's unprivileged user with no network unless ``options`` asks.

    Args:
        target: the daemon's gRPC target (``unix:///...`` or ``host:port``).
        ref: a ``WorkspaceRef(provider="sandboxd-workspace", id=<instance id>)`` to attach to.
        token: the bearer token a TCP listener needs.
        options: how a new sandbox is made (image, memory, cpus, network, ...).
        env: variables for every command, under the per-call ``env``.
        id_prefix: what new instance ids start with (match a scoped token's prefix).
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        ref: WorkspaceRef | None = None,
        token: str | None = None,
        options: SandboxOptions | None = None,
        env: Mapping[str, str] | None = None,
        id_prefix: str = DEFAULT_ID_PREFIX,
    ) -> None:
        if ref is not None and ref.provider != PROVIDER:
            raise ValueError(f"not a sandboxd workspace ref: {ref!r}")
        self.target = target
        self._token = token
        self._options = options or SandboxOptions()
        self._env = dict(env or {})
        self._id_prefix = id_prefix
        self._ref = ref
        self._sandbox: Sandbox | None = None
        self._working_dir: str | None = None
        self._lock: asyncio.Lock | None = None

    def __repr__(self) -> str:
        return f"SandboxdWorkspaceBackend({self.target!r}, ref={self._ref!r})"

    @property
    def ref(self) -> WorkspaceRef | None:
        """``None`` until the first operation created the sandbox, then its ref for good."""
        return self._ref

    # ------------------------------------------------------------ the environment

    async def sandbox(self) -> Sandbox:
        """The runtime_client ``Sandbox`` underneath: created or attached on first use."""
        if self._sandbox is None:
            # Concurrent first operations share one create: the lock is the backend's.
            self._lock = self._lock or asyncio.Lock()
            async with self._lock:
                if self._sandbox is None:
                    await (self._create() if self._ref is None else self._attach(self._ref))
        assert self._sandbox is not None
        return self._sandbox

    async def _create(self) -> None:
        transport = transport_for(self.target, self._token)
        instance_id = new_instance_id(self._id_prefix)
        # Shielded: a caller cancelled mid-create must still come away with the
        # ref of the sandbox the daemon goes on to make.
        with anyio.CancelScope(shield=True):
            info, _ = await transport.create_sandbox(instance_id, self._options)
            self._ref = WorkspaceRef(provider=PROVIDER, id=instance_id)
            self._working_dir = info.options.workdir
            self._sandbox = Sandbox(transport, instance_id)

    async def _attach(self, ref: WorkspaceRef) -> None:
        transport = transport_for(self.target, self._token)
        try:
            info = await transport.get_sandbox(ref.id)
        except NotFound:
            raise WorkspaceUnavailableError(
                f"the sandboxd workspace {ref.id!r} no longer exists"
            ) from None
        self._working_dir = info.options.workdir
        self._sandbox = Sandbox(transport, ref.id)

    def _unavailable(self) -> WorkspaceUnavailableError:
        name = self._ref.id if self._ref is not None else "?"
        return WorkspaceUnavailableError(f"the sandboxd workspace {name!r} no longer exists")

    async def working_dir(self) -> str:
        await self.sandbox()
        assert self._working_dir is not None
        return self._working_dir

    # ------------------------------------------------------------ commands

    async def run(
        self,
        command: WorkspaceCommand,
        *,
        shell: bool = False,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> CommandResult:
        """Run to completion, stdin at EOF; ``timeout=None`` is the daemon's
        default exec timeout (``SANDBOXD_EXEC_TIMEOUT_MS``, 120 s)."""
        validate_timeout(timeout)
        _check_command_form(command, shell=shell)
        box = await self.sandbox()
        timeout_ms = 0 if timeout is None else max(1, math.ceil(timeout * 1000))
        argv_or_shell: str | list[str] = command if isinstance(command, str) else list(command)
        try:
            result = await box.exec(
                argv_or_shell, env={**self._env, **(env or {})}, timeout_ms=timeout_ms
            )
        except NotFound:
            if isinstance(command, str) or await sandbox_gone(box):
                raise self._unavailable() from None
            return CommandResult(exit_code=127, stdout="", stderr=f"{command[0]}: not found\n")
        except PermissionDenied:
            if isinstance(command, str):
                raise
            return CommandResult(
                exit_code=126, stdout="", stderr=f"{command[0]}: Permission denied\n"
            )
        except InvalidArgument as exc:
            raise ValueError(str(exc)) from None
        except SandboxUnavailable:
            if await sandbox_gone(box, settle=SETTLE_SECONDS):
                raise self._unavailable() from None
            raise
        stdout, stderr = decode(result.stdout), decode(result.stderr)
        if result.timed_out:
            raise WorkspaceTimeoutError(
                f"command timed out after {timeout:g}s and was killed"
                if timeout is not None
                else "command ran past the daemon's exec timeout and was killed",
                stdout=stdout,
                stderr=stderr,
            )
        if result.exit_code < 0 and await sandbox_gone(box, settle=SETTLE_SECONDS):
            # Killed because its sandbox was deleted, not by a signal of its own.
            raise self._unavailable()
        if result.stdout_truncated or result.stderr_truncated:
            limit = max(len(result.stdout), len(result.stderr))
            raise WorkspaceOutputLimitError(
                f"the command's output passed sandboxd's limit of {limit} bytes per stream "
                "(SANDBOXD_MAX_OUTPUT_BYTES); redirect it to a file and read that instead",
                limit=limit,
                stdout=stdout[: 64 * 1024],
                stderr=stderr[: 64 * 1024],
            )
        return CommandResult(
            exit_code=shell_exit_code(result.exit_code), stdout=stdout, stderr=stderr
        )

    # ------------------------------------------------------------ files

    async def _file(self, op: FileOp, path: str, call: Callable[[Sandbox], Awaitable[T]]) -> T:
        box = await self.sandbox()
        try:
            return await call(box)
        except SandboxdError as exc:
            try:
                error = await os_error(exc, box, op, path)
            except SandboxGoneError:
                raise self._unavailable() from None
            raise error from None

    async def read_bytes(self, path: str) -> bytes:
        async def read(box: Sandbox) -> bytes:
            parts = [
                item async for item in box.download_iter(path) if not isinstance(item, DownloadDone)
            ]
            return b"".join(parts)

        return await self._file(FileOp.READ, path, read)

    async def write_bytes(self, path: str, data: bytes) -> None:
        """Atomic (the file is replaced whole), parents created, through a symlink."""

        async def write(box: Sandbox) -> None:
            await box.upload(path, data)

        await self._file(FileOp.WRITE, path, write)

    async def stat(self, path: str) -> FileEntry:
        found = await self._file(
            FileOp.STAT, path, lambda box: box.stat(path, follow_symlinks=True)
        )
        is_dir = found.type == FileType.DIRECTORY
        name = posixpath.basename(posixpath.normpath(path))
        return FileEntry(name=name, path=path, is_dir=is_dir, size=None if is_dir else found.size)

    async def list_dir(self, path: str) -> Sequence[FileEntry]:
        found = await self._file(FileOp.LIST, path, lambda box: box.list_dir(path))
        entries = []
        for info in found:
            child = posixpath.join(path, info.name)
            is_dir = info.type == FileType.DIRECTORY
            size: int | None = info.size
            if info.type == FileType.SYMLINK:
                # Entries follow symlinks; a broken or looping one is kept as a non-directory.
                try:
                    target = await self.stat(child)
                    is_dir, size = target.is_dir, target.size
                except OSError:
                    is_dir, size = False, None
            entries.append(
                FileEntry(name=info.name, path=child, is_dir=is_dir, size=None if is_dir else size)
            )
        return sorted(entries, key=lambda entry: entry.path)

    async def make_dir(self, path: str) -> None:
        await self._file(FileOp.MAKE_DIR, path, lambda box: box.make_dir(path))

    async def remove(self, path: str) -> None:
        """A file, or a folder and everything in it; a symlink itself. Refuses the
        working directory and its ancestors (``ValueError``)."""
        root = await self.working_dir()
        parent = await self.realpath(posixpath.dirname(path.rstrip("/")) or "/")
        target = posixpath.join(parent, posixpath.basename(path.rstrip("/")))
        if target == root or root.startswith(target.rstrip("/") + "/"):
            raise ValueError(f"cannot remove {path!r}: it is the working directory or contains it")
        await self._file(FileOp.REMOVE, path, lambda box: box.remove(path, recursive=True))

    async def exists(self, path: str) -> bool:
        try:
            await self.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            if isinstance(exc, PermissionError):
                raise
            return False  # a symlink loop, as os.path.exists says
        return True

    async def realpath(self, path: str) -> str:
        result = await self.run([_PYTHON, "-I", "-S", "-c", _REALPATH, path], timeout=60)
        if result.exit_code != 0 or not posixpath.isabs(result.stdout):
            raise OSError(f"cannot resolve {path!r} in the workspace: {result.stderr.strip()}")
        return result.stdout

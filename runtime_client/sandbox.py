"""``Sandbox``: one instance's workspace, whatever backend serves it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Protocol

from runtime_client.transport import SandboxTransport
from sandboxd.models import (
    ExecEvent,
    ExecRequest,
    ExecResult,
    ExistsResult,
    FileInfo,
    ReadFileResult,
    SandboxInfo,
    WriteFileResult,
)


class Sandbox:
    """The low-level verbs of one instance, as async methods with typed results.

    Paths are absolute or relative to the instance's working directory.
    Errors are ``runtime_client.errors`` exceptions.
    """

    def __init__(self, transport: SandboxTransport, instance_id: str) -> None:
        self._transport = transport
        self.instance_id = instance_id

    def __repr__(self) -> str:
        return f"Sandbox({self.instance_id!r})"

    async def info(self) -> SandboxInfo:
        return await self._transport.get_sandbox(self.instance_id)

    async def delete(self) -> None:
        """Remove the workspace and its files for good."""
        await self._transport.delete_sandbox(self.instance_id)

    async def read_file(
        self, path: str, *, offset: int = 0, length: int | None = None
    ) -> ReadFileResult:
        return await self._transport.read_file(self.instance_id, path, offset, length)

    async def write_file(
        self,
        path: str,
        data: bytes | str,
        *,
        create_parents: bool = True,
        expected_sha256: str | None = None,
        mode: int | None = None,
    ) -> WriteFileResult:
        payload = data.encode() if isinstance(data, str) else data
        return await self._transport.write_file(
            self.instance_id,
            path,
            payload,
            create_parents=create_parents,
            expected_sha256=expected_sha256,
            mode=mode,
        )

    async def stat(self, path: str, *, follow_symlinks: bool = False) -> FileInfo:
        return await self._transport.stat(self.instance_id, path, follow_symlinks=follow_symlinks)

    async def list_dir(self, path: str = ".") -> list[FileInfo]:
        return await self._transport.list_dir(self.instance_id, path)

    async def exists(self, path: str) -> ExistsResult:
        return await self._transport.exists(self.instance_id, path)

    async def make_dir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> bool:
        return await self._transport.make_dir(
            self.instance_id, path, parents=parents, exist_ok=exist_ok
        )

    async def remove(self, path: str, *, recursive: bool = False, missing_ok: bool = False) -> bool:
        return await self._transport.remove(
            self.instance_id, path, recursive=recursive, missing_ok=missing_ok
        )

    async def exec(
        self,
        command: str | Sequence[str],
        *,
        cwd: str = "",
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
        timeout_ms: int = 0,
    ) -> ExecResult:
        """Run ``command``: a string runs under ``bash -c``, a sequence runs as argv."""
        return await self._transport.exec(
            self.instance_id, _exec_request(command, cwd, env, stdin, timeout_ms)
        )

    def exec_stream(
        self,
        command: str | Sequence[str],
        *,
        cwd: str = "",
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
        timeout_ms: int = 0,
    ) -> AsyncIterator[ExecEvent]:
        """Like ``exec``, yielding ``ExecOutput`` chunks as produced, then one ``ExecExit``."""
        return self._transport.exec_stream(
            self.instance_id, _exec_request(command, cwd, env, stdin, timeout_ms)
        )


def _exec_request(
    command: str | Sequence[str],
    cwd: str,
    env: Mapping[str, str] | None,
    stdin: bytes,
    timeout_ms: int,
) -> ExecRequest:
    if isinstance(command, str):
        return ExecRequest(
            shell=command, cwd=cwd, env=env or {}, stdin=stdin, timeout_ms=timeout_ms
        )
    return ExecRequest(
        argv=tuple(command), cwd=cwd, env=env or {}, stdin=stdin, timeout_ms=timeout_ms
    )


class SandboxFactory(Protocol):
    """Gives an agent instance its sandbox. Swap the factory, keep the agent."""

    async def create_sandbox(self, instance_id: str, *, cwd: str | None = None) -> Sandbox:
        """Create, or reattach to, the workspace of ``instance_id`` (idempotent)."""
        ...

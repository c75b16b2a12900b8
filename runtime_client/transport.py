"""The port between a ``Sandbox`` and whatever serves it.

``sandboxd.service.sandbox_service.SandboxService`` satisfies it in-process (the local
factory); ``GrpcTransport`` satisfies it over the wire. A ``Sandbox`` cannot
tell the two apart.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Protocol

from sandboxd.contract.models import (
    DownloadDone,
    ExecEvent,
    ExecRequest,
    ExecResult,
    ExistsResult,
    FileInfo,
    ForkResult,
    ListeningPort,
    NetworkDecision,
    NetworkPolicy,
    Preview,
    ProcessEvent,
    ProcessInfo,
    ProcessRequest,
    ReadFileResult,
    SandboxInfo,
    SandboxOptions,
    SandboxToolResult,
    ServerStatus,
    SnapshotInfo,
    TemplateInfo,
    TreeDownloadDone,
    TreeUploadResult,
    WriteFileResult,
)


class ProcessConnection(Protocol):
    """One attachment to a long-lived process: stdin in, output out."""

    async def send(self, data: bytes, *, close: bool = False) -> None:
        """Write ``data`` to the process's stdin; ``close`` ends its input after it."""
        ...

    def events(self) -> AsyncIterator[ProcessEvent]:
        """Output from the attach offset on, as produced; the last event is the exit."""
        ...

    async def aclose(self) -> None:
        """Detach (the process goes on running)."""
        ...


class PortConnection(Protocol):
    """One TCP connection to a server inside a sandbox, each direction ending on its own."""

    #: False while a connection opened without waiting has had no answer yet.
    opened: bool

    async def read(self) -> bytes:
        """The server's next bytes; b"" once it ended its direction."""
        ...

    async def write(self, data: bytes) -> None:
        """Returns once the bytes are on their way (a server that does not read holds it)."""
        ...

    async def shutdown_write(self) -> None:
        """End this direction (the server reads EOF); reading goes on."""
        ...

    async def close(self) -> None:
        """Abort both directions (the connection inside is reset); idempotent."""
        ...


class SandboxTransport(Protocol):
    async def create_sandbox(
        self, instance_id: str, options: SandboxOptions | None = None
    ) -> tuple[SandboxInfo, bool]: ...

    async def get_sandbox(self, instance_id: str) -> SandboxInfo: ...

    async def get_status(self) -> ServerStatus: ...

    async def list_sandboxes(
        self, label_selector: Mapping[str, str] | None = None
    ) -> list[SandboxInfo]: ...

    async def delete_sandbox(self, instance_id: str) -> None: ...

    async def restart_sandbox(self, instance_id: str) -> SandboxInfo: ...

    async def set_network_policy(self, instance_id: str, policy: NetworkPolicy) -> SandboxInfo: ...

    async def network_log(self, instance_id: str, limit: int = 0) -> list[NetworkDecision]: ...

    async def extend_sandbox(self, instance_id: str, seconds: int) -> SandboxInfo: ...

    async def read_file(
        self, instance_id: str, path: str, offset: int = 0, length: int | None = None
    ) -> ReadFileResult: ...

    async def write_file(
        self,
        instance_id: str,
        path: str,
        data: bytes,
        *,
        create_parents: bool = False,
        expected_sha256: str | None = None,
        mode: int | None = None,
    ) -> WriteFileResult: ...

    async def stat(
        self, instance_id: str, path: str, *, follow_symlinks: bool = False
    ) -> FileInfo: ...

    async def list_dir(self, instance_id: str, path: str) -> list[FileInfo]: ...

    async def exists(self, instance_id: str, path: str) -> ExistsResult: ...

    async def make_dir(
        self, instance_id: str, path: str, *, parents: bool = False, exist_ok: bool = False
    ) -> bool: ...

    async def remove(
        self, instance_id: str, path: str, *, recursive: bool = False, missing_ok: bool = False
    ) -> bool: ...

    async def exec(self, instance_id: str, request: ExecRequest) -> ExecResult: ...

    def exec_stream(self, instance_id: str, request: ExecRequest) -> AsyncIterator[ExecEvent]: ...

    async def call_tool(
        self,
        instance_id: str,
        name: str,
        arguments: Mapping[str, Any],
        *,
        tool_call_id: str | None = None,
        cwd: str | None = None,
    ) -> SandboxToolResult: ...

    async def upload_file(
        self,
        instance_id: str,
        path: str,
        chunks: AsyncIterable[bytes],
        *,
        create_parents: bool = False,
        expected_sha256: str | None = None,
        mode: int | None = None,
    ) -> WriteFileResult: ...

    def download_file(
        self, instance_id: str, path: str, offset: int = 0, length: int | None = None
    ) -> AsyncIterator[bytes | DownloadDone]: ...

    async def upload_tree(
        self, instance_id: str, path: str, chunks: AsyncIterable[bytes]
    ) -> TreeUploadResult: ...

    def download_tree(
        self, instance_id: str, path: str, *, gitignore: bool = False
    ) -> AsyncIterator[bytes | TreeDownloadDone]: ...

    async def fork_sandbox(
        self, source_id: str, new_id: str, options: SandboxOptions | None = None
    ) -> ForkResult: ...

    def build_template(
        self, dockerfile: str, context: AsyncIterable[bytes]
    ) -> AsyncIterator[str | TemplateInfo]: ...

    def template_from_snapshot(self, name: str) -> AsyncIterator[str | TemplateInfo]: ...

    async def create_snapshot(self, instance_id: str, name: str) -> SnapshotInfo: ...

    async def list_snapshots(self) -> list[SnapshotInfo]: ...

    async def delete_snapshot(self, name: str) -> None: ...

    async def restore_snapshot(self, instance_id: str, name: str) -> ForkResult: ...

    async def create_from_snapshot(
        self, name: str, new_id: str, options: SandboxOptions | None = None
    ) -> ForkResult: ...
    async def start_process(self, instance_id: str, request: ProcessRequest) -> ProcessInfo: ...

    def connect_process(
        self, instance_id: str, handle: str, offset: int | None = None
    ) -> ProcessConnection: ...

    async def resize_process(
        self, instance_id: str, handle: str, rows: int, cols: int
    ) -> ProcessInfo: ...

    async def signal_process(self, instance_id: str, handle: str, signal: int) -> ProcessInfo: ...

    async def list_processes(self, instance_id: str) -> list[ProcessInfo]: ...

    async def open_port(
        self,
        instance_id: str,
        port: int,
        host: str = "localhost",
        data: bytes = b"",
        *,
        wait: bool = True,
    ) -> PortConnection: ...

    async def list_ports(self, instance_id: str) -> list[ListeningPort]: ...

    async def create_preview(self, instance_id: str, port: int, ttl_s: int = 3600) -> Preview: ...

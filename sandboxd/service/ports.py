"""The ports between sandboxd's service layer and its workspace backends."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from sandboxd.backends.shared.pipes import Listener, Pipe
from sandboxd.contract.models import (
    DiskLimit,
    ForkResult,
    PoolStatus,
    RuntimeInfo,
    SandboxInfo,
    SandboxOptions,
    SnapshotInfo,
    TemplateInfo,
)

__all__ = ["Listener", "Pipe", "Workspace", "WorkspaceBackend"]


class Workspace(Protocol):
    """One live workspace: executor operations run next to its files."""

    @property
    def instance_id(self) -> str: ...

    async def call(self, op: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Run one executor operation; raise the domain error it raised."""
        ...

    def stream(self, op: str, args: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Run an operation that emits events; yields them, then the result
        as ``{"result": ...}``."""
        ...

    async def connect_port(self, port: int, host: str = "127.0.0.1", data: bytes = b"") -> Pipe:
        """A byte stream to ``host:port`` on the sandbox's loopback (backends.shared.pipes);
        ``data``, if any, goes out first, carried by the connect itself."""
        ...

    def accept_pipes(self, listeners: Sequence[Listener]) -> AsyncIterator[tuple[str, Pipe]]:
        """Listen on the sandbox's loopback; (listener name, pipe) per connection."""
        ...


class WorkspaceBackend(Protocol):
    """Creates, finds and removes workspaces: one package per engine in ``sandboxd.backends``."""

    name: str

    async def start(self) -> None:
        """Connect, and adopt the workspaces this backend already has."""
        ...

    async def create(
        self, instance_id: str, requested: SandboxOptions, wanted: SandboxOptions
    ) -> tuple[SandboxInfo, bool]:
        """Create, or return the existing workspace (idempotent per id).

        ``wanted`` is ``requested`` validated with every default filled in (the
        service's ``effective``); an existing workspace is compared with what
        was ``requested`` only.
        """
        ...

    async def get(self, instance_id: str) -> SandboxInfo: ...

    def pool_status(self) -> PoolStatus: ...

    async def runtimes(self) -> list[RuntimeInfo]:
        """The container runtimes this backend can create workspaces with."""
        ...

    def disk_limit(self) -> DiskLimit:
        """Whether new workspaces get a disk of their own, and if not why."""
        ...

    async def list(self, label_selector: Mapping[str, str]) -> list[SandboxInfo]: ...

    async def delete(self, instance_id: str) -> None: ...

    async def restart(self, instance_id: str) -> SandboxInfo:
        """Stop every process of the workspace and start it afresh; files stay."""
        ...

    async def fork(self, source_id: str, new_id: str, override: SandboxOptions) -> ForkResult:
        """A new instance: a consistent copy of the source's files, the source's
        options with ``override``'s set fields; fresh read state and records."""
        ...

    async def snapshot(self, instance_id: str, name: str, tenant: str) -> SnapshotInfo:
        """Copy the workspace's files (frozen meanwhile, as for a fork) into a new
        snapshot ``name`` of ``tenant`` ("": the operator's), kept by the engine."""
        ...

    async def snapshots(self, tenant: str) -> Sequence[SnapshotInfo]:
        """The tenant's finished snapshots, by name."""
        ...

    async def delete_snapshot(self, name: str, tenant: str) -> None: ...

    async def restore(self, instance_id: str, name: str, tenant: str) -> ForkResult:
        """Replace the workspace's files by the snapshot's; its processes stop
        and it starts afresh (as ``restart``)."""
        ...

    def build_template(self, context: Path, dockerfile: str) -> AsyncIterator[str | TemplateInfo]:
        """Build an image from the tar ``context`` (a file) and its ``dockerfile``:
        the build's log lines, then the template (``cached``: built before)."""
        ...

    def template_from_snapshot(self, name: str, tenant: str) -> AsyncIterator[str | TemplateInfo]:
        """A template of ``tenant``'s snapshot ``name``: its files in /workspace."""
        ...

    async def workspace(self, instance_id: str) -> Workspace:
        """The live workspace for an id, started or re-attached as needed."""
        ...

    async def read_marks(self, instance_id: str | None = None) -> dict[str, dict[str, str]]:
        """The service's notes on sandboxes (when each ends, why it stopped), by
        instance id: one sandbox's, or (None) all. Kept with the engine's
        objects, never in daemon memory, so a restart or a replica reads them."""
        ...

    async def write_marks(self, instance_id: str, marks: Mapping[str, str]) -> None:
        """Replace a sandbox's notes (empty: remove them). The backend only keeps
        them; what they mean is the service's (``service/lifetimes.py``)."""
        ...

    async def close(self) -> None:
        """Let go of connections; workspaces keep running."""
        ...

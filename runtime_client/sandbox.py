"""``Sandbox``: one instance's workspace, whatever backend serves it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from runtime_client import transfer_io
from runtime_client.errors import NotFound
from runtime_client.ports import PortForward
from runtime_client.processes import Process
from runtime_client.transfer_io import Progress, Source
from runtime_client.transport import PortConnection, SandboxTransport
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
    ProcessInfo,
    ProcessRequest,
    ReadFileResult,
    SandboxInfo,
    SandboxOptions,
    SandboxToolResult,
    SkippedLink,
    SnapshotInfo,
    TreeDownloadDone,
    TreeUploadResult,
    WriteFileResult,
)


@dataclass(frozen=True)
class TreeDownloadResult(TreeDownloadDone):
    """``download_tree``'s result: the daemon's summary, and the symlinks this
    side's extraction left out (they would resolve outside the destination)."""

    skipped_links: tuple[SkippedLink, ...] = ()  # the first 100
    links_skipped: int = 0  # how many in all


class Sandbox:
    """The low-level verbs of one instance, as async methods with typed results.

    Paths are absolute or relative to the instance's working directory.
    Errors are ``runtime_client.errors`` exceptions.
    """

    def __init__(self, transport: SandboxTransport, instance_id: str) -> None:
        self._transport = transport
        self.instance_id = instance_id
        #: Set on a sandbox ``fork`` returned: how its files were copied.
        self.fork_result: ForkResult | None = None

    def __repr__(self) -> str:
        return f"Sandbox({self.instance_id!r})"

    async def info(self) -> SandboxInfo:
        return await self._transport.get_sandbox(self.instance_id)

    async def restart(self) -> SandboxInfo:
        """Stop every process and start the workspace afresh; files stay.

        The way out of a wedged sandbox (all pids taken, a stuck executor).
        The shell's saved cwd/env, the read state and call records start empty.
        """
        return await self._transport.restart_sandbox(self.instance_id)

    async def extend(self, seconds: int) -> SandboxInfo:
        """Let the sandbox live ``seconds`` from now (``SandboxInfo.expires_at_ms``),
        within the daemon's maximum lifetime."""
        return await self._transport.extend_sandbox(self.instance_id, seconds)

    async def set_network_policy(
        self, policy: NetworkPolicy | Mapping[str, Any] | bool
    ) -> SandboxInfo:
        """Put a new network policy in force (none <-> allow; to or from full is
        refused); a live connection it forbids is closed. ``GetSandbox`` reads it back."""
        wanted = policy if isinstance(policy, NetworkPolicy) else NetworkPolicy.from_json(policy)
        return await self._transport.set_network_policy(self.instance_id, wanted)

    async def network_log(self, limit: int = 0) -> list[NetworkDecision]:
        """The sandbox's recent egress decisions, oldest first (``limit``: the newest N)."""
        return await self._transport.network_log(self.instance_id, limit)

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

    # ------------------------------------------------------------ moving files in and out

    async def upload(
        self,
        path: str,
        source: Source,
        *,
        create_parents: bool = True,
        expected_sha256: str | None = None,
        mode: int | None = None,
        progress: Progress | None = None,
    ) -> WriteFileResult:
        """Write ``path`` from a local file path, bytes or an (async) iterable of
        bytes, of any size, streamed in chunks; replaced atomically at the end."""
        return await self._transport.upload_file(
            self.instance_id,
            path,
            transfer_io.chunks_of(source, progress),
            create_parents=create_parents,
            expected_sha256=expected_sha256,
            mode=mode,
        )

    def download_iter(
        self, path: str, *, offset: int = 0, length: int | None = None
    ) -> AsyncIterator[bytes | DownloadDone]:
        """The file's bytes in chunks, then one ``DownloadDone`` (size, sha256)."""
        return self._transport.download_file(self.instance_id, path, offset, length)

    async def download(
        self,
        path: str,
        dest: str | os.PathLike[str],
        *,
        offset: int = 0,
        length: int | None = None,
        progress: Progress | None = None,
    ) -> DownloadDone:
        """Save the file ``path`` to the local file ``dest`` (written whole or not at all)."""
        chunks = _counted(self.download_iter(path, offset=offset, length=length), progress)
        found = await transfer_io.write_file(
            chunks, dest, lambda item: isinstance(item, DownloadDone)
        )
        return found[-1]  # type: ignore[no-any-return]

    async def upload_tree(
        self,
        source: Source,
        path: str = ".",
        *,
        progress: Progress | None = None,
    ) -> TreeUploadResult:
        """Extract a tree into the folder ``path`` (created) inside the sandbox.

        ``source`` is a local folder (sent as a tar stream), a local ``.tar``
        file, or tar bytes / an (async) iterable of tar chunks.
        """
        if isinstance(source, str | os.PathLike) and await asyncio.to_thread(os.path.isdir, source):
            chunks = transfer_io.chunks_of(transfer_io.tar_of(source), progress)
        else:
            chunks = transfer_io.chunks_of(source, progress)
        return await self._transport.upload_tree(self.instance_id, path, chunks)

    def download_tree_iter(
        self, path: str = ".", *, gitignore: bool = False
    ) -> AsyncIterator[bytes | TreeDownloadDone]:
        """The folder ``path`` as tar chunks, then one ``TreeDownloadDone``."""
        return self._transport.download_tree(self.instance_id, path, gitignore=gitignore)

    async def download_tree(
        self,
        path: str,
        dest: str | os.PathLike[str],
        *,
        gitignore: bool = False,
        progress: Progress | None = None,
    ) -> TreeDownloadResult:
        """Copy the folder ``path`` into the local folder ``dest`` (created).

        The tar comes from the sandbox, so nothing can land outside ``dest``
        (``sandboxd.contract.untar``): a symlink that would resolve outside it
        (absolute, out of it, or through another link) is left out and listed
        in the result's ``skipped_links``, and the rest is copied.
        """
        chunks = _counted(self.download_tree_iter(path, gitignore=gitignore), progress)
        found, counted = await transfer_io.extract_to(chunks, dest)
        done = [item for item in found if isinstance(item, TreeDownloadDone)][-1]
        return TreeDownloadResult(
            entries=done.entries,
            bytes=done.bytes,
            skipped=done.skipped,
            skipped_links=tuple(SkippedLink(**link) for link in counted["skipped_links"]),
            links_skipped=int(counted["links_skipped"]),
        )

    async def fork(self, new_id: str, *, options: SandboxOptions | None = None) -> Sandbox:
        """A new sandbox whose files start as a copy of this one's (then they
        diverge); this sandbox's options unless ``options`` sets some.
        ``forked.fork_result.method`` says whether the copy was a reflink."""
        result = await self._transport.fork_sandbox(self.instance_id, new_id, options)
        forked = Sandbox(self._transport, new_id)
        forked.fork_result = result
        return forked

    async def snapshot(self, name: str) -> SnapshotInfo:
        """Keep this sandbox's files (and options) under ``name``: restore them
        later, or start new sandboxes from them (the transport's
        ``create_from_snapshot``; ``list_snapshots``, ``delete_snapshot`` there too)."""
        return await self._transport.create_snapshot(self.instance_id, name)

    async def restore(self, name: str) -> ForkResult:
        """Replace this sandbox's files by snapshot ``name``'s; its processes
        stop and it starts afresh (as ``restart``)."""
        return await self._transport.restore_snapshot(self.instance_id, name)

    # ------------------------------------------------------------ long-lived processes

    async def start_process(
        self,
        command: str | Sequence[str],
        *,
        cwd: str = "",
        env: Mapping[str, str] | None = None,
        pty: tuple[int, int] | None = None,
    ) -> Process:
        """Start a process that outlives this call: a string runs under ``bash -c``.

        ``pty=(rows, cols)`` runs it on a pseudo-terminal (stdout and stderr
        merge, as on any terminal). See ``runtime_client.processes.Process``.
        """
        request = ProcessRequest(
            argv=None if isinstance(command, str) else tuple(command),
            shell=command if isinstance(command, str) else None,
            cwd=cwd,
            env=dict(env or {}),
            pty=pty,
        )
        info = await self._transport.start_process(self.instance_id, request)
        return Process(self._transport, self.instance_id, info, offset=0)

    async def connect_process(self, handle: str, *, offset: int | None = None) -> Process:
        """Re-attach to a process: output from ``offset`` (None: all still kept), then live."""
        for info in await self._transport.list_processes(self.instance_id):
            if info.handle == handle:
                return Process(self._transport, self.instance_id, info, offset=offset)
        raise NotFound(f"no process {handle!r} in sandbox {self.instance_id!r}")

    async def list_processes(self) -> list[ProcessInfo]:
        return await self._transport.list_processes(self.instance_id)

    # ------------------------------------------------------------ ports

    async def open_port(
        self, port: int, host: str = "localhost", data: bytes = b"", *, wait: bool = True
    ) -> PortConnection:
        """One TCP connection to ``host:port`` inside the sandbox (127.0.0.1, ::1, or
        localhost: both, 127.0.0.1 first).

        Works with the sandbox's network off. ``read()`` gives the server's
        bytes (b"" at its end), ``write()`` waits while the server does not
        read, ``shutdown_write()`` half-closes, ``close()`` resets. ``data``:
        the first bytes to send, carried by the open (no round trip of their own).
        ``wait=False`` returns before the connection inside is up (what the
        port forwarders do): one that cannot open fails the first ``read()``.
        """
        return await self._transport.open_port(self.instance_id, port, host, data, wait=wait)

    def forward_port(
        self,
        remote_port: int,
        *,
        local_port: int = 0,
        local_host: str = "127.0.0.1",
        remote_host: str = "localhost",
    ) -> PortForward:
        """A local listener for ``remote_port`` inside the sandbox: ``async with
        sandbox.forward_port(8000) as fwd:`` then connect to ``fwd.port``."""
        return PortForward(
            self._transport,
            self.instance_id,
            remote_port,
            local_port=local_port,
            local_host=local_host,
            remote_host=remote_host,
        )

    async def create_preview(self, port: int, ttl_s: int = 3600) -> Preview:
        """A preview token for ``port``: the daemon's HTTP listener serves the port
        at ``preview.path`` (a signed URL for a browser) until ``expires_at``."""
        return await self._transport.create_preview(self.instance_id, port, ttl_s)

    async def list_ports(self) -> list[ListeningPort]:
        """The TCP ports something listens on inside the sandbox."""
        return await self._transport.list_ports(self.instance_id)

    # ------------------------------------------------------------ the six tools

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        tool_call_id: str | None = None,
        cwd: str | None = None,
    ) -> SandboxToolResult:
        """Run a tool with arguments exactly as a model produced them.

        With ``tool_call_id``, retrying a write, edit or bash that already
        completed returns the recorded result (``fields["replayed"]``)
        instead of applying it twice. With ``cwd`` (absolute, or relative to
        the workdir; an existing folder), the call runs there: relative paths
        and bash's starting folder resolve against it, and bash's saved cwd
        is neither used nor changed.
        """
        return await self._transport.call_tool(
            self.instance_id, name, arguments, tool_call_id=tool_call_id, cwd=cwd
        )

    async def read(
        self, file_path: str, *, offset: int | None = None, limit: int | None = None
    ) -> SandboxToolResult:
        return await self.call_tool("read", _given(file_path=file_path, offset=offset, limit=limit))

    async def write(self, file_path: str, content: str) -> SandboxToolResult:
        return await self.call_tool("write", {"file_path": file_path, "content": content})

    async def edit(
        self, file_path: str, old_string: str, new_string: str, *, replace_all: bool = False
    ) -> SandboxToolResult:
        return await self.call_tool(
            "edit",
            _given(
                file_path=file_path,
                old_string=old_string,
                new_string=new_string,
                replace_all=replace_all or None,
            ),
        )

    async def bash(
        self,
        command: str,
        *,
        timeout: int | None = None,
        description: str | None = None,
        run_in_background: bool = False,
        workdir: str | None = None,
    ) -> SandboxToolResult:
        """``timeout`` is in milliseconds (``sandboxd.contract.tools.BASH_*_TIMEOUT_MS``)."""
        return await self.call_tool(
            "bash",
            _given(
                command=command,
                timeout=timeout,
                description=description,
                run_in_background=run_in_background or None,
                workdir=workdir,
            ),
        )

    async def bash_output(self, bash_id: str, *, filter: str | None = None) -> SandboxToolResult:
        """New output of a background bash job since the last call, and its status."""
        return await self.call_tool("bash_output", _given(bash_id=bash_id, filter=filter))

    async def kill_shell(self, shell_id: str) -> SandboxToolResult:
        """Stop a background bash job's whole process group."""
        return await self.call_tool("kill_shell", {"shell_id": shell_id})

    async def grep(
        self,
        pattern: str,
        *,
        path: str | None = None,
        glob: str | None = None,
        type: str | None = None,
        output_mode: str | None = None,
        case_insensitive: bool = False,
        line_numbers: bool | None = None,
        after_context: int | None = None,
        before_context: int | None = None,
        context: int | None = None,
        multiline: bool = False,
        literal: bool = False,
        head_limit: int | None = None,
        offset: int | None = None,
    ) -> SandboxToolResult:
        arguments = _given(
            pattern=pattern,
            path=path,
            glob=glob,
            type=type,
            output_mode=output_mode,
            multiline=multiline or None,
            literal=literal or None,
            head_limit=head_limit,
            offset=offset,
        )
        flags = {
            "-i": case_insensitive or None,
            "-n": line_numbers,
            "-A": after_context,
            "-B": before_context,
            "-C": context,
        }
        arguments.update({k: v for k, v in flags.items() if v is not None})
        return await self.call_tool("grep", arguments)

    async def glob(
        self,
        pattern: str,
        *,
        path: str | None = None,
        head_limit: int | None = None,
        offset: int | None = None,
        no_ignore: bool = False,
    ) -> SandboxToolResult:
        return await self.call_tool(
            "glob",
            _given(
                pattern=pattern,
                path=path,
                head_limit=head_limit,
                offset=offset,
                no_ignore=no_ignore or None,
            ),
        )


async def _counted(items: AsyncIterator[Any], progress: Progress | None) -> AsyncIterator[Any]:
    async for item in items:
        if progress is not None and isinstance(item, bytes):
            progress(len(item))
        yield item


def _given(**arguments: Any) -> dict[str, Any]:
    """The arguments the caller set; unset ones take the tool's defaults."""
    return {key: value for key, value in arguments.items() if value is not None}


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

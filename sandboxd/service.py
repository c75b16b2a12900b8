"""The service layer: every transport (gRPC today, HTTP later, in-process for
runtime_client's local factory) calls these methods, so validation, limits
and semantics exist once. Values in and out are ``sandboxd.models``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import uuid
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Mapping
from typing import Any

import anyio

from sandboxd import __version__, tool_contract, validation
from sandboxd.auth import current_scope
from sandboxd.config import Settings
from sandboxd.errors import InvalidArgument, ResourceExhausted, SandboxdError
from sandboxd.executor.files import ABSENT
from sandboxd.executor.processes import MAX_TERMINAL_SIZE
from sandboxd.executor.tools import TOOL_NAMES
from sandboxd.executor.transfer import CHUNK, WINDOW
from sandboxd.models import (
    DownloadDone,
    ExecEvent,
    ExecExit,
    ExecOutput,
    ExecRequest,
    ExecResult,
    ExistsResult,
    FileInfo,
    FileType,
    ForkResult,
    ProcessChunk,
    ProcessEvent,
    ProcessExit,
    ProcessInfo,
    ProcessRequest,
    ReadFileResult,
    SandboxInfo,
    SandboxOptions,
    SandboxToolResult,
    ServerStatus,
    ToolDescription,
    TreeDownloadDone,
    TreeUploadResult,
    WriteFileResult,
)
from sandboxd.options import effective
from sandboxd.ports import Workspace, WorkspaceBackend

_SHA256 = re.compile(r"[0-9a-f]{64}")


def _file_info(raw: Mapping[str, Any]) -> FileInfo:
    return FileInfo(
        path=str(raw["path"]),
        name=str(raw["name"]),
        type=FileType(raw["type"]),
        size=int(raw["size"]),
        mode=int(raw["mode"]),
        mtime_ns=int(raw["mtime_ns"]),
        symlink_target=str(raw.get("symlink_target", "")),
    )


class SandboxService:
    def __init__(self, backend: WorkspaceBackend, settings: Settings) -> None:
        self.backend = backend
        self.settings = settings

    # ------------------------------------------------------------ lifecycle

    async def create_sandbox(
        self, instance_id: str, options: SandboxOptions | None = None
    ) -> tuple[SandboxInfo, bool]:
        validation.instance_id(instance_id)
        current_scope().check(instance_id)
        requested = options or SandboxOptions()
        # Defaults and option rules are the service's, the same for every backend.
        return await self.backend.create(
            instance_id, requested, effective(requested, self.settings)
        )

    async def get_sandbox(self, instance_id: str) -> SandboxInfo:
        validation.instance_id(instance_id)
        current_scope().check(instance_id)
        return await self.backend.get(instance_id)

    async def list_sandboxes(
        self, label_selector: Mapping[str, str] | None = None
    ) -> list[SandboxInfo]:
        selector = dict(label_selector or {})
        validation.labels(selector, "label_selector")
        scope = current_scope()
        return [
            info for info in await self.backend.list(selector) if scope.allows(info.instance_id)
        ]

    async def delete_sandbox(self, instance_id: str) -> None:
        validation.instance_id(instance_id)
        current_scope().check(instance_id)
        await self.backend.delete(instance_id)

    async def restart_sandbox(self, instance_id: str) -> SandboxInfo:
        validation.instance_id(instance_id)
        current_scope().check(instance_id)
        return await self.backend.restart(instance_id)

    async def fork_sandbox(
        self, source_id: str, new_id: str, options: SandboxOptions | None = None
    ) -> ForkResult:
        """A new instance whose workspace starts as a consistent copy of the source's."""
        validation.instance_id(source_id)
        validation.instance_id(new_id)
        scope = current_scope()
        scope.check(source_id)
        scope.check(new_id)
        if source_id == new_id:
            raise InvalidArgument("a fork needs a new instance id, not the source's own")
        return await self.backend.fork(source_id, new_id, options or SandboxOptions())

    async def get_status(self) -> ServerStatus:
        return ServerStatus(
            version=__version__,
            backend=self.backend.name,
            namespace=self.settings.namespace,
            pool=self.backend.pool_status(),
            runtimes=tuple(await self.backend.runtimes()),
            disk=self.backend.disk_limit(),
        )

    async def _workspace(self, instance_id: str) -> Workspace:
        validation.instance_id(instance_id)
        current_scope().check(instance_id)
        return await self.backend.workspace(instance_id)

    # ------------------------------------------------------------ files

    async def read_file(
        self, instance_id: str, path: str, offset: int = 0, length: int | None = None
    ) -> ReadFileResult:
        validation.path(path)
        validation.non_negative(offset, "offset")
        if length is not None:
            validation.non_negative(length, "length")
            self._check_payload(length, "length")
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("read_file", {"path": path, "offset": offset, "length": length})
        return ReadFileResult(data=raw["data"], size=int(raw["size"]), eof=bool(raw["eof"]))

    async def write_file(
        self,
        instance_id: str,
        path: str,
        data: bytes,
        *,
        create_parents: bool = False,
        expected_sha256: str | None = None,
        mode: int | None = None,
    ) -> WriteFileResult:
        validation.path(path)
        self._check_payload(len(data), "data", streaming="Upload (client-streaming)")
        _check_write_args(expected_sha256, mode)
        workspace = await self._workspace(instance_id)
        raw = await workspace.call(
            "write_file",
            {
                "path": path,
                "data": data,
                "create_parents": create_parents,
                "expected_sha256": expected_sha256,
                "mode": mode,
            },
        )
        return WriteFileResult(
            size=int(raw["size"]), sha256=str(raw["sha256"]), created=bool(raw["created"])
        )

    async def stat(self, instance_id: str, path: str, *, follow_symlinks: bool = False) -> FileInfo:
        validation.path(path)
        workspace = await self._workspace(instance_id)
        return _file_info(
            await workspace.call("stat", {"path": path, "follow_symlinks": follow_symlinks})
        )

    async def list_dir(self, instance_id: str, path: str) -> list[FileInfo]:
        validation.path(path)
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("list_dir", {"path": path})
        return [_file_info(entry) for entry in raw["entries"]]

    async def exists(self, instance_id: str, path: str) -> ExistsResult:
        validation.path(path)
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("exists", {"path": path})
        kind = raw.get("type")
        return ExistsResult(exists=bool(raw["exists"]), type=FileType(kind) if kind else None)

    async def make_dir(
        self, instance_id: str, path: str, *, parents: bool = False, exist_ok: bool = False
    ) -> bool:
        validation.path(path)
        workspace = await self._workspace(instance_id)
        raw = await workspace.call(
            "make_dir", {"path": path, "parents": parents, "exist_ok": exist_ok}
        )
        return bool(raw["created"])

    async def remove(
        self, instance_id: str, path: str, *, recursive: bool = False, missing_ok: bool = False
    ) -> bool:
        validation.path(path)
        workspace = await self._workspace(instance_id)
        raw = await workspace.call(
            "remove", {"path": path, "recursive": recursive, "missing_ok": missing_ok}
        )
        return bool(raw["removed"])

    # ------------------------------------------------------------ exec

    def _exec_args(self, request: ExecRequest) -> dict[str, Any]:
        if (request.argv is None) == (request.shell is None):
            raise InvalidArgument("give exactly one of argv and shell")
        if request.argv is not None and (not request.argv or not request.argv[0]):
            raise InvalidArgument("argv must be non-empty and name a program")
        for part in [*(request.argv or ()), request.shell or "", request.cwd]:
            if "\x00" in part:
                raise InvalidArgument("command and cwd must not contain NUL bytes")
            validation.text(part, "command and cwd")
        validation.env(request.env)
        self._check_payload(len(request.stdin), "stdin")
        timeout_ms = request.timeout_ms or self.settings.exec_timeout_ms
        if not 1 <= timeout_ms <= self.settings.max_exec_timeout_ms:
            raise InvalidArgument(
                f"timeout_ms must be between 1 and {self.settings.max_exec_timeout_ms} "
                f"(got {request.timeout_ms})"
            )
        return {
            "argv": list(request.argv) if request.argv is not None else None,
            "shell": request.shell,
            "cwd": request.cwd,
            "env": dict(request.env),
            "stdin": request.stdin,
            "timeout_ms": timeout_ms,
        }

    async def exec(self, instance_id: str, request: ExecRequest) -> ExecResult:
        args = self._exec_args(request)
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("exec", args)
        return ExecResult(
            stdout=raw["stdout"],
            stderr=raw["stderr"],
            exit_code=int(raw["exit_code"]),
            timed_out=bool(raw["timed_out"]),
            duration_ms=int(raw["duration_ms"]),
            stdout_truncated=bool(raw.get("stdout_truncated")),
            stderr_truncated=bool(raw.get("stderr_truncated")),
        )

    async def exec_stream(self, instance_id: str, request: ExecRequest) -> AsyncIterator[ExecEvent]:
        args = self._exec_args(request)
        workspace = await self._workspace(instance_id)
        async for event in workspace.stream("exec", args):
            result = event.get("result")
            if isinstance(result, dict):
                yield ExecExit(
                    exit_code=int(result["exit_code"]),
                    timed_out=bool(result["timed_out"]),
                    duration_ms=int(result["duration_ms"]),
                )
                return
            for stream in ("stdout", "stderr"):
                chunk = event.get(stream)
                if isinstance(chunk, bytes):
                    yield ExecOutput(stream=stream, data=chunk)

    # ------------------------------------------------------------ tools

    def list_tools(self) -> list[ToolDescription]:
        """The tools' contract, derived from the tools' own specs."""
        return tool_contract.tool_descriptions()

    async def call_tool(
        self,
        instance_id: str,
        name: str,
        arguments: Mapping[str, Any] | str,
        *,
        tool_call_id: str | None = None,
        arguments_field: str = "arguments",
        cwd: str | None = None,
    ) -> SandboxToolResult:
        """Run one of the six tools with the arguments a model produced.

        ``arguments`` is an object or its JSON text, parsed here (bounded,
        one rule for every transport; ``arguments_field`` names it in errors).
        Aliases, coercion and unknown keys are the tool's business: a bad
        argument comes back as an ``is_error`` result the model can act on.
        With a ``tool_call_id``, a write, edit or bash that already completed
        returns its recorded result instead of running again. ``cwd`` is the
        folder the call runs in (relative paths and bash start there).
        """
        if isinstance(arguments, str):
            arguments = validation.json_object(
                arguments, arguments_field, self.settings.max_payload_bytes
            )
        if tool_call_id is not None and (
            not tool_call_id or len(tool_call_id) > 256 or "\x00" in tool_call_id
        ):
            raise InvalidArgument("tool_call_id must be 1-256 characters without NUL")
        if name not in TOOL_NAMES:
            raise InvalidArgument(f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
        if not isinstance(arguments, Mapping):
            raise InvalidArgument("tool arguments must be an object")
        validation.json_tree(dict(arguments), "tool arguments")
        if tool_call_id is not None:
            validation.text(tool_call_id, "tool_call_id")
        if cwd is not None and (not cwd or len(cwd) > 4096 or "\x00" in cwd):
            raise InvalidArgument("cwd must be 1-4096 characters without NUL")
        if cwd is not None:
            validation.text(cwd, "cwd")
        workspace = await self._workspace(instance_id)
        request: dict[str, Any] = {"name": name, "args": dict(arguments)}
        if tool_call_id:
            request["tool_call_id"] = tool_call_id
        if cwd:
            request["cwd"] = cwd
        raw = await workspace.call("tool", request)
        fields = raw.get("fields")
        return SandboxToolResult(
            text=str(raw.get("text", "")),
            is_error=bool(raw.get("is_error")),
            fields=fields if isinstance(fields, dict) else {},
        )

    # ------------------------------------------------------------ processes

    async def start_process(self, instance_id: str, request: ProcessRequest) -> ProcessInfo:
        if (request.argv is None) == (request.shell is None):
            raise InvalidArgument("give exactly one of argv and shell")
        if request.argv is not None and not request.argv:
            raise InvalidArgument("argv must name a program")
        for part in [*(request.argv or ()), request.shell or "", request.cwd]:
            if "\x00" in part:
                raise InvalidArgument("command and cwd must not contain NUL bytes")
        validation.env(request.env)
        args: dict[str, Any] = {
            "argv": list(request.argv) if request.argv is not None else None,
            "shell": request.shell,
            "cwd": request.cwd,
            "env": dict(request.env),
        }
        if request.pty is not None:
            rows, cols = request.pty
            _check_terminal_size(rows, cols)
            args["pty"] = {"rows": rows, "cols": cols}
        workspace = await self._workspace(instance_id)
        return ProcessInfo.from_raw(await workspace.call("proc_start", args))

    async def process_output(
        self, instance_id: str, handle: str, offset: int | None = None
    ) -> AsyncIterator[ProcessEvent]:
        """The output of ``handle`` from ``offset`` (None: all still kept), live, then its exit."""
        _check_handle(handle)
        if offset is not None and offset < 0:
            raise InvalidArgument(f"offset must not be negative (got {offset})")
        workspace = await self._workspace(instance_id)
        args: dict[str, Any] = {"handle": handle}
        if offset is not None:
            args["offset"] = offset
        async for event in workspace.stream("proc_attach", args):
            result = event.get("result")
            if isinstance(result, dict):
                missed, end = result.get("missed"), result.get("offset")
                yield ProcessExit(
                    info=ProcessInfo.from_raw(result),
                    missed=missed if isinstance(missed, int) else 0,
                    offset=end if isinstance(end, int) else 0,
                )
                return
            data = event.get("data")
            if isinstance(data, bytes):
                stream = "stderr" if event.get("stream") == "stderr" else "stdout"
                start = event.get("offset")
                yield ProcessChunk(
                    stream=stream, data=data, offset=start if isinstance(start, int) else 0
                )

    def connect_process(
        self, instance_id: str, handle: str, offset: int | None = None
    ) -> InProcessConnection:
        """An attachment for in-process clients (the local factory); see ConnectProcess."""
        return InProcessConnection(self, instance_id, handle, offset)

    async def write_process(
        self, instance_id: str, handle: str, data: bytes, *, close: bool = False
    ) -> int:
        _check_handle(handle)
        self._check_payload(len(data), "data")
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("proc_write", {"handle": handle, "data": data, "eof": close})
        written = raw.get("written")
        return written if isinstance(written, int) else 0

    async def resize_process(
        self, instance_id: str, handle: str, rows: int, cols: int
    ) -> ProcessInfo:
        _check_handle(handle)
        _check_terminal_size(rows, cols)
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("proc_resize", {"handle": handle, "rows": rows, "cols": cols})
        return ProcessInfo.from_raw(raw)

    async def signal_process(self, instance_id: str, handle: str, signal: int) -> ProcessInfo:
        _check_handle(handle)
        if not 1 <= signal <= MAX_SIGNAL:
            raise InvalidArgument(
                f"signal {signal} is out of range: give a signal number from 1 to {MAX_SIGNAL} "
                "(e.g. 2 for SIGINT, 15 for SIGTERM, 9 for SIGKILL)"
            )
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("proc_signal", {"handle": handle, "signal": signal})
        return ProcessInfo.from_raw(raw)

    async def list_processes(self, instance_id: str) -> list[ProcessInfo]:
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("proc_list", {})
        entries = raw.get("processes")
        if not isinstance(entries, list):
            return []
        return [ProcessInfo.from_raw(e) for e in entries[:1000] if isinstance(e, dict)]

    def _check_payload(self, size: int, field: str, *, streaming: str = "") -> None:
        limit = self.settings.max_payload_bytes
        if size > limit:
            advice = (
                f"send it with the streaming {streaming} call (runtime_client: "
                "Sandbox.upload; HTTP: PUT .../files/{path}:upload), which takes any size"
                if streaming
                else "send it in pieces"
            )
            raise ResourceExhausted(
                f"{field} is {size} bytes, over the payload limit of {limit} bytes "
                f"(SANDBOXD_MAX_PAYLOAD_BYTES); {advice}"
            )

    # ------------------------------------------------------------ streamed transfers
    # Every hop moves CHUNK-byte pieces with at most WINDOW of them in flight
    # per transfer, so the daemon holds O(WINDOW * CHUNK) whatever the size.

    async def upload_file(
        self,
        instance_id: str,
        path: str,
        chunks: AsyncIterable[bytes],
        *,
        create_parents: bool = False,
        expected_sha256: str | None = None,
        mode: int | None = None,
    ) -> WriteFileResult:
        """Write a file of any size from a stream of byte chunks: atomically on
        completion, nothing changed if the stream breaks."""
        validation.path(path)
        _check_write_args(expected_sha256, mode)
        workspace = await self._workspace(instance_id)
        session = _session_id()
        await _begin(
            workspace,
            "upload_begin",
            {
                "session": session,
                "path": path,
                "create_parents": create_parents,
                "expected_sha256": expected_sha256,
                "mode": mode,
            },
        )
        digest = hashlib.sha256()
        offset = 0
        window: deque[asyncio.Future[Any]] = deque()
        done = False
        try:
            async for piece in _rechunk(chunks):
                digest.update(piece)
                if len(window) >= WINDOW:
                    await window.popleft()
                window.append(
                    _start(
                        workspace.call(
                            "upload_chunk", {"session": session, "offset": offset, "data": piece}
                        )
                    )
                )
                offset += len(piece)
            while window:
                await window.popleft()
            raw = await workspace.call("upload_commit", {"session": session, "size": offset})
            done = True
        finally:
            await _settle(window)
            if not done:
                await _abort_transfer(workspace, session)
        return WriteFileResult(size=offset, sha256=digest.hexdigest(), created=bool(raw["created"]))

    async def download_file(
        self, instance_id: str, path: str, offset: int = 0, length: int | None = None
    ) -> AsyncIterator[bytes | DownloadDone]:
        """The file's bytes in chunks, then one ``DownloadDone``."""
        validation.path(path)
        validation.non_negative(offset, "offset")
        if length is not None:
            validation.non_negative(length, "length")
        workspace = await self._workspace(instance_id)
        session = _session_id()
        begun = await _begin(workspace, "download_begin", {"session": session, "path": path})
        size = int(begun["size"])
        end = size if length is None else min(size, offset + length)
        digest = hashlib.sha256()
        sent = 0
        window: deque[asyncio.Future[Any]] = deque()
        ahead = offset
        try:
            while True:
                while len(window) < WINDOW and ahead < end:
                    want = min(CHUNK, end - ahead)
                    window.append(
                        _start(
                            workspace.call(
                                "download_read",
                                {"session": session, "offset": ahead, "length": want},
                            )
                        )
                    )
                    ahead += want
                if not window:
                    break
                data = (await window.popleft())["data"]
                if not isinstance(data, bytes) or len(data) > CHUNK:
                    raise SandboxdError("the executor sent a malformed download chunk")
                if not data:
                    break  # the file shrank meanwhile
                digest.update(data)
                sent += len(data)
                yield data
        finally:
            await _settle(window)
            await _abort_transfer(workspace, session)
        yield DownloadDone(size=sent, sha256=digest.hexdigest(), file_size=size)

    async def upload_tree(
        self, instance_id: str, path: str, chunks: AsyncIterable[bytes]
    ) -> TreeUploadResult:
        """Extract a tar stream into the folder ``path`` (created), inside the sandbox."""
        validation.path(path)
        workspace = await self._workspace(instance_id)
        session = _session_id()
        await _begin(workspace, "tree_upload_begin", {"session": session, "path": path})
        seq = 0
        window: deque[asyncio.Future[Any]] = deque()
        done = False
        try:
            async for piece in _rechunk(chunks):
                if len(window) >= WINDOW:
                    await window.popleft()
                window.append(
                    _start(
                        workspace.call(
                            "tree_upload_chunk", {"session": session, "seq": seq, "data": piece}
                        )
                    )
                )
                seq += 1
            while window:
                await window.popleft()
            raw = await workspace.call("tree_upload_commit", {"session": session, "seq": seq})
            done = True
        finally:
            await _settle(window)
            if not done:
                await _abort_transfer(workspace, session)
        return TreeUploadResult(
            files=int(raw["files"]),
            directories=int(raw["directories"]),
            symlinks=int(raw["symlinks"]),
            bytes=int(raw["bytes"]),
        )

    async def download_tree(
        self, instance_id: str, path: str, *, gitignore: bool = False
    ) -> AsyncIterator[bytes | TreeDownloadDone]:
        """The folder ``path`` as a tar stream in chunks, then one ``TreeDownloadDone``."""
        validation.path(path)
        workspace = await self._workspace(instance_id)
        session = _session_id()
        await _begin(
            workspace,
            "tree_download_begin",
            {"session": session, "path": path, "gitignore": gitignore},
        )
        window: deque[asyncio.Future[Any]] = deque()
        seq = 0
        final: dict[str, Any] = {}
        try:
            while True:
                while len(window) < WINDOW:
                    window.append(
                        _start(
                            workspace.call("tree_download_read", {"session": session, "seq": seq})
                        )
                    )
                    seq += 1
                raw = await window.popleft()
                data = raw.get("data")
                if not isinstance(data, bytes) or len(data) > CHUNK:
                    raise SandboxdError("the executor sent a malformed tar chunk")
                if raw.get("eof"):
                    final = raw
                    break
                yield data
        finally:
            await _settle(window)
            await _abort_transfer(workspace, session)
        yield TreeDownloadDone(
            entries=int(final.get("entries", 0)),
            bytes=int(final.get("bytes", 0)),
            skipped=int(final.get("skipped", 0)),
        )


def _check_write_args(expected_sha256: str | None, mode: int | None) -> None:
    if expected_sha256 is not None and not (
        expected_sha256 == ABSENT or _SHA256.fullmatch(expected_sha256)
    ):
        raise InvalidArgument(
            f"expected_sha256 must be 64 lowercase hex digits or {ABSENT!r} "
            f"(got {expected_sha256!r})"
        )
    if mode is not None and not 0 <= mode <= 0o7777:
        raise InvalidArgument(f"mode must be a permission value 0..0o7777 (got {mode:#o})")


async def _rechunk(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """Fixed CHUNK-byte pieces (the last may be shorter) from chunks of any size."""
    buffer = bytearray()
    async for chunk in chunks:
        if not buffer and len(chunk) == CHUNK:
            yield chunk
            continue
        buffer += chunk
        while len(buffer) >= CHUNK:
            yield bytes(buffer[:CHUNK])
            del buffer[:CHUNK]
    if buffer:
        yield bytes(buffer)


def _start(call: Awaitable[dict[str, Any]]) -> asyncio.Future[Any]:
    return asyncio.ensure_future(call)


async def _settle(window: deque[asyncio.Future[Any]]) -> None:
    """Cancel the calls still in flight and wait for them to end."""
    for future in window:
        future.cancel()
    with anyio.CancelScope(shield=True):
        for future in window:
            with contextlib.suppress(BaseException):
                await future
    window.clear()


def _session_id() -> str:
    return f"t-{uuid.uuid4().hex}"


async def _begin(workspace: Workspace, op: str, args: dict[str, Any]) -> dict[str, Any]:
    """Open a session under an id the daemon chose, so a begin cut short (the
    client left while it ran) can still be aborted by that id."""
    try:
        return await workspace.call(op, args)
    except BaseException:
        await _abort_transfer(workspace, str(args["session"]))
        raise


async def _abort_transfer(workspace: Workspace, session: str) -> None:
    """End a session on the executor (its temp file goes), even when this task
    is being cancelled because the client went away: the abort runs as a task
    of its own (the executor's idle reaper is the last backstop)."""

    async def abort() -> None:
        with anyio.move_on_after(10), contextlib.suppress(SandboxdError):
            await workspace.call("transfer_abort", {"session": session})

    task = asyncio.get_running_loop().create_task(abort())
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.shield(task)


#: Abort tasks still running (a reference keeps them from being collected).
_BACKGROUND: set[asyncio.Task[None]] = set()

#: Linux's largest signal number (SIGRTMAX).
MAX_SIGNAL = 64


def _check_handle(handle: str) -> None:
    if not handle or len(handle) > 64 or "\x00" in handle:
        raise InvalidArgument("handle must be 1-64 characters without NUL, e.g. proc_1")


def _check_terminal_size(rows: int, cols: int) -> None:
    for name, value in (("rows", rows), ("cols", cols)):
        if not 1 <= value <= MAX_TERMINAL_SIZE:
            raise InvalidArgument(f"pty {name} must be from 1 to {MAX_TERMINAL_SIZE} (got {value})")


class InProcessConnection:
    """A process attachment without a wire: output and stdin are service calls."""

    def __init__(
        self, service: SandboxService, instance_id: str, handle: str, offset: int | None
    ) -> None:
        self._service = service
        self._instance_id = instance_id
        self._handle = handle
        self._output = service.process_output(instance_id, handle, offset)

    async def send(self, data: bytes, *, close: bool = False) -> None:
        await self._service.write_process(self._instance_id, self._handle, data, close=close)

    def events(self) -> AsyncIterator[ProcessEvent]:
        return self._output

    async def aclose(self) -> None:
        await self._output.aclose()  # type: ignore[attr-defined]

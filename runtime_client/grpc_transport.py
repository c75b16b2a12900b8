"""``SandboxTransport`` over sandboxd's gRPC API (grpc.aio)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

import grpc

from runtime_client._status import CallEnd, mapped, mapped_stream
from runtime_client.errors import SandboxUnavailable
from runtime_client.port_mux import MuxUnsupported, PortStreams
from runtime_client.tool_stream import StreamUnsupported, ToolCallStream
from runtime_client.transport import PortConnection
from sandboxd.contract import convert
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
    ToolDescription,
    TreeDownloadDone,
    TreeUploadResult,
    WriteFileResult,
)
from sandboxd.contract.port_mux import CHUNK as PORT_CHUNK
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.contract.v1 import sandbox_pb2_grpc as pb_grpc

_MAX_MESSAGE = 256 << 20  # the server enforces the real limits and says so


class _BearerToken:
    """Adds ``authorization: Bearer`` to every call (needed on TCP listeners)."""

    def __init__(self, token: str) -> None:
        self._header = ("authorization", f"Bearer {token}")

    def _with_token(self, details: Any) -> Any:
        metadata = [*(details.metadata or ()), self._header]
        return details._replace(metadata=metadata)


# grpc.aio files each interceptor under the first call kind it implements, so
# every kind needs an interceptor object of its own.
class _UnaryUnaryToken(_BearerToken, grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._with_token(details), request)


class _UnaryStreamToken(_BearerToken, grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._with_token(details), request)


class _StreamUnaryToken(_BearerToken, grpc.aio.StreamUnaryClientInterceptor):  # type: ignore[misc]
    async def intercept_stream_unary(
        self, continuation: Any, details: Any, request_iterator: Any
    ) -> Any:
        return await continuation(self._with_token(details), request_iterator)


class _StreamStreamToken(_BearerToken, grpc.aio.StreamStreamClientInterceptor):  # type: ignore[misc]
    async def intercept_stream_stream(
        self, continuation: Any, details: Any, request_iterator: Any
    ) -> Any:
        return await continuation(self._with_token(details), request_iterator)


def _token_interceptors(token: str) -> list[Any]:
    return [
        kind(token) for kind in (_UnaryUnaryToken, _UnaryStreamToken, _StreamUnaryToken,
                                 _StreamStreamToken)
    ]  # fmt: skip


class GrpcTransport:
    def __init__(self, target: str, *, token: str | None = None) -> None:
        self.target = target
        self._token = token
        self._channel: grpc.aio.Channel | None = None
        self._stub: pb_grpc.SandboxServiceStub | None = None
        self._ports_stub: pb_grpc.SandboxPortsStub | None = None
        self._tool_stream: ToolCallStream | None = None
        self._tool_stream_supported = True
        self._port_streams = PortStreams(lambda: self.ports_stub.OpenPorts())

    @property
    def stub(self) -> pb_grpc.SandboxServiceStub:
        # Created on first use: a grpc.aio channel belongs to the running loop.
        if self._stub is None:
            self._channel = grpc.aio.insecure_channel(
                self.target,
                interceptors=_token_interceptors(self._token) if self._token else None,
                options=[
                    ("grpc.max_receive_message_length", _MAX_MESSAGE),
                    ("grpc.max_send_message_length", _MAX_MESSAGE),
                ],
            )
            self._stub = pb_grpc.SandboxServiceStub(self._channel)  # type: ignore[no-untyped-call]
        return self._stub

    @property
    def ports_stub(self) -> pb_grpc.SandboxPortsStub:
        if self._ports_stub is None:
            self.stub  # noqa: B018 (makes the channel)
            self._ports_stub = pb_grpc.SandboxPortsStub(self._channel)  # type: ignore[no-untyped-call]
        return self._ports_stub

    async def close(self) -> None:
        await self._port_streams.close()
        if self._tool_stream is not None:
            await self._tool_stream.close()
            self._tool_stream = None
        if self._channel is not None:
            await self._channel.close()
        self._channel = None
        self._stub = None
        self._ports_stub = None

    @mapped
    async def create_sandbox(
        self, instance_id: str, options: SandboxOptions | None = None
    ) -> tuple[SandboxInfo, bool]:
        reply = await self.stub.CreateSandbox(
            pb.CreateSandboxRequest(
                instance_id=instance_id, options=convert.options_to_pb(options or SandboxOptions())
            )
        )
        return convert.info_from_pb(reply.sandbox), reply.created

    @mapped
    async def get_sandbox(self, instance_id: str) -> SandboxInfo:
        reply = await self.stub.GetSandbox(pb.GetSandboxRequest(instance_id=instance_id))
        return convert.info_from_pb(reply.sandbox)

    @mapped
    async def list_tools(self) -> list[ToolDescription]:
        """The daemon's tools: names, descriptions, argument JSON schemas."""
        return convert.tool_descriptions_from_pb(await self.stub.ListTools(pb.ListToolsRequest()))

    @mapped
    async def get_status(self) -> ServerStatus:
        return convert.status_from_pb(await self.stub.GetStatus(pb.GetStatusRequest()))

    @mapped
    async def list_sandboxes(
        self, label_selector: Mapping[str, str] | None = None
    ) -> list[SandboxInfo]:
        reply = await self.stub.ListSandboxes(
            pb.ListSandboxesRequest(label_selector=dict(label_selector or {}))
        )
        return [convert.info_from_pb(info) for info in reply.sandboxes]

    @mapped
    async def delete_sandbox(self, instance_id: str) -> None:
        await self.stub.DeleteSandbox(pb.DeleteSandboxRequest(instance_id=instance_id))

    @mapped
    async def extend_sandbox(self, instance_id: str, seconds: int) -> SandboxInfo:
        self.stub  # noqa: B018 -- opens the channel the Lifetimes stub shares
        lifetimes = pb_grpc.LifetimesStub(self._channel)  # type: ignore[no-untyped-call]
        reply = await lifetimes.ExtendSandbox(
            pb.ExtendSandboxRequest(instance_id=instance_id, seconds=seconds)
        )
        return convert.info_from_pb(reply.sandbox)

    def _network(self) -> Any:
        self.stub  # noqa: B018 -- opens the channel the Network stub shares
        return pb_grpc.NetworkStub(self._channel)  # type: ignore[no-untyped-call]

    @mapped
    async def set_network_policy(self, instance_id: str, policy: NetworkPolicy) -> SandboxInfo:
        reply = await self._network().SetNetworkPolicy(
            pb.SetNetworkPolicyRequest(instance_id=instance_id, policy=convert.policy_to_pb(policy))
        )
        return convert.info_from_pb(reply.sandbox)

    @mapped
    async def network_log(self, instance_id: str, limit: int = 0) -> list[NetworkDecision]:
        reply = await self._network().GetNetworkLog(
            pb.GetNetworkLogRequest(instance_id=instance_id, limit=limit)
        )
        return [convert.decision_from_pb(entry) for entry in reply.entries]

    @mapped
    async def restart_sandbox(self, instance_id: str) -> SandboxInfo:
        reply = await self.stub.RestartSandbox(pb.RestartSandboxRequest(instance_id=instance_id))
        return convert.info_from_pb(reply.sandbox)

    @mapped
    async def read_file(
        self, instance_id: str, path: str, offset: int = 0, length: int | None = None
    ) -> ReadFileResult:
        request = pb.ReadFileRequest(instance_id=instance_id, path=path, offset=offset)
        if length is not None:
            request.length = length
        reply = await self.stub.ReadFile(request)
        return ReadFileResult(data=reply.data, size=reply.size, eof=reply.eof)

    @mapped
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
        request = pb.WriteFileRequest(
            instance_id=instance_id, path=path, data=data, create_parents=create_parents
        )
        if expected_sha256 is not None:
            request.expected_sha256 = expected_sha256
        if mode is not None:
            request.mode = mode
        reply = await self.stub.WriteFile(request)
        return WriteFileResult(size=reply.size, sha256=reply.sha256, created=reply.created)

    @mapped
    async def stat(self, instance_id: str, path: str, *, follow_symlinks: bool = False) -> FileInfo:
        reply = await self.stub.Stat(
            pb.StatRequest(instance_id=instance_id, path=path, follow_symlinks=follow_symlinks)
        )
        return convert.file_info_from_pb(reply.info)

    @mapped
    async def list_dir(self, instance_id: str, path: str) -> list[FileInfo]:
        reply = await self.stub.ListDir(pb.ListDirRequest(instance_id=instance_id, path=path))
        return [convert.file_info_from_pb(entry) for entry in reply.entries]

    @mapped
    async def exists(self, instance_id: str, path: str) -> ExistsResult:
        reply = await self.stub.Exists(pb.ExistsRequest(instance_id=instance_id, path=path))
        return convert.exists_from_pb(reply)

    @mapped
    async def make_dir(
        self, instance_id: str, path: str, *, parents: bool = False, exist_ok: bool = False
    ) -> bool:
        reply = await self.stub.MakeDir(
            pb.MakeDirRequest(
                instance_id=instance_id, path=path, parents=parents, exist_ok=exist_ok
            )
        )
        return bool(reply.created)

    @mapped
    async def remove(
        self, instance_id: str, path: str, *, recursive: bool = False, missing_ok: bool = False
    ) -> bool:
        reply = await self.stub.Remove(
            pb.RemoveRequest(
                instance_id=instance_id, path=path, recursive=recursive, missing_ok=missing_ok
            )
        )
        return bool(reply.removed)

    @mapped
    async def exec(self, instance_id: str, request: ExecRequest) -> ExecResult:
        reply = await self.stub.Exec(convert.exec_request_to_pb(instance_id, request))
        return convert.exec_result_from_pb(reply)

    @mapped_stream
    async def exec_stream(self, instance_id: str, request: ExecRequest) -> AsyncIterator[ExecEvent]:
        call = self.stub.ExecStream(
            pb.ExecStreamRequest(exec=convert.exec_request_to_pb(instance_id, request))
        )
        try:
            async for message in call:
                yield convert.exec_event_from_pb(message)
        finally:
            # A consumer that stops early must end the RPC, or the daemon keeps
            # the command running (and, by backpressure, its workspace waiting).
            call.cancel()

    # ------------------------------------------------------------ processes

    @mapped
    async def start_process(self, instance_id: str, request: ProcessRequest) -> ProcessInfo:
        reply = await self.stub.StartProcess(convert.process_request_to_pb(instance_id, request))
        return convert.process_info_from_pb(reply)

    def connect_process(
        self, instance_id: str, handle: str, offset: int | None = None
    ) -> GrpcProcessConnection:
        return GrpcProcessConnection(self.stub, instance_id, handle, offset)

    @mapped
    async def resize_process(
        self, instance_id: str, handle: str, rows: int, cols: int
    ) -> ProcessInfo:
        reply = await self.stub.ResizeProcess(
            pb.ResizeProcessRequest(
                instance_id=instance_id, handle=handle, size=pb.TerminalSize(rows=rows, cols=cols)
            )
        )
        return convert.process_info_from_pb(reply)

    @mapped
    async def signal_process(self, instance_id: str, handle: str, signal: int) -> ProcessInfo:
        reply = await self.stub.SignalProcess(
            pb.SignalProcessRequest(instance_id=instance_id, handle=handle, signal=signal)
        )
        return convert.process_info_from_pb(reply)

    @mapped
    async def list_processes(self, instance_id: str) -> list[ProcessInfo]:
        reply = await self.stub.ListProcesses(pb.ListProcessesRequest(instance_id=instance_id))
        return [convert.process_info_from_pb(p) for p in reply.processes]

    # ------------------------------------------------------------ ports

    async def open_port(
        self,
        instance_id: str,
        port: int,
        host: str = "localhost",
        data: bytes = b"",
        *,
        wait: bool = True,
    ) -> PortConnection:
        """``data``: the first bytes, carried by the open itself (no round trip of their own).

        ``wait=False``: return without waiting for the connection inside; one
        that cannot open fails the first read (the stream is ``compact``).
        Connections share ``OpenPorts`` streams; a daemon without that RPC
        gets an ``OpenPort`` stream each.
        """
        if self._port_streams.supported is not False:
            with contextlib.suppress(MuxUnsupported):
                return await self._port_streams.open(instance_id, port, host, data, wait=wait)
        return await self._open_port_stream(instance_id, port, host, data, wait=wait)

    @mapped
    async def _open_port_stream(
        self, instance_id: str, port: int, host: str, data: bytes, *, wait: bool
    ) -> GrpcPortConnection:
        conn = GrpcPortConnection(self.ports_stub.OpenPort(), opened=wait)
        chunk = GrpcPortConnection.CHUNK
        first_input = pb.PortInput(
            instance_id=instance_id, port=port, host=host, data=data[:chunk], compact=not wait
        )
        try:
            first = await conn.open(first_input, wait=wait)
        except BaseException:
            await conn.close()
            raise
        if wait and (first is None or first is grpc.aio.EOF or not first.opened):
            await conn.close()
            raise SandboxUnavailable(f"port {port} of {instance_id!r} did not open")
        if len(data) > chunk:
            await conn.write(data[chunk:])
        return conn

    @mapped
    async def create_preview(self, instance_id: str, port: int, ttl_s: int = 3600) -> Preview:
        reply = await self.ports_stub.CreatePreview(
            pb.CreatePreviewRequest(instance_id=instance_id, port=port, ttl_s=ttl_s)
        )
        return convert.preview_from_pb(reply)

    @mapped
    async def list_ports(self, instance_id: str) -> list[ListeningPort]:
        reply = await self.ports_stub.ListPorts(pb.ListPortsRequest(instance_id=instance_id))
        return convert.listening_ports_from_pb(reply)

    @mapped
    async def call_tool(
        self,
        instance_id: str,
        name: str,
        arguments: Mapping[str, Any],
        *,
        tool_call_id: str | None = None,
        cwd: str | None = None,
    ) -> SandboxToolResult:
        # CallTool rather than the typed RPCs: the fields come back exactly as
        # the tool made them, so both factories hand out identical results.
        request = pb.CallToolRequest(
            instance_id=instance_id,
            name=name,
            arguments_json=json.dumps(dict(arguments)),
            tool_call_id=tool_call_id or "",
            cwd=cwd or "",
        )
        reply = await self._call_tool(request)
        fields = json.loads(reply.fields_json or "{}")
        return SandboxToolResult(text=reply.text, is_error=reply.is_error, fields=fields)

    async def _call_tool(self, request: pb.CallToolRequest) -> pb.CallToolResponse:
        # Over the shared ToolCalls stream (cheaper per call); unary CallTool
        # against a daemon that predates it.
        if self._tool_stream_supported:
            if self._tool_stream is None:
                self._tool_stream = ToolCallStream(
                    lambda metadata: self.stub.ToolCalls(metadata=metadata)
                )
            try:
                return await self._tool_stream.call(request)
            except StreamUnsupported:
                self._tool_stream_supported = False
        reply: pb.CallToolResponse = await self.stub.CallTool(request)
        return reply

    # ------------------------------------------------------------ transfers

    @mapped
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
        header = pb.UploadHeader(instance_id=instance_id, path=path, create_parents=create_parents)
        if expected_sha256 is not None:
            header.expected_sha256 = expected_sha256
        if mode is not None:
            header.mode = mode

        def message(chunk: bytes) -> pb.UploadRequest:
            return pb.UploadRequest(data=chunk)

        reply = await _client_stream(
            self.stub.Upload, pb.UploadRequest(header=header), chunks, message
        )
        return WriteFileResult(size=reply.size, sha256=reply.sha256, created=reply.created)

    @mapped_stream
    async def download_file(
        self, instance_id: str, path: str, offset: int = 0, length: int | None = None
    ) -> AsyncIterator[bytes | DownloadDone]:
        request = pb.DownloadRequest(instance_id=instance_id, path=path, offset=offset)
        if length is not None:
            request.length = length
        call = self.stub.Download(request)
        try:
            async for message in call:
                if message.WhichOneof("part") == "done":
                    done = message.done
                    yield DownloadDone(size=done.size, sha256=done.sha256, file_size=done.file_size)
                else:
                    yield message.data
        finally:
            call.cancel()

    @mapped
    async def upload_tree(
        self, instance_id: str, path: str, chunks: AsyncIterable[bytes]
    ) -> TreeUploadResult:
        def message(chunk: bytes) -> pb.UploadTreeRequest:
            return pb.UploadTreeRequest(data=chunk)

        reply = await _client_stream(
            self.stub.UploadTree,
            pb.UploadTreeRequest(header=pb.UploadTreeHeader(instance_id=instance_id, path=path)),
            chunks,
            message,
        )
        return convert.tree_upload_from_pb(reply)

    @mapped_stream
    async def download_tree(
        self, instance_id: str, path: str, *, gitignore: bool = False
    ) -> AsyncIterator[bytes | TreeDownloadDone]:
        call = self.stub.DownloadTree(
            pb.DownloadTreeRequest(instance_id=instance_id, path=path, gitignore=gitignore)
        )
        try:
            async for message in call:
                if message.WhichOneof("part") == "done":
                    done = message.done
                    yield TreeDownloadDone(
                        entries=done.entries, bytes=done.bytes, skipped=done.skipped
                    )
                else:
                    yield message.data
        finally:
            call.cancel()

    @mapped
    async def fork_sandbox(
        self, source_id: str, new_id: str, options: SandboxOptions | None = None
    ) -> ForkResult:
        reply = await self.stub.ForkSandbox(
            pb.ForkSandboxRequest(
                source_id=source_id,
                new_id=new_id,
                options=convert.options_to_pb(options or SandboxOptions()),
            )
        )
        return convert.copied_from_pb(reply)

    @mapped_stream
    async def build_template(
        self, dockerfile: str, context: AsyncIterable[bytes]
    ) -> AsyncIterator[str | TemplateInfo]:
        async def requests() -> AsyncIterator[pb.BuildTemplateRequest]:
            header = pb.BuildTemplateHeader(dockerfile=dockerfile)
            yield pb.BuildTemplateRequest(header=header)
            async for chunk in context:
                for start in range(0, len(chunk), _TEMPLATE_PIECE):
                    yield pb.BuildTemplateRequest(data=chunk[start : start + _TEMPLATE_PIECE])

        async for part in _build_answers(self._templates.BuildTemplate(requests())):
            yield part

    @mapped_stream
    async def template_from_snapshot(self, name: str) -> AsyncIterator[str | TemplateInfo]:
        request = pb.TemplateFromSnapshotRequest(name=name)
        async for part in _build_answers(self._templates.TemplateFromSnapshot(request)):
            yield part

    @property
    def _templates(self) -> Any:
        self.stub  # noqa: B018 -- opens the channel the Templates stub shares
        return pb_grpc.TemplatesStub(self._channel)  # type: ignore[no-untyped-call]

    @property
    def _snapshots(self) -> Any:
        self.stub  # noqa: B018 -- opens the channel the Snapshots stub shares
        return pb_grpc.SnapshotsStub(self._channel)  # type: ignore[no-untyped-call]

    @mapped
    async def create_snapshot(self, instance_id: str, name: str) -> SnapshotInfo:
        reply = await self._snapshots.CreateSnapshot(
            pb.CreateSnapshotRequest(instance_id=instance_id, name=name)
        )
        return convert.snapshot_from_pb(reply.snapshot)

    @mapped
    async def list_snapshots(self) -> list[SnapshotInfo]:
        reply = await self._snapshots.ListSnapshots(pb.ListSnapshotsRequest())
        return [convert.snapshot_from_pb(snapshot) for snapshot in reply.snapshots]

    @mapped
    async def delete_snapshot(self, name: str) -> None:
        await self._snapshots.DeleteSnapshot(pb.DeleteSnapshotRequest(name=name))

    @mapped
    async def restore_snapshot(self, instance_id: str, name: str) -> ForkResult:
        reply = await self._snapshots.RestoreSnapshot(
            pb.RestoreSnapshotRequest(instance_id=instance_id, name=name)
        )
        return convert.copied_from_pb(reply)

    @mapped
    async def create_from_snapshot(
        self, name: str, new_id: str, options: SandboxOptions | None = None
    ) -> ForkResult:
        reply = await self._snapshots.CreateFromSnapshot(
            pb.CreateFromSnapshotRequest(
                name=name, new_id=new_id, options=convert.options_to_pb(options or SandboxOptions())
            )
        )
        return convert.copied_from_pb(reply)


async def _build_answers(call: Any) -> AsyncIterator[str | TemplateInfo]:
    """A template build's answers: log lines, then the template."""
    end = CallEnd(call)
    try:
        async with end.mapped():
            async for message in call:
                if message.WhichOneof("part") == "done":
                    yield convert.template_from_pb(message.done)
                else:
                    yield message.log
    finally:
        call.cancel()


#: A build context's tar travels in messages of this size (well under gRPC's maximum).
_TEMPLATE_PIECE = 1 << 20


async def _client_stream(
    method: Any, header: Any, chunks: AsyncIterable[bytes], message: Any
) -> Any:
    """Run a client-streaming call; when the caller's chunk source fails, grpc
    cancels the call, and the caller gets its own error back instead."""
    failure: list[BaseException] = []

    async def messages() -> AsyncIterator[Any]:
        yield header
        try:
            async for chunk in chunks:
                yield message(chunk)
        except Exception as exc:
            failure.append(exc)
            raise

    call = method(messages())
    try:
        async with CallEnd(call).mapped():
            return await call
    except asyncio.CancelledError:
        if failure:
            raise failure[0] from None
        raise


class GrpcProcessConnection:
    """``ConnectProcess``: the first message names the process, then stdin follows."""

    def __init__(
        self,
        stub: pb_grpc.SandboxServiceStub,
        instance_id: str,
        handle: str,
        offset: int | None,
    ) -> None:
        self._call = stub.ConnectProcess()
        self._end = CallEnd(self._call)
        self._first = pb.ProcessInput(instance_id=instance_id, handle=handle, offset=offset)
        self._opened = False
        self._opening = asyncio.Lock()

    async def _open(self) -> None:
        # Reading and sending may start at once (a feeder task beside a reader):
        # whichever comes second waits until the first message is written, or
        # its stdin could overtake the message that names the process.
        if self._opened:
            return
        async with self._opening:
            if not self._opened:
                async with self._end.mapped():
                    await self._call.write(self._first)
                self._opened = True

    async def send(self, data: bytes, *, close: bool = False) -> None:
        await self._open()
        async with self._end.mapped():
            await self._call.write(pb.ProcessInput(data=data, close_stdin=close))

    async def events(self) -> AsyncIterator[ProcessEvent]:
        await self._open()
        async with self._end.mapped():
            async for message in self._call:
                yield convert.process_event_from_pb(message)

    async def aclose(self) -> None:
        self._call.cancel()


class GrpcPortConnection:
    """``OpenPort`` after its first exchange: bytes both ways, each with its own end."""

    #: Bytes per message towards the daemon.
    CHUNK = PORT_CHUNK

    def __init__(self, call: Any, *, opened: bool = True) -> None:
        self._call = call
        self._end = CallEnd(call)
        self._eof = False
        self._write_shut = False
        #: The daemon has answered (a compact stream opened without waiting).
        self.opened = opened

    async def open(self, first: pb.PortInput, *, wait: bool) -> Any:
        """Send the open (with the first bytes); with ``wait``, the daemon's first answer."""
        async with self._end.mapped():
            await self._call.write(first)
            return await self._call.read() if wait else None

    async def read(self) -> bytes:
        while not self._eof:
            async with self._end.mapped():
                message = await self._call.read()
            self.opened = True
            if message is grpc.aio.EOF:
                self._eof = True
                break
            # A compact stream's end may come with its last bytes.
            self._eof = message.eof
            if message.data:
                return bytes(message.data)
        return b""

    async def write(self, data: bytes) -> None:
        for start in range(0, len(data), self.CHUNK):
            async with self._end.mapped():
                await self._call.write(pb.PortInput(data=data[start : start + self.CHUNK]))

    async def shutdown_write(self) -> None:
        if not self._write_shut:
            self._write_shut = True
            # The end of the client's stream is the half-close (as close_write
            # is): one operation instead of a message and then the end.
            async with self._end.mapped():
                await self._call.done_writing()

    async def close(self) -> None:
        if not self._write_shut:
            self._write_shut = True
            # With interceptors (a token) grpc feeds writes through an async
            # generator of its own; ending it before the cancel keeps it from
            # being finalized while it still waits for a write.
            with contextlib.suppress(Exception):
                await self._call.done_writing()
        self._call.cancel()

"""The gRPC servicer: messages in, ``SandboxService`` calls, messages out.

Thin on purpose: no validation or semantics live here (the service has
them), and errors are mapped by ``status`` alone.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, TypeAlias, TypeVar

import grpc

from sandboxd.contract import convert
from sandboxd.contract.batch import BATCH_METADATA, says_batches
from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.models import DownloadDone, TreeDownloadDone
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.contract.v1 import sandbox_pb2_grpc as pb_grpc
from sandboxd.service.sandbox_service import SandboxService
from sandboxd.service.scope import current_scope
from sandboxd.transports.auth import Authenticator
from sandboxd.transports.grpc.client_stream import answered_after_the_stream
from sandboxd.transports.grpc.process_stream import ProcessConnection
from sandboxd.transports.grpc.status import streaming, unary
from sandboxd.transports.grpc.tool_stream import ToolCallStream, tool_callers

Context: TypeAlias = grpc.aio.ServicerContext
R = TypeVar("R")


class SandboxServicer(pb_grpc.SandboxServiceServicer):  # type: ignore[misc]
    def __init__(self, service: SandboxService, authenticator: Authenticator) -> None:
        self.service = service
        self.authenticator = authenticator
        self._tool_callers = tool_callers()

    @unary
    async def CreateSandbox(
        self, request: pb.CreateSandboxRequest, context: Context
    ) -> pb.CreateSandboxResponse:
        info, created = await self.service.create_sandbox(
            request.instance_id, convert.options_from_pb(request.options)
        )
        return pb.CreateSandboxResponse(sandbox=convert.info_to_pb(info), created=created)

    @unary
    async def GetSandbox(
        self, request: pb.GetSandboxRequest, context: Context
    ) -> pb.GetSandboxResponse:
        info = await self.service.get_sandbox(request.instance_id)
        return pb.GetSandboxResponse(sandbox=convert.info_to_pb(info))

    @unary
    async def ListSandboxes(
        self, request: pb.ListSandboxesRequest, context: Context
    ) -> pb.ListSandboxesResponse:
        found = await self.service.list_sandboxes(dict(request.label_selector))
        return pb.ListSandboxesResponse(sandboxes=[convert.info_to_pb(i) for i in found])

    @unary
    async def DeleteSandbox(
        self, request: pb.DeleteSandboxRequest, context: Context
    ) -> pb.DeleteSandboxResponse:
        await self.service.delete_sandbox(request.instance_id)
        return pb.DeleteSandboxResponse(deleted=True)

    @unary
    async def RestartSandbox(
        self, request: pb.RestartSandboxRequest, context: Context
    ) -> pb.RestartSandboxResponse:
        info = await self.service.restart_sandbox(request.instance_id)
        return pb.RestartSandboxResponse(sandbox=convert.info_to_pb(info))

    @unary
    async def GetStatus(
        self, request: pb.GetStatusRequest, context: Context
    ) -> pb.GetStatusResponse:
        return convert.status_to_pb(await self.service.get_status())

    @unary
    async def ReadFile(self, request: pb.ReadFileRequest, context: Context) -> pb.ReadFileResponse:
        result = await self.service.read_file(
            request.instance_id,
            request.path,
            request.offset,
            request.length if request.HasField("length") else None,
        )
        return pb.ReadFileResponse(data=result.data, size=result.size, eof=result.eof)

    @unary
    async def WriteFile(
        self, request: pb.WriteFileRequest, context: Context
    ) -> pb.WriteFileResponse:
        result = await self.service.write_file(
            request.instance_id,
            request.path,
            request.data,
            create_parents=request.create_parents,
            expected_sha256=request.expected_sha256
            if request.HasField("expected_sha256")
            else None,
            mode=request.mode if request.HasField("mode") else None,
        )
        return pb.WriteFileResponse(size=result.size, sha256=result.sha256, created=result.created)

    @unary
    async def Stat(self, request: pb.StatRequest, context: Context) -> pb.StatResponse:
        info = await self.service.stat(
            request.instance_id, request.path, follow_symlinks=request.follow_symlinks
        )
        return pb.StatResponse(info=convert.file_info_to_pb(info))

    @unary
    async def ListDir(self, request: pb.ListDirRequest, context: Context) -> pb.ListDirResponse:
        entries = await self.service.list_dir(request.instance_id, request.path)
        return pb.ListDirResponse(entries=[convert.file_info_to_pb(e) for e in entries])

    @unary
    async def Exists(self, request: pb.ExistsRequest, context: Context) -> pb.ExistsResponse:
        return convert.exists_to_pb(await self.service.exists(request.instance_id, request.path))

    @unary
    async def MakeDir(self, request: pb.MakeDirRequest, context: Context) -> pb.MakeDirResponse:
        created = await self.service.make_dir(
            request.instance_id, request.path, parents=request.parents, exist_ok=request.exist_ok
        )
        return pb.MakeDirResponse(created=created)

    @unary
    async def Remove(self, request: pb.RemoveRequest, context: Context) -> pb.RemoveResponse:
        removed = await self.service.remove(
            request.instance_id,
            request.path,
            recursive=request.recursive,
            missing_ok=request.missing_ok,
        )
        return pb.RemoveResponse(removed=removed)

    @unary
    async def Exec(self, request: pb.ExecRequest, context: Context) -> pb.ExecResponse:
        result = await self.service.exec(request.instance_id, convert.exec_request_from_pb(request))
        return convert.exec_result_to_pb(result)

    @streaming
    async def ExecStream(
        self, request: pb.ExecStreamRequest, context: Context
    ) -> AsyncIterator[pb.ExecStreamResponse]:
        exec_request = convert.exec_request_from_pb(request.exec)
        async for event in self.service.exec_stream(request.exec.instance_id, exec_request):
            yield convert.exec_event_to_pb(event)

    # ------------------------------------------------------------ tools

    @unary
    async def CallTool(self, request: pb.CallToolRequest, context: Context) -> pb.CallToolResponse:
        return await self._call_tool(request)

    async def _call_tool(self, request: pb.CallToolRequest) -> pb.CallToolResponse:
        # proto3 cannot tell an unset string from "": unset arguments are no arguments.
        result = await self.service.call_tool(
            request.instance_id,
            request.name,
            request.arguments_json or "{}",
            tool_call_id=request.tool_call_id or None,
            arguments_field="arguments_json",
            cwd=request.cwd or None,
        )
        return pb.CallToolResponse(
            text=result.text, is_error=result.is_error, fields_json=json.dumps(dict(result.fields))
        )

    @streaming  # one authenticated stream; each call maps its own errors into its answer
    async def ToolCalls(
        self, requests: AsyncIterator[pb.ToolCallsRequest], context: Context
    ) -> AsyncIterator[pb.ToolCallsResponse]:
        batch_answers = says_batches(context.invocation_metadata())
        # Said at once: the client may batch from its next request on.
        await context.send_initial_metadata((BATCH_METADATA,))
        with self._tool_callers.budget(current_scope()) as caller:
            async with ToolCallStream(
                self._call_tool, batch_answers=batch_answers, caller=caller
            ) as stream:
                async for answer in stream.serve(requests):
                    yield answer

    # ------------------------------------------------------------ processes

    @unary
    async def StartProcess(
        self, request: pb.StartProcessRequest, context: Context
    ) -> pb.ProcessInfo:
        info = await self.service.start_process(
            request.instance_id, convert.process_request_from_pb(request)
        )
        return convert.process_info_to_pb(info)

    @streaming
    async def ConnectProcess(
        self, requests: AsyncIterator[pb.ProcessInput], context: Context
    ) -> AsyncIterator[pb.ProcessOutput]:
        async for output in ProcessConnection(self.service).serve(requests):
            yield output

    @unary
    async def ResizeProcess(
        self, request: pb.ResizeProcessRequest, context: Context
    ) -> pb.ProcessInfo:
        info = await self.service.resize_process(
            request.instance_id, request.handle, request.size.rows, request.size.cols
        )
        return convert.process_info_to_pb(info)

    @unary
    async def SignalProcess(
        self, request: pb.SignalProcessRequest, context: Context
    ) -> pb.ProcessInfo:
        info = await self.service.signal_process(
            request.instance_id, request.handle, request.signal
        )
        return convert.process_info_to_pb(info)

    @unary
    async def ListProcesses(
        self, request: pb.ListProcessesRequest, context: Context
    ) -> pb.ListProcessesResponse:
        infos = await self.service.list_processes(request.instance_id)
        return pb.ListProcessesResponse(processes=[convert.process_info_to_pb(i) for i in infos])

    async def _typed_tool(self, name: str, request: Any, response_type: type[R]) -> R:
        result = await self.service.call_tool(
            request.instance_id,
            name,
            convert.tool_args_from_pb(request),
            tool_call_id=request.tool_call_id or None,
        )
        return convert.tool_response_to_pb(response_type, result)

    @unary
    async def Read(self, request: pb.ReadRequest, context: Context) -> pb.ReadResponse:
        return await self._typed_tool("read", request, pb.ReadResponse)

    @unary
    async def Write(self, request: pb.WriteRequest, context: Context) -> pb.WriteResponse:
        return await self._typed_tool("write", request, pb.WriteResponse)

    @unary
    async def Edit(self, request: pb.EditRequest, context: Context) -> pb.EditResponse:
        return await self._typed_tool("edit", request, pb.EditResponse)

    @unary
    async def Bash(self, request: pb.BashRequest, context: Context) -> pb.BashResponse:
        return await self._typed_tool("bash", request, pb.BashResponse)

    @unary
    async def Grep(self, request: pb.GrepRequest, context: Context) -> pb.GrepResponse:
        return await self._typed_tool("grep", request, pb.GrepResponse)

    @unary
    async def Glob(self, request: pb.GlobRequest, context: Context) -> pb.GlobResponse:
        return await self._typed_tool("glob", request, pb.GlobResponse)

    # ------------------------------------------------------------ tool contract

    @unary
    async def ListTools(
        self, request: pb.ListToolsRequest, context: Context
    ) -> pb.ListToolsResponse:
        return convert.tool_descriptions_to_pb(self.service.list_tools())

    # ------------------------------------------------------------ transfers

    @unary
    async def Upload(
        self, request: AsyncIterator[pb.UploadRequest], context: Context
    ) -> pb.UploadResponse:
        async with answered_after_the_stream(request):
            header = (await client_stream_header(request, "Upload")).header
            result = await self.service.upload_file(
                header.instance_id,
                header.path,
                client_stream_data(request),
                create_parents=header.create_parents,
                expected_sha256=(
                    header.expected_sha256 if header.HasField("expected_sha256") else None
                ),
                mode=header.mode if header.HasField("mode") else None,
            )
        return pb.UploadResponse(size=result.size, sha256=result.sha256, created=result.created)

    @streaming
    async def Download(
        self, request: pb.DownloadRequest, context: Context
    ) -> AsyncIterator[pb.DownloadResponse]:
        async for part in self.service.download_file(
            request.instance_id,
            request.path,
            request.offset,
            request.length if request.HasField("length") else None,
        ):
            if isinstance(part, DownloadDone):
                yield pb.DownloadResponse(
                    done=pb.DownloadDone(
                        size=part.size, sha256=part.sha256, file_size=part.file_size
                    )
                )
            else:
                yield pb.DownloadResponse(data=part)

    @unary
    async def UploadTree(
        self, request: AsyncIterator[pb.UploadTreeRequest], context: Context
    ) -> pb.UploadTreeResponse:
        async with answered_after_the_stream(request):
            header = (await client_stream_header(request, "UploadTree")).header
            result = await self.service.upload_tree(
                header.instance_id, header.path, client_stream_data(request)
            )
        return convert.tree_upload_to_pb(result)

    @streaming
    async def DownloadTree(
        self, request: pb.DownloadTreeRequest, context: Context
    ) -> AsyncIterator[pb.DownloadTreeResponse]:
        async for part in self.service.download_tree(
            request.instance_id, request.path, gitignore=request.gitignore
        ):
            if isinstance(part, TreeDownloadDone):
                yield pb.DownloadTreeResponse(
                    done=pb.DownloadTreeDone(
                        entries=part.entries, bytes=part.bytes, skipped=part.skipped
                    )
                )
            else:
                yield pb.DownloadTreeResponse(data=part)

    @unary
    async def ForkSandbox(
        self, request: pb.ForkSandboxRequest, context: Context
    ) -> pb.ForkSandboxResponse:
        result = await self.service.fork_sandbox(
            request.source_id, request.new_id, convert.options_from_pb(request.options)
        )
        answer: pb.ForkSandboxResponse = convert.copied_to_pb(result, pb.ForkSandboxResponse)
        return answer


async def client_stream_header(messages: AsyncIterator[Any], call: str) -> Any:
    """The first message of a client stream, which must carry the header."""
    try:
        first = await anext(messages)
    except StopAsyncIteration:
        raise InvalidArgument(f"{call}: the stream ended before its header") from None
    if first.WhichOneof("part") != "header":
        raise InvalidArgument(f"{call}: the first message must be the header")
    return first


async def client_stream_data(messages: AsyncIterable[Any]) -> AsyncIterator[bytes]:
    async for message in messages:
        if message.WhichOneof("part") != "data":
            raise InvalidArgument("only the first message of a stream may be a header")
        yield message.data

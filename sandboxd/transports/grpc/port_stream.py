"""``SandboxPorts``: a client's TCP connection to a server inside a sandbox.

Two flows share ``OpenPort``, each ending on its own like a TCP half-close:
the client's bytes go in one awaited write at a time (a server that never
reads holds back this call only), and the server's come out as the pipe
yields them, against the executor's credits and gRPC's own flow control (a
client that never reads holds back its own connection only). The call ends
when both directions have ended, or at once when either side aborts; the
connection inside is reset then.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc

from sandboxd.contract import convert
from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.contract.v1 import sandbox_pb2_grpc as pb_grpc
from sandboxd.service.forwarding import DEFAULT_PREVIEW_TTL_S
from sandboxd.service.ports import Pipe
from sandboxd.service.sandbox_service import SandboxService
from sandboxd.service.scope import current_scope
from sandboxd.transports.auth import Authenticator
from sandboxd.transports.grpc.port_mux import PortMuxStream, port_callers
from sandboxd.transports.grpc.status import streaming, unary

Context: TypeAlias = grpc.aio.ServicerContext


class PortsServicer(pb_grpc.SandboxPortsServicer):  # type: ignore[misc]
    def __init__(self, service: SandboxService, authenticator: Authenticator) -> None:
        self.service = service
        self.authenticator = authenticator
        self._port_callers = port_callers()

    @streaming
    async def OpenPort(
        self, requests: AsyncIterator[pb.PortInput], context: Context
    ) -> AsyncIterator[pb.PortOutput]:
        incoming = aiter(requests)
        first = await anext(incoming, None)
        if first is None:
            return
        if not first.instance_id or not first.port:
            raise InvalidArgument("the first PortInput must name instance_id and port")
        # Bytes in the first message go with the connect (no round trip of their own).
        pipe = await self.service.open_port(first.instance_id, first.port, first.host, first.data)
        writer = asyncio.create_task(_client_to_sandbox(pipe, first, incoming))
        try:
            # A compact client learns of the connection from its bytes, and
            # takes the end with the last of them: a small response is one
            # message instead of three.
            if not first.compact:
                yield pb.PortOutput(opened=True)
            while data := await pipe.read():
                if first.compact and pipe.at_eof:
                    yield pb.PortOutput(data=data, eof=True)
                    break
                yield pb.PortOutput(data=data)
            else:
                yield pb.PortOutput(eof=True)
            # The server ended its direction; the client's may go on.
            await writer
        finally:
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await writer
            await pipe.close()

    @streaming  # one authenticated stream; each connection's failure is its own answer
    async def OpenPorts(
        self, requests: AsyncIterator[pb.PortsInput], context: Context
    ) -> AsyncIterator[pb.PortsOutput]:
        # At once: the client learns the daemon has the RPC before its first connection.
        await context.send_initial_metadata(())
        with self._port_callers.budget(current_scope()) as caller:
            async with PortMuxStream(self.service.open_port, caller) as stream:
                async for answer in stream.serve(requests):
                    yield answer

    @unary
    async def CreatePreview(
        self, request: pb.CreatePreviewRequest, context: Context
    ) -> pb.CreatePreviewResponse:
        preview = await self.service.create_preview(
            request.instance_id, request.port, request.ttl_s or DEFAULT_PREVIEW_TTL_S
        )
        return convert.preview_to_pb(preview)

    @unary
    async def ListPorts(
        self, request: pb.ListPortsRequest, context: Context
    ) -> pb.ListPortsResponse:
        return convert.listening_ports_to_pb(await self.service.list_ports(request.instance_id))


async def _client_to_sandbox(
    pipe: Pipe, first: pb.PortInput, incoming: AsyncIterator[pb.PortInput]
) -> None:
    # The first message's bytes went with the connect.
    message = None if first.close_write else await anext(incoming, None)
    while message is not None:
        if message.data:
            await pipe.write(message.data)
        if message.close_write:
            break
        message = await anext(incoming, None)
    # close_write, or the client ended its side of the call: both are its end.
    await pipe.shutdown_write()

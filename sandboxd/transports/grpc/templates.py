"""The gRPC servicer of the Templates service: images built through the daemon."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc

from sandboxd.contract import convert
from sandboxd.contract.models import TemplateInfo
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.contract.v1 import sandbox_pb2_grpc as pb_grpc
from sandboxd.service.sandbox_service import SandboxService
from sandboxd.transports.auth import Authenticator
from sandboxd.transports.grpc.servicer import client_stream_data, client_stream_header
from sandboxd.transports.grpc.status import streaming

Context: TypeAlias = grpc.aio.ServicerContext


class TemplatesServicer(pb_grpc.TemplatesServicer):  # type: ignore[misc]
    def __init__(self, service: SandboxService, authenticator: Authenticator) -> None:
        self.service = service
        self.authenticator = authenticator

    @streaming
    async def BuildTemplate(
        self, request: AsyncIterator[pb.BuildTemplateRequest], context: Context
    ) -> AsyncIterator[pb.BuildTemplateResponse]:
        header = (await client_stream_header(request, "BuildTemplate")).header
        async for part in self.service.build_template(
            header.dockerfile, client_stream_data(request)
        ):
            yield _answer(part)

    @streaming
    async def TemplateFromSnapshot(
        self, request: pb.TemplateFromSnapshotRequest, context: Context
    ) -> AsyncIterator[pb.BuildTemplateResponse]:
        async for part in self.service.template_from_snapshot(request.name):
            yield _answer(part)


def _answer(part: str | TemplateInfo) -> pb.BuildTemplateResponse:
    if isinstance(part, str):
        return pb.BuildTemplateResponse(log=part)
    return pb.BuildTemplateResponse(done=convert.template_to_pb(part))

"""The gRPC servicer of the Lifetimes service: how long a sandbox lives."""

from __future__ import annotations

from typing import TypeAlias

import grpc

from sandboxd.contract import convert
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.contract.v1 import sandbox_pb2_grpc as pb_grpc
from sandboxd.service.sandbox_service import SandboxService
from sandboxd.transports.auth import Authenticator
from sandboxd.transports.grpc.status import unary

Context: TypeAlias = grpc.aio.ServicerContext


class LifetimesServicer(pb_grpc.LifetimesServicer):  # type: ignore[misc]
    def __init__(self, service: SandboxService, authenticator: Authenticator) -> None:
        self.service = service
        self.authenticator = authenticator

    @unary
    async def ExtendSandbox(
        self, request: pb.ExtendSandboxRequest, context: Context
    ) -> pb.ExtendSandboxResponse:
        info = await self.service.extend_sandbox(request.instance_id, request.seconds)
        return pb.ExtendSandboxResponse(sandbox=convert.info_to_pb(info))

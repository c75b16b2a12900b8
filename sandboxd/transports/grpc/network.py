"""The gRPC servicer of the Network service: a sandbox's policy after create, and its log."""

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


class NetworkServicer(pb_grpc.NetworkServicer):  # type: ignore[misc]
    def __init__(self, service: SandboxService, authenticator: Authenticator) -> None:
        self.service = service
        self.authenticator = authenticator

    @unary
    async def SetNetworkPolicy(
        self, request: pb.SetNetworkPolicyRequest, context: Context
    ) -> pb.SetNetworkPolicyResponse:
        policy = convert.policy_from_pb(request.policy)
        info = await self.service.set_network_policy(request.instance_id, policy)
        return pb.SetNetworkPolicyResponse(sandbox=convert.info_to_pb(info))

    @unary
    async def GetNetworkLog(
        self, request: pb.GetNetworkLogRequest, context: Context
    ) -> pb.GetNetworkLogResponse:
        entries = await self.service.network_log(request.instance_id, request.limit)
        return pb.GetNetworkLogResponse(entries=[convert.decision_to_pb(e) for e in entries])

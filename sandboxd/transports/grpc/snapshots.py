"""The gRPC servicer of the Snapshots service: named snapshots of a workspace."""

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


class SnapshotsServicer(pb_grpc.SnapshotsServicer):  # type: ignore[misc]
    def __init__(self, service: SandboxService, authenticator: Authenticator) -> None:
        self.service = service
        self.authenticator = authenticator

    @unary
    async def CreateSnapshot(
        self, request: pb.CreateSnapshotRequest, context: Context
    ) -> pb.CreateSnapshotResponse:
        snapshot = await self.service.create_snapshot(request.instance_id, request.name)
        return pb.CreateSnapshotResponse(snapshot=convert.snapshot_to_pb(snapshot))

    @unary
    async def ListSnapshots(
        self, request: pb.ListSnapshotsRequest, context: Context
    ) -> pb.ListSnapshotsResponse:
        found = await self.service.list_snapshots()
        return pb.ListSnapshotsResponse(snapshots=[convert.snapshot_to_pb(s) for s in found])

    @unary
    async def DeleteSnapshot(
        self, request: pb.DeleteSnapshotRequest, context: Context
    ) -> pb.DeleteSnapshotResponse:
        await self.service.delete_snapshot(request.name)
        return pb.DeleteSnapshotResponse()

    @unary
    async def RestoreSnapshot(
        self, request: pb.RestoreSnapshotRequest, context: Context
    ) -> pb.RestoreSnapshotResponse:
        result = await self.service.restore_snapshot(request.instance_id, request.name)
        answer: pb.RestoreSnapshotResponse = convert.copied_to_pb(
            result, pb.RestoreSnapshotResponse
        )
        return answer

    @unary
    async def CreateFromSnapshot(
        self, request: pb.CreateFromSnapshotRequest, context: Context
    ) -> pb.CreateFromSnapshotResponse:
        result = await self.service.create_from_snapshot(
            request.name, request.new_id, convert.options_from_pb(request.options)
        )
        answer: pb.CreateFromSnapshotResponse = convert.copied_to_pb(
            result, pb.CreateFromSnapshotResponse
        )
        return answer

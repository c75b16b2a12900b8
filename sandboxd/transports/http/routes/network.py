"""A sandbox's network policy after create, and its egress decisions (the Network service)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from sandboxd.contract.network import LOG_SIZE
from sandboxd.transports.http.deps import Service
from sandboxd.transports.http.routes.params import InstanceId
from sandboxd.transports.http.routes.responses import errors
from sandboxd.transports.http.schemas import (
    NetworkDecision,
    NetworkLogResponse,
    Sandbox,
    SetNetworkPolicyRequest,
)

router = APIRouter(prefix="/v1", tags=["network"])


@router.put(
    "/sandboxes/{instance_id}/network",
    name="SetNetworkPolicy",
    response_model=Sandbox,
    responses=errors(404),
)
async def set_network_policy(
    instance_id: InstanceId, body: SetNetworkPolicyRequest, service: Service
) -> Sandbox:
    """Replace the sandbox's policy (none <-> allow; to or from full is refused)."""
    info = await service.set_network_policy(instance_id, body.policy.to_model())
    return Sandbox.from_model(info)


@router.get(
    "/sandboxes/{instance_id}/network/log",
    name="GetNetworkLog",
    response_model=NetworkLogResponse,
    responses=errors(404),
)
async def get_network_log(
    instance_id: InstanceId,
    service: Service,
    limit: Annotated[int, Query(ge=0, le=LOG_SIZE, description="the newest this many; 0: all")] = 0,
) -> NetworkLogResponse:
    """The sandbox's recent egress decisions, oldest first."""
    entries = await service.network_log(instance_id, limit)
    return NetworkLogResponse(
        entries=[NetworkDecision.model_validate(entry.to_json()) for entry in entries]
    )

"""Probes and metrics: unauthenticated on purpose, since kubelets and
Prometheus scrapers rarely carry tokens; none of them reveals an instance id
or touches a workspace.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse

from sandboxd.observability import metrics
from sandboxd.transports.http.app_state import AppState
from sandboxd.transports.http.deps import app_state
from sandboxd.transports.http.schemas import Probe

log = logging.getLogger(__name__)

router = APIRouter(tags=["operations"])

State = Annotated[AppState, Depends(app_state)]

#: A slow engine must not hang a scrape; the instance gauge then keeps its last value.
INSTANCE_COUNT_TIMEOUT_S = 5.0


@router.get("/healthz", response_model=Probe)
async def healthz() -> Probe:
    """The process is alive and its event loop answers."""
    return Probe(status="ok")


@router.get("/readyz", response_model=Probe, responses={503: {"model": Probe}})
async def readyz(state: State) -> Response:
    """Ready: the backend started and every listener serves; not while draining."""
    ready = state.lifecycle.ready and not state.lifecycle.draining
    probe = Probe(status="ready" if ready else "not ready")
    return JSONResponse(probe.model_dump(), status_code=200 if ready else 503)


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def prometheus_metrics(state: State) -> Response:
    """Prometheus text format."""
    backend = state.service.backend
    metrics.set_pool(backend.pool_status())
    try:
        async with asyncio.timeout(INSTANCE_COUNT_TIMEOUT_S):
            found = await backend.list({})
        metrics.set_instances(info.state for info in found)
    except Exception as exc:  # a scrape must still answer when the engine does not
        log.warning("metrics: cannot count instances: %s", exc)
    return Response(metrics.render(), media_type=metrics.CONTENT_TYPE_LATEST)

"""The egress gateways as the service runs them (sandboxd.egress.gateways).

The registry (``service/network.py``) says which policy is in force and
tells the gateways of every change; the service tells them of every running
workspace it reaches (``ServiceCore._workspace``), so a gateway whose
executor restarted under it comes back with the next call. ``attach`` never
starts a stopped sandbox for its gateway: a stopped sandbox has no workload
to serve.
"""

from __future__ import annotations

from sandboxd.contract.errors import NotFound
from sandboxd.egress.gateways import Accepting, Gateways
from sandboxd.egress.intercept import Interceptor
from sandboxd.service.network import NetworkRegistry
from sandboxd.service.ports import WorkspaceBackend
from sandboxd.service.settings import ServiceSettings


def gateways_for(
    backend: WorkspaceBackend,
    settings: ServiceSettings,
    registry: NetworkRegistry,
    interceptor: Interceptor | None = None,
) -> Gateways:
    async def attach(instance_id: str) -> Accepting | None:
        try:
            info = await backend.get(instance_id)
        except NotFound:
            return None
        if info.state != "running":
            return None
        return await backend.workspace(instance_id)

    gateways = Gateways(
        registry,
        registry,
        settings.egress_resolver(),
        settings.egress_limits(),
        attach,
        interceptor=interceptor,
    )
    registry.on_change(gateways.changed)
    return gateways

"""What every part of the service stands on: the backend, the settings, the workspace lookup."""

from __future__ import annotations

from sandboxd.backends.shared.errors import unknown_instance
from sandboxd.contract import validation
from sandboxd.contract.errors import ResourceExhausted
from sandboxd.contract.models import SandboxInfo
from sandboxd.egress.book import SecretBook
from sandboxd.service.egress import gateways_for
from sandboxd.service.network import NetworkRegistry
from sandboxd.service.ports import Workspace, WorkspaceBackend
from sandboxd.service.quotas import Quotas
from sandboxd.service.scope import current_scope
from sandboxd.service.settings import ServiceSettings
from sandboxd.service.tombstones import Tombstones


class ServiceCore:
    """The state the service's parts share; ``SandboxService`` is all of them together."""

    def __init__(
        self,
        backend: WorkspaceBackend,
        settings: ServiceSettings,
        secrets: SecretBook | None = None,
    ) -> None:
        self.backend = backend
        self.settings = settings
        self.quotas = Quotas(settings)
        #: Sandboxes' secret values, for the egress gateway (service/secrets.py).
        self.secrets = secrets or SecretBook()
        #: Each sandbox's policy in force and its egress decisions (the gateway's).
        self.network = NetworkRegistry()
        #: One egress gateway per running sandbox in mode allow (service/egress.py).
        self.gateways = gateways_for(backend, settings, self.network)
        #: Why recently deleted sandboxes are gone (service/tombstones.py).
        self.tombstones = Tombstones()

    def forget_sandbox(self, instance_id: str) -> None:
        """Drop what the daemon holds in memory for a sandbox id: its secrets'
        values, its policy in force (its gateway stops) and its decision log.
        On every delete (the caller's and the lifetime keeper's) and before a
        new sandbox takes the id: placeholders are a function of the id, so an
        earlier sandbox's values must never serve the next one of that name."""
        self.secrets.drop(instance_id)
        self.network.forget(instance_id)
        self.tombstones.forget(instance_id)

    async def _owned(self, instance_id: str) -> SandboxInfo | None:
        """Check that the caller may touch ``instance_id``: its id rules, and for a
        tenant's token that the sandbox is the tenant's (another tenant's is
        NotFound, as if it did not exist). The sandbox's info when it was read."""
        validation.instance_id(instance_id)
        scope = current_scope()
        scope.check(instance_id)
        if scope.tenant is None:
            return None
        # Read from the engine on every call, not cached: an id deleted and
        # created again by another tenant (through any replica) changes hands.
        info = await self.backend.get(instance_id)
        if not scope.owns(info.options.labels):
            raise unknown_instance(instance_id)
        return info

    async def _workspace(self, instance_id: str) -> Workspace:
        await self._owned(instance_id)
        workspace = await self.backend.workspace(instance_id)
        # A gateway whose executor restarted under it comes back here.
        self.gateways.seen(instance_id, workspace)
        return workspace

    def _check_payload(self, size: int, field: str, *, streaming: str = "") -> None:
        limit = self.settings.max_payload_bytes
        if size > limit:
            advice = (
                f"send it with the streaming {streaming} call (runtime_client: "
                "Sandbox.upload; HTTP: PUT .../files/{path}:upload), which takes any size"
                if streaming
                else "send it in pieces"
            )
            raise ResourceExhausted(
                f"{field} is {size} bytes, over the payload limit of {limit} bytes "
                f"(SANDBOXD_MAX_PAYLOAD_BYTES); {advice}"
            )

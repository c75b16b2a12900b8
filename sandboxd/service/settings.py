"""The service's settings: exec time limits, over the workspace defaults it validates with
(and the egress gateways' it runs)."""

from __future__ import annotations

from pydantic import Field, SecretStr

from sandboxd.backends.shared.settings import WorkspaceSettings
from sandboxd.egress.settings import EgressSettings


class ServiceSettings(WorkspaceSettings, EgressSettings):
    exec_timeout_ms: int = Field(120_000, ge=1000, description="default exec timeout")
    max_exec_timeout_ms: int = Field(3_600_000, ge=1000, description="largest exec timeout")
    # Every tenant's quotas (service/quotas.py); 0: no quota. The operator's tokens have none.
    tenant_max_sandboxes: int = Field(0, ge=0, description="sandboxes a tenant may have at once")
    tenant_max_memory_bytes: int = Field(
        0, ge=0, description="total memory_bytes of a tenant's sandboxes"
    )
    tenant_max_cpus: float = Field(0.0, ge=0, description="total cpus of a tenant's sandboxes")
    tenant_max_disk_bytes: int = Field(
        0, ge=0, description="total disk_bytes of a tenant's sandboxes"
    )
    tenant_max_creates_per_minute: int = Field(
        0, ge=0, description="creates (and forks) a tenant may make in any 60 s"
    )
    template_max_context_bytes: int = Field(
        1 << 30,
        ge=1024,
        description="largest build context (the tar stream) BuildTemplate takes",
    )
    tenant_quotas: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="per-tenant quotas over the tenant_max_* ones, as JSON: "
        '{"acme": {"sandboxes": 20, "disk_bytes": 107374182400}} (names as GetStatus shows '
        "them: sandboxes, memory_bytes, cpus, disk_bytes, creates_per_minute; 0: none)",
    )
    lifetime_check_interval_s: float = Field(
        1.0,
        gt=0,
        le=60,
        description="how often sandboxes' lifetimes and stops are looked at (service/lifetimes.py)",
    )
    preview_secret: SecretStr | None = Field(
        None,
        description="key that signs preview tokens (share it between replicas); unset: a "
        "random key per daemon start (its tokens end with it)",
    )
    preview_domain: str | None = Field(
        None,
        pattern=r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?$",
        description="host-based previews: {port}-{id}.<preview_domain> on the HTTP listener "
        "(a wildcard DNS name pointing at it), e.g. preview.example.com",
    )
    preview_max_ttl_s: int = Field(
        86_400, ge=60, description="longest life of a preview token or signed URL"
    )

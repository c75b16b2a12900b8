"""Quotas per tenant: how many sandboxes, how much memory, CPU and disk, how many creates a minute.

Use is derived from the sandboxes' labels (their tenant and effective
options, as the engine keeps them), never counted in daemon memory: a
restarted daemon, or a replica, sees the same use. The one exception is the
rate of creates, which also remembers this daemon's creates of the last
minute whose sandboxes are already gone (so create-delete loops are counted
too); across replicas, the rate is what each saw plus what the labels show.

A tenant's creates are taken one at a time (``guard``), so two creates
cannot both fit in the last free place. Over a quota: RESOURCE_EXHAUSTED
naming the quota, its limit, the use, and the setting that holds it.
Tokens without a tenant (the operator's) have no quota.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sandboxd.contract.errors import InvalidArgument, QuotaExceeded
from sandboxd.contract.models import QuotaUse, SandboxInfo, SandboxOptions, TenantUsage
from sandboxd.service.scope import TENANT_LABEL
from sandboxd.service.settings import ServiceSettings

WINDOW_S = 60.0


@dataclass(frozen=True)
class Quota:
    #: What it counts (``QuotaUse.name``).
    name: str
    #: The settings attribute holding every tenant's limit (0: none).
    setting: str


QUOTAS: tuple[Quota, ...] = (
    Quota("sandboxes", "tenant_max_sandboxes"),
    Quota("memory_bytes", "tenant_max_memory_bytes"),
    Quota("cpus", "tenant_max_cpus"),
    Quota("disk_bytes", "tenant_max_disk_bytes"),
    Quota("creates_per_minute", "tenant_max_creates_per_minute"),
)


def _show(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


class Quotas:
    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self._guards: dict[str, asyncio.Lock] = {}
        self._recent: dict[str, collections.deque[float]] = {}
        known = {quota.name for quota in QUOTAS}
        for tenant, limits in settings.tenant_quotas.items():
            unknown = sorted(set(limits) - known)
            if unknown or any(value < 0 for value in limits.values()):
                raise InvalidArgument(
                    f"tenant_quotas[{tenant!r}]: {', '.join(unknown) or 'a negative limit'} "
                    f"is not a quota; use {', '.join(sorted(known))} (0 or more)"
                )

    def guard(self, tenant: str) -> asyncio.Lock:
        return self._guards.setdefault(tenant, asyncio.Lock())

    def limit(self, quota: Quota, tenant: str) -> float:
        """The tenant's own limit (SANDBOXD_TENANT_QUOTAS), else every tenant's."""
        own = self.settings.tenant_quotas.get(tenant, {})
        return float(
            own[quota.name] if quota.name in own else getattr(self.settings, quota.setting)
        )

    def use(
        self, tenant: str, sandboxes: Iterable[SandboxInfo], now: float, stored: int = 0
    ) -> dict[str, float]:
        """What the tenant uses; ``stored``: the bytes of its snapshots (disk too)."""
        mine = [s for s in sandboxes if s.options.labels.get(TENANT_LABEL) == tenant]
        since = (now - WINDOW_S) * 1000
        by_labels = sum(1 for s in mine if s.created_at_ms >= since)
        recent = self._recent.get(tenant, collections.deque())
        while recent and recent[0] < now - WINDOW_S:
            recent.popleft()
        return {
            "sandboxes": len(mine),
            "memory_bytes": sum(s.options.memory_bytes for s in mine),
            "cpus": sum(s.options.cpus for s in mine),
            "disk_bytes": sum(s.options.disk_bytes for s in mine) + stored,
            "creates_per_minute": max(by_labels, len(recent)),
        }

    def check(self, tenant: str, use: dict[str, float], wanted: SandboxOptions) -> None:
        """Refuse a new sandbox with ``wanted`` options that would go over a quota."""
        asks = {
            "sandboxes": 1,
            "memory_bytes": wanted.memory_bytes,
            "cpus": wanted.cpus,
            "disk_bytes": wanted.disk_bytes,
            "creates_per_minute": 1,
        }
        self._check(tenant, use, asks, "this create")

    def check_stored(self, tenant: str, use: dict[str, float], size: int) -> None:
        """Refuse a new snapshot of ``size`` bytes over the tenant's disk quota."""
        self._check(tenant, use, {"disk_bytes": size}, "this snapshot")

    def _check(self, tenant: str, use: dict[str, float], asks: dict[str, float], what: str) -> None:
        for quota in QUOTAS:
            limit = self.limit(quota, tenant)
            if quota.name in asks and limit and use[quota.name] + asks[quota.name] > limit:
                own = quota.name in self.settings.tenant_quotas.get(tenant, {})
                setting = "SANDBOXD_TENANT_QUOTAS" if own else f"SANDBOXD_{quota.setting.upper()}"
                raise QuotaExceeded(
                    f"tenant {tenant!r} is at its {quota.name} quota: limit "
                    f"{_show(limit)}, in use {_show(use[quota.name])}, {what} asks "
                    f"{_show(asks[quota.name])} ({setting})"
                )

    def created(self, tenant: str, now: float | None = None) -> None:
        self._recent.setdefault(tenant, collections.deque()).append(
            time.time() if now is None else now
        )

    def usage(
        self,
        tenants: Iterable[str],
        sandboxes: list[SandboxInfo],
        stored: Mapping[str, int] | None = None,
    ) -> list[TenantUsage]:
        """Use against quota per tenant; ``stored``: its snapshots' bytes, by tenant."""
        now = time.time()
        found = []
        for tenant in sorted(set(tenants)):
            use = self.use(tenant, sandboxes, now, (stored or {}).get(tenant, 0))
            found.append(
                TenantUsage(
                    tenant,
                    tuple(QuotaUse(q.name, use[q.name], self.limit(q, tenant)) for q in QUOTAS),
                )
            )
        return found

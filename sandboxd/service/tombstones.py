"""Why a sandbox is gone: a short, bounded memory of deleted sandboxes.

A deleted sandbox stays NOT_FOUND, as before (clients and their "is it
gone?" checks rely on that status); for ``KEEP_S`` after the delete, that
answer says when and why (``termination_reason``: deleted, lifetime, idle,
...), to its own tenant only: another tenant's NOT_FOUND says nothing of an
id it never had. Deletes by the caller and by the lifetime keeper are kept.

Bounded whatever callers do: at most ``PER_TENANT`` per tenant (the oldest
go first), so a caller that creates and deletes millions of ids holds that
many, and at most ``TENANTS`` tenants (the least recently written go). In
daemon memory only: a restart forgets them, as nothing of a deleted
sandbox is kept by the engine, and each replica knows the deletes it saw.
A new sandbox of the id ends its tombstone.
"""

from __future__ import annotations

import datetime
from collections import OrderedDict
from dataclasses import dataclass

from sandboxd.contract.errors import NotFound

#: How long a tombstone is kept (ms), how many per tenant, how many tenants.
KEEP_MS = 15 * 60 * 1000
PER_TENANT = 256
TENANTS = 1024


@dataclass(frozen=True)
class Tombstone:
    reason: str  # a TerminationReason
    deleted_at_ms: int

    def said(self, error: NotFound, now_ms: int) -> NotFound:
        """``error`` (the engine's NotFound) with when and why the sandbox went."""
        when = datetime.datetime.fromtimestamp(self.deleted_at_ms / 1000, datetime.timezone.utc)
        head, sep, tail = str(error).partition(";")
        ago = max(now_ms - self.deleted_at_ms, 0) // 1000
        return NotFound(
            f"{head}: deleted {ago} s ago, at {when:%Y-%m-%dT%H:%M:%SZ} "
            f"(termination_reason: {self.reason}){sep}{tail}"
        )


class Tombstones:
    def __init__(self) -> None:
        # tenant ("" for the operator's sandboxes) -> instance id -> tombstone, oldest first.
        self._by_tenant: OrderedDict[str, OrderedDict[str, Tombstone]] = OrderedDict()

    def __len__(self) -> int:
        return sum(len(kept) for kept in self._by_tenant.values())

    def bury(self, tenant: str, instance_id: str, reason: str, now_ms: int) -> None:
        kept = self._by_tenant.pop(tenant, None) or OrderedDict()
        self._by_tenant[tenant] = kept  # the most recently written tenant last
        kept.pop(instance_id, None)
        kept[instance_id] = Tombstone(reason, now_ms)
        while len(kept) > PER_TENANT:
            kept.popitem(last=False)
        while len(self._by_tenant) > TENANTS:
            self._by_tenant.popitem(last=False)
        self._expire(now_ms)

    def forget(self, instance_id: str) -> None:
        """A new sandbox of this id: what was said of an earlier one no longer holds."""
        for kept in self._by_tenant.values():
            kept.pop(instance_id, None)

    def find(self, tenant: str | None, instance_id: str, now_ms: int) -> Tombstone | None:
        """``instance_id``'s tombstone in ``tenant`` (None: the operator, any tenant's)."""
        self._expire(now_ms)
        tenants = self._by_tenant.values() if tenant is None else [self._by_tenant.get(tenant)]
        for kept in tenants:
            if kept is not None and instance_id in kept:
                return kept[instance_id]
        return None

    def _expire(self, now_ms: int) -> None:
        for tenant in list(self._by_tenant):
            kept = self._by_tenant[tenant]
            while kept and next(iter(kept.values())).deleted_at_ms <= now_ms - KEEP_MS:
                kept.popitem(last=False)
            if not kept:
                del self._by_tenant[tenant]

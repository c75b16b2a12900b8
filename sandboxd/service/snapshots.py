"""Named snapshots: take one of a sandbox, list and delete them, restore one in
place, make a new sandbox from one.

A snapshot belongs to the caller's tenant (the operator's: tenant "") and
is found by name within it; another tenant's is NotFound, as for sandboxes.
The engine keeps it (``WorkspaceBackend.snapshot``), so it outlives the
daemon; its bytes count against the tenant's disk quota, checked once the
copy has been measured (the size of a tree is known after copying it): over
the quota, the new snapshot is removed and the call refused.
"""

from __future__ import annotations

import dataclasses
import time

from sandboxd.backends.shared.options import RESERVED_LABEL_PREFIX, overridden
from sandboxd.backends.shared.snapshots import unknown
from sandboxd.contract import validation
from sandboxd.contract.errors import AlreadyExists
from sandboxd.contract.models import ForkResult, SandboxOptions, SnapshotInfo
from sandboxd.service.lifecycle import Lifecycle
from sandboxd.service.scope import TENANT_LABEL, current_scope


def _tenant() -> str:
    return current_scope().tenant or ""


class Snapshots(Lifecycle):
    async def create_snapshot(self, instance_id: str, name: str) -> SnapshotInfo:
        """Snapshot ``instance_id``'s files (and options) under ``name``."""
        validation.snapshot_name(name)
        await self._owned(instance_id)
        tenant = current_scope().tenant
        if tenant is None:
            return await self.backend.snapshot(instance_id, name, "")
        async with self.quotas.guard(tenant):
            use = self.quotas.use(
                tenant,
                await self.backend.list({TENANT_LABEL: tenant}),
                time.time(),
                await self._stored(tenant),
            )
            snapshot = await self.backend.snapshot(instance_id, name, tenant)
            try:
                self.quotas.check_stored(tenant, use, snapshot.size_bytes)
            except BaseException:
                await self.backend.delete_snapshot(name, tenant)
                raise
            return snapshot

    async def list_snapshots(self) -> list[SnapshotInfo]:
        return list(await self.backend.snapshots(_tenant()))

    async def delete_snapshot(self, name: str) -> None:
        validation.snapshot_name(name)
        await self.backend.delete_snapshot(name, _tenant())

    async def restore_snapshot(self, instance_id: str, name: str) -> ForkResult:
        """Replace the sandbox's files by the snapshot's (its processes restart)."""
        validation.snapshot_name(name)
        await self._owned(instance_id)
        result = await self.backend.restore(instance_id, name, _tenant())
        return dataclasses.replace(result, sandbox=await self._described(result.sandbox))

    async def create_from_snapshot(
        self, name: str, new_id: str, options: SandboxOptions | None = None
    ) -> ForkResult:
        """A new sandbox with the snapshot's options (``options``' set fields
        replace them) and its files."""
        validation.snapshot_name(name)
        validation.instance_id(new_id)
        current_scope().check(new_id)
        snapshot = await self._snapshot(name)
        # The stored options carry the source's tenant label, the daemon's own:
        # the new sandbox gets its creator's (create_sandbox adds it). Secrets
        # are stored without their values: the caller gives them again.
        kept = {
            key: value
            for key, value in snapshot.options.labels.items()
            if not key.startswith(RESERVED_LABEL_PREFIX)
        }
        base = dataclasses.replace(snapshot.options, labels=kept, secrets=())
        requested = overridden(base, options or SandboxOptions())
        info, created = await self.create_sandbox(new_id, requested)
        if not created:
            raise AlreadyExists(
                f"sandbox {new_id!r} already exists; create from a snapshot onto a new id"
            )
        try:
            return await self.restore_snapshot(new_id, name)
        except BaseException:
            await self.delete_sandbox(info.instance_id)
            raise

    async def _snapshot(self, name: str) -> SnapshotInfo:
        for snapshot in await self.backend.snapshots(_tenant()):
            if snapshot.name == name:
                return snapshot
        raise unknown(name)

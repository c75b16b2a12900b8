"""Create, find, list, restart, fork and delete sandboxes; the daemon's status."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Mapping

from sandboxd import __version__
from sandboxd.backends.shared.options import effective, overridden
from sandboxd.contract import validation
from sandboxd.contract.errors import AlreadyExists, InvalidArgument, NotFound
from sandboxd.contract.models import (
    ForkResult,
    NetworkPolicy,
    SandboxInfo,
    SandboxOptions,
    ServerStatus,
    TenantUsage,
    TerminationReason,
)
from sandboxd.service import secrets
from sandboxd.service.lifetimes import Lifetimes
from sandboxd.service.network import validated
from sandboxd.service.scope import TENANT_LABEL, Scope, check_caller_labels, current_scope


def _in_tenant(options: SandboxOptions, scope: Scope) -> SandboxOptions:
    """``options`` with the caller's tenant label added (the caller may not set it)."""
    check_caller_labels(options.labels)
    if scope.tenant is None:
        return options
    return dataclasses.replace(options, labels={**options.labels, **scope.tenant_labels()})


def _taken(instance_id: str) -> AlreadyExists:
    # Ids are one namespace per daemon: that this one is taken is all a tenant learns.
    return AlreadyExists(f"instance id {instance_id!r} is in use; choose another")


class Lifecycle(Lifetimes):
    async def create_sandbox(
        self, instance_id: str, options: SandboxOptions | None = None
    ) -> tuple[SandboxInfo, bool]:
        validation.instance_id(instance_id)
        scope = current_scope()
        scope.check(instance_id)
        requested = secrets.with_placeholders(
            self.secrets, instance_id, options or SandboxOptions()
        )
        # Defaults and option rules are the service's, the same for every backend.
        wanted = effective(_in_tenant(requested, scope), self.settings)
        scope.check_network(validated(wanted.network or NetworkPolicy()))
        if scope.tenant is not None and not scope.owns(await self._labels_of(instance_id)):
            # Before the backend's create: that would start another tenant's stopped sandbox.
            raise _taken(instance_id)
        async with self._within_quota(scope, instance_id, wanted):
            info, created = await self.backend.create(instance_id, requested, wanted)
        if not scope.owns(info.options.labels):
            raise _taken(instance_id)
        if created:  # a new sandbox of this id: nothing of an earlier one's carries over
            self.forget_sandbox(instance_id)
        # Only a create that names secrets touches them: a create of an existing
        # id without any (a client's "create or get") leaves the values in place.
        if requested.secrets:
            workspace = await self.backend.workspace(instance_id)
            await secrets.deliver(self.secrets, workspace, instance_id, requested.secrets)
        info = await (self._note_created(info) if created else self._described(info))
        self.network.set(
            instance_id, info.options.network or NetworkPolicy(), self._known_now(info)
        )
        await self.gateways.ready(instance_id)
        return info, created

    @contextlib.asynccontextmanager
    async def _within_quota(
        self, scope: Scope, instance_id: str, wanted: SandboxOptions
    ) -> AsyncIterator[None]:
        """Hold the tenant's creates one at a time while a new sandbox is checked
        against its quotas and made (an existing id is no new sandbox)."""
        tenant = scope.tenant
        if tenant is None:
            yield
            return
        async with self.quotas.guard(tenant):
            mine = await self.backend.list({TENANT_LABEL: tenant})
            if all(info.instance_id != instance_id for info in mine):
                use = self.quotas.use(tenant, mine, time.time(), await self._stored(tenant))
                self.quotas.check(tenant, use, wanted)
                yield
                self.quotas.created(tenant)
            else:
                yield

    async def _stored(self, tenant: str) -> int:
        """The bytes of the tenant's snapshots: its disk quota counts them."""
        return sum(snapshot.size_bytes for snapshot in await self.backend.snapshots(tenant))

    async def _labels_of(self, instance_id: str) -> Mapping[str, str]:
        """An existing sandbox's labels; a free id's are its creator's to be."""
        try:
            return (await self.backend.get(instance_id)).options.labels
        except NotFound:
            return current_scope().tenant_labels()

    async def get_sandbox(self, instance_id: str) -> SandboxInfo:
        try:
            info = await self._owned(instance_id) or await self.backend.get(instance_id)
        except NotFound as exc:
            raise self._gone(instance_id, exc) from None
        return await self._described(info)

    async def list_sandboxes(
        self, label_selector: Mapping[str, str] | None = None
    ) -> list[SandboxInfo]:
        selector = dict(label_selector or {})
        validation.labels(selector, "label_selector")
        scope = current_scope()
        tenant = scope.tenant_labels()
        if any(selector.get(key, value) != value for key, value in tenant.items()):
            return []  # another tenant's label: none of this caller's sandboxes has it
        selector.update(tenant)
        return await self._described_all(
            [
                info
                for info in await self.backend.list(selector)
                if scope.allows(info.instance_id) and scope.owns(info.options.labels)
            ]
        )

    async def delete_sandbox(self, instance_id: str) -> None:
        try:
            info = await self._owned(instance_id)
        except NotFound as exc:
            raise self._gone(instance_id, exc) from None
        if info is None:
            # Its owner's tenant keeps the tombstone: read for the operator too,
            # but a sandbox the engine lost part of (its container removed
            # outside sandboxd) cannot be read and is still deleted (its volume).
            with contextlib.suppress(NotFound):
                info = await self.backend.get(instance_id)
        try:
            await self.backend.delete(instance_id)
        except NotFound as exc:
            raise self._gone(instance_id, exc) from None
        self.forget_sandbox(instance_id)
        await self._forget(instance_id)
        if info is not None:
            self.bury(info, TerminationReason.DELETED)

    async def restart_sandbox(self, instance_id: str) -> SandboxInfo:
        await self._owned(instance_id)
        info = await self._described(await self.backend.restart(instance_id))
        # The executor is new: so is its gateway, listening before this returns.
        await self.gateways.restarted(instance_id)
        return info

    async def fork_sandbox(
        self, source_id: str, new_id: str, options: SandboxOptions | None = None
    ) -> ForkResult:
        """A new instance whose workspace starts as a consistent copy of the source's."""
        validation.instance_id(new_id)
        scope = current_scope()
        await self._owned(source_id)
        scope.check(new_id)
        if source_id == new_id:
            raise InvalidArgument("a fork needs a new instance id, not the source's own")
        override = options or SandboxOptions()
        # The fork keeps the source's labels (its tenant among them) unless the
        # caller sets labels of its own: then the tenant is added to those.
        check_caller_labels(override.labels)
        if override.labels:
            override = _in_tenant(override, scope)
        if override.disk_bytes:
            raise InvalidArgument("a fork keeps its source's disk_bytes (its disk is copied)")
        if override.secrets:
            # Nor does it inherit the source's values: its placeholders stay placeholders.
            raise InvalidArgument(
                "a fork takes no secrets (and gets none of its source's values); "
                "create a new sandbox with the secrets it needs"
            )
        source = await self._described(await self.backend.get(source_id))
        if override.network is None:
            # The policy in force now (SetNetworkPolicy may have changed it), not the first.
            override = dataclasses.replace(override, network=source.options.network)
        wanted = effective(overridden(source.options, override), self.settings)
        scope.check_network(validated(wanted.network or NetworkPolicy()))
        async with self._within_quota(scope, new_id, wanted):
            result = await self.backend.fork(source_id, new_id, override)
        self.forget_sandbox(new_id)
        forked = await self._note_created(result.sandbox)
        self.network.set(new_id, forked.options.network or NetworkPolicy(), self._known_now(forked))
        await self.gateways.ready(new_id)
        return dataclasses.replace(result, sandbox=forked)

    async def get_status(self) -> ServerStatus:
        return ServerStatus(
            version=__version__,
            backend=self.backend.name,
            namespace=self.settings.namespace,
            pool=self.backend.pool_status(),
            runtimes=tuple(await self.backend.runtimes()),
            disk=self.backend.disk_limit(),
            tenants=tuple(await self._tenant_usage()),
        )

    async def _tenant_usage(self) -> list[TenantUsage]:
        scope = current_scope()
        sandboxes = await self.backend.list(scope.tenant_labels())
        if scope.tenant is not None:
            tenants = {scope.tenant}
        else:
            tenants = {info.options.labels.get(TENANT_LABEL, "") for info in sandboxes} - {""}
        stored = {tenant: await self._stored(tenant) for tenant in tenants}
        return self.quotas.usage(tenants, sandboxes, stored)

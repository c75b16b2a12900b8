"""How long sandboxes live: their end, why they stopped, and the keeper that acts on both.

Every timer is a note kept with the sandbox by its engine (``read_marks`` /
``write_marks``: labels of an engine object, never daemon memory), so a
restarted daemon, or another replica, keeps the same time:

- ``max_lifetime_seconds``: the sandbox ends ``expires_at_ms`` (written at
  create, moved by ``ExtendSandbox``; before the note is written, creation
  time + lifetime, which is never later). At its end the keeper deletes it;
  until the delete is done it is listed ``expired``.
- ``idle_ttl_seconds``: the engine stops it, as before; the keeper notes
  when it first saw it stopped and why (``TerminationReason``), so the reason
  outlives the daemon that saw it.
- ``delete_after_stopped_seconds``: a stopped sandbox is deleted this long
  after it was first seen stopped.

The keeper looks every ``lifetime_check_interval_s`` (1 s): an end is kept
to within that and the time a delete takes. Notes carry the creation time
of the sandbox they belong to, so a note left by an earlier sandbox of the
same id never applies to a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping

from sandboxd.contract.errors import InvalidArgument, NotFound, SandboxdError
from sandboxd.contract.models import NetworkPolicy, SandboxInfo, TerminationReason
from sandboxd.service.core import ServiceCore
from sandboxd.service.ports import WorkspaceBackend
from sandboxd.service.quotas import Quotas
from sandboxd.service.scope import TENANT_LABEL, current_scope
from sandboxd.service.settings import ServiceSettings

log = logging.getLogger(__name__)

#: The notes' keys (what ``write_marks`` keeps for the service).
CREATED = "created_at_ms"  # which sandbox of this id the notes are about
EXPIRES = "expires_at_ms"
STOPPED = "stopped_at_ms"  # when the keeper first saw it stopped
REASON = "reason"
#: The network policy set after create (SetNetworkPolicy), as JSON: it wins
#: over the one the sandbox was created with (service/netpolicy.py).
NETWORK = "network"
NETWORK_SET = "network_set_at_ms"  # when: which of two replicas' reads is newer

Clock = Callable[[], float]  # seconds since the epoch


def now_ms(clock: Clock) -> int:
    return int(clock() * 1000)


def notes_for(info: SandboxInfo, marks: Mapping[str, str] | None) -> dict[str, str]:
    """The notes that belong to this sandbox (not to an earlier one of its id)."""
    if not marks or marks.get(CREATED) != str(info.created_at_ms):
        return {}
    return dict(marks)


def expires_at(info: SandboxInfo, notes: Mapping[str, str]) -> int:
    if EXPIRES in notes:
        return int(notes[EXPIRES])
    lifetime = info.options.max_lifetime_seconds
    return info.created_at_ms + lifetime * 1000 if lifetime else 0


def network_version(info: SandboxInfo, notes: Mapping[str, str]) -> tuple[int, int]:
    """(created_at_ms, set-at ms) of the policy ``described`` puts in force:
    0 for the one the sandbox was created with."""
    try:
        return info.created_at_ms, int(notes.get(NETWORK_SET, 0))
    except ValueError:
        return info.created_at_ms, 0


def described(info: SandboxInfo, notes: Mapping[str, str], now: int) -> SandboxInfo:
    """``info`` with its end, its network policy in force, and for a stopped or
    expired sandbox why."""
    if NETWORK in notes:
        try:
            policy = NetworkPolicy.from_json(json.loads(notes[NETWORK]))
        except (ValueError, SandboxdError):  # edited by hand: fail closed
            log.warning("sandbox %s: unreadable network note; mode none", info.instance_id)
            policy = NetworkPolicy()
        info = dataclasses.replace(info, options=dataclasses.replace(info.options, network=policy))
    end = expires_at(info, notes)
    if end and now >= end:
        return dataclasses.replace(
            info, expires_at_ms=end, state="expired", termination_reason=TerminationReason.LIFETIME
        )
    reason = ""
    if info.state != "running":
        reason = notes.get(REASON) or info.termination_reason
    return dataclasses.replace(info, expires_at_ms=end, termination_reason=reason)


class Lifetimes(ServiceCore):
    """The service's part: each sandbox's end in what it reports, and ExtendSandbox."""

    clock: Clock = staticmethod(time.time)

    def _known_now(self, info: SandboxInfo) -> tuple[int, int]:
        """The version of a policy just read for ``info``: newer than any read
        made before (see ``NetworkRegistry.refresh``)."""
        return info.created_at_ms, now_ms(self.clock)

    def bury(self, info: SandboxInfo, reason: str) -> None:
        """Keep, for a while, why the sandbox ``info`` was deleted (service/tombstones.py)."""
        tenant = info.options.labels.get(TENANT_LABEL, "")
        self.tombstones.bury(tenant, info.instance_id, reason, now_ms(self.clock))

    def _gone(self, instance_id: str, error: NotFound) -> NotFound:
        """``error``, or what a tombstone of the caller's says of the id."""
        now = now_ms(self.clock)
        found = self.tombstones.find(current_scope().tenant, instance_id, now)
        return error if found is None else found.said(error, now)

    async def _described(self, info: SandboxInfo) -> SandboxInfo:
        marks = await self.backend.read_marks(info.instance_id)
        return described(info, notes_for(info, marks.get(info.instance_id)), now_ms(self.clock))

    async def _described_all(self, infos: list[SandboxInfo]) -> list[SandboxInfo]:
        if not infos:
            return infos
        marks = await self.backend.read_marks()
        now = now_ms(self.clock)
        return [described(i, notes_for(i, marks.get(i.instance_id)), now) for i in infos]

    async def _note_created(self, info: SandboxInfo) -> SandboxInfo:
        """Write a new sandbox's end: from now, not from when a pooled container was made."""
        lifetime = info.options.max_lifetime_seconds
        if not lifetime:
            return info
        end = now_ms(self.clock) + lifetime * 1000
        await self.backend.write_marks(
            info.instance_id, {CREATED: str(info.created_at_ms), EXPIRES: str(end)}
        )
        return dataclasses.replace(info, expires_at_ms=end)

    async def _forget(self, instance_id: str) -> None:
        await self.backend.write_marks(instance_id, {})

    async def extend_sandbox(self, instance_id: str, seconds: int) -> SandboxInfo:
        """The sandbox ends ``seconds`` from now instead (at most the daemon's ceiling)."""
        ceiling = self.settings.max_lifetime_ceiling_seconds
        if not 0 < seconds <= ceiling:
            raise InvalidArgument(
                f"seconds must be between 1 and this daemon's maximum lifetime of {ceiling} "
                f"(SANDBOXD_MAX_LIFETIME_CEILING_SECONDS), got {seconds}"
            )
        info = await self._owned(instance_id) or await self.backend.get(instance_id)
        marks = await self.backend.read_marks(instance_id)
        notes = notes_for(info, marks.get(instance_id))
        now = now_ms(self.clock)
        end = expires_at(info, notes)
        if end and now >= end:
            raise NotFound(f"sandbox {instance_id!r} has expired and is being deleted")
        notes.update({CREATED: str(info.created_at_ms), EXPIRES: str(now + seconds * 1000)})
        await self.backend.write_marks(instance_id, notes)
        return described(info, notes, now)


class LifetimeKeeper:
    """Deletes sandboxes whose time is up and notes why others stopped, every
    ``lifetime_check_interval_s``; one per daemon (replicas each run one: a
    second delete of the same sandbox is a NotFound, ignored)."""

    def __init__(
        self,
        backend: WorkspaceBackend,
        settings: ServiceSettings,
        clock: Clock = time.time,
        quotas: Quotas | None = None,
        forget: Callable[[str], None] | None = None,
        bury: Callable[[SandboxInfo, str], None] | None = None,
        refresh_network: Callable[[str, NetworkPolicy, tuple[int, int]], None] | None = None,
    ) -> None:
        self.backend = backend
        #: Told each id it deleted (the service's ``forget_sandbox``: secrets, policy, log).
        self.forget = forget
        #: Told each sandbox it deleted and why (the service's ``bury``: its tombstone).
        self.bury = bury
        #: Told each sandbox's policy as the engine keeps it (the registry's
        #: ``refresh``): one set through another replica is in force here
        #: within a sweep.
        self.refresh_network = refresh_network
        self.interval = settings.lifetime_check_interval_s
        self.clock = clock
        self.quotas = quotas or Quotas(settings)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="lifetime-keeper")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.sweep()
            except SandboxdError as exc:  # the engine away: try again next time
                log.warning("lifetime keeper: %s", exc)
            except Exception:  # a bug must not end the keeper, nor the daemon's stop
                log.exception("lifetime keeper: sweep failed")
            await asyncio.sleep(self.interval)

    async def sweep(self) -> list[tuple[str, str]]:
        """One look at every sandbox; the (id, reason) of each one deleted."""
        # Notes first: a sandbox created after this read has notes this sweep
        # does not see, so they are never taken for a deleted sandbox's.
        marks = await self.backend.read_marks()
        infos = await self.backend.list({})
        now = now_ms(self.clock)
        deleted = []
        for info in infos:
            notes = notes_for(info, marks.get(info.instance_id))
            if self.refresh_network is not None:
                policy = described(info, notes, now).options.network or NetworkPolicy()
                self.refresh_network(info.instance_id, policy, network_version(info, notes))
            end = expires_at(info, notes)
            if end and now >= end:
                await self._delete(info, TerminationReason.LIFETIME)
                deleted.append((info.instance_id, str(TerminationReason.LIFETIME)))
                continue
            if info.state == "running":
                if STOPPED in notes:  # started again: its stop is history
                    kept = {k: v for k, v in notes.items() if k not in (STOPPED, REASON)}
                    await self.backend.write_marks(
                        info.instance_id, kept if set(kept) - {CREATED} else {}
                    )
                continue
            if STOPPED not in notes:
                notes.update(
                    {
                        CREATED: str(info.created_at_ms),
                        STOPPED: str(now),
                        REASON: info.termination_reason or TerminationReason.EXITED,
                    }
                )
                await self.backend.write_marks(info.instance_id, notes)
            after = info.options.delete_after_stopped_seconds
            if after and now >= int(notes[STOPPED]) + after * 1000:
                await self._delete(info, notes[REASON])
                deleted.append((info.instance_id, notes[REASON]))
        for orphan in set(marks) - {info.instance_id for info in infos}:
            await self.backend.write_marks(orphan, {})
        await self._publish_usage(infos)
        return deleted

    async def _publish_usage(self, infos: list[SandboxInfo]) -> None:
        """Each tenant's use against its quotas on /metrics (the same numbers as
        GetStatus: its snapshots' bytes in its disk use too)."""
        try:
            # The server extra's: a local factory runs this service in a
            # client's process (Python 3.10 too), without it and without /metrics.
            from sandboxd.observability import metrics
        except ImportError:
            return
        tenants = {info.options.labels.get(TENANT_LABEL, "") for info in infos} - {""}
        stored = {
            tenant: sum(s.size_bytes for s in await self.backend.snapshots(tenant))
            for tenant in tenants
        }
        metrics.TENANT_USE.clear()
        metrics.TENANT_QUOTA.clear()
        for usage in self.quotas.usage(tenants, infos, stored):
            for quota in usage.quotas:
                metrics.TENANT_USE.labels(usage.tenant, quota.name).set(quota.used)
                metrics.TENANT_QUOTA.labels(usage.tenant, quota.name).set(quota.limit)

    async def _delete(self, info: SandboxInfo, reason: str) -> None:
        log.info("sandbox %s: deleted (%s)", info.instance_id, reason)
        with contextlib.suppress(NotFound):
            await self.backend.delete(info.instance_id)
        if self.forget is not None:
            self.forget(info.instance_id)
        if self.bury is not None:
            self.bury(info, reason)
        await self.backend.write_marks(info.instance_id, {})

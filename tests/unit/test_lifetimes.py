"""Lifetimes on a fake clock: max_lifetime, idle stops, delete_after_stopped, ExtendSandbox.

The backend here is a fake that only keeps what a real one keeps (the
sandboxes and their notes), so a "daemon restart" is a new service and a new
keeper over the same backend: nothing of the timers may live in them.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Iterator, Mapping

import pytest

from sandboxd.backends.shared.errors import unknown_instance
from sandboxd.contract.errors import InvalidArgument, NotFound
from sandboxd.contract.models import SandboxInfo, SandboxOptions, TerminationReason
from sandboxd.daemon.settings import Settings
from sandboxd.service import tombstones
from sandboxd.service.lifetimes import LifetimeKeeper
from sandboxd.service.sandbox_service import SandboxService
from sandboxd.service.scope import Scope, enter_scope, leave_scope

pytestmark = [pytest.mark.unit, pytest.mark.anyio]

T0 = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class WorkspaceFake:
    """Env secrets need nothing of a workspace; a gateway finds no pipes (it ends)."""

    async def accept_pipes(self, listeners: object) -> AsyncIterator[tuple[str, object]]:
        return
        yield


class EngineFake:
    """What an engine keeps: sandboxes (their state) and the service's notes."""

    name = "fake"

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.sandboxes: dict[str, SandboxInfo] = {}
        self.marks: dict[str, dict[str, str]] = {}

    async def create(
        self, instance_id: str, requested: SandboxOptions, wanted: SandboxOptions
    ) -> tuple[SandboxInfo, bool]:
        if instance_id in self.sandboxes:
            return self.sandboxes[instance_id], False
        info = SandboxInfo(instance_id, "running", "c", "v", wanted, int(self.clock() * 1000))
        self.sandboxes[instance_id] = info
        return info, True

    async def get(self, instance_id: str) -> SandboxInfo:
        if instance_id not in self.sandboxes:
            raise unknown_instance(instance_id)
        return self.sandboxes[instance_id]

    async def list(self, label_selector: Mapping[str, str]) -> list[SandboxInfo]:
        return sorted(self.sandboxes.values(), key=lambda info: info.instance_id)

    async def delete(self, instance_id: str) -> None:
        if self.sandboxes.pop(instance_id, None) is None:
            raise unknown_instance(instance_id)

    async def read_marks(self, instance_id: str | None = None) -> dict[str, dict[str, str]]:
        if instance_id is None:
            return {k: dict(v) for k, v in self.marks.items()}
        return {instance_id: dict(self.marks[instance_id])} if instance_id in self.marks else {}

    async def write_marks(self, instance_id: str, marks: Mapping[str, str]) -> None:
        if marks:
            self.marks[instance_id] = dict(marks)
        else:
            self.marks.pop(instance_id, None)

    async def workspace(self, instance_id: str) -> WorkspaceFake:
        return WorkspaceFake()

    async def snapshots(self, tenant: str) -> list[object]:
        return []  # a tenant's disk quota counts them

    def stop(self, instance_id: str, reason: str) -> None:
        info = self.sandboxes[instance_id]
        self.sandboxes[instance_id] = dataclasses.replace(
            info, state="stopped", termination_reason=reason
        )

    def start_again(self, instance_id: str) -> None:
        info = self.sandboxes[instance_id]
        self.sandboxes[instance_id] = dataclasses.replace(
            info, state="running", termination_reason=""
        )


class Daemon:
    """The service and keeper a daemon runs: made afresh by a "restart"."""

    def __init__(self, engine: EngineFake, clock: Clock, **settings: object) -> None:
        config = Settings(backend="local", **settings)  # type: ignore[arg-type]
        self.service = SandboxService(engine, config)  # type: ignore[arg-type]
        self.service.clock = clock
        self.keeper = LifetimeKeeper(
            engine,  # type: ignore[arg-type]
            config,
            clock,
            forget=self.service.forget_sandbox,
            bury=self.service.bury,
            refresh_network=self.service.network.refresh,
        )


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(clock: Clock) -> EngineFake:
    return EngineFake(clock)


async def test_a_lifetime_ends_on_time_and_the_sandbox_is_deleted(
    engine: EngineFake, clock: Clock
) -> None:
    daemon = Daemon(engine, clock)
    info, _ = await daemon.service.create_sandbox("a", SandboxOptions(max_lifetime_seconds=5))
    assert info.expires_at_ms == int(T0 * 1000) + 5000
    clock.now = T0 + 4.999
    assert await daemon.keeper.sweep() == []
    assert (await daemon.service.get_sandbox("a")).state == "running"
    clock.now = T0 + 5
    expired = await daemon.service.get_sandbox("a")  # before the keeper's next look
    assert (expired.state, expired.termination_reason) == ("expired", "lifetime")
    assert await daemon.keeper.sweep() == [("a", "lifetime")]
    assert engine.sandboxes == {} and engine.marks == {}


async def test_the_end_survives_a_daemon_restart(engine: EngineFake, clock: Clock) -> None:
    first = Daemon(engine, clock)
    await first.service.create_sandbox("a", SandboxOptions(max_lifetime_seconds=5))
    clock.now = T0 + 3
    await first.service.extend_sandbox("a", 10)  # now ends at T0 + 13
    # The daemon is gone, expiry passes while it is down: a new one deletes at once.
    clock.now = T0 + 20
    second = Daemon(engine, clock)
    listed = await second.service.list_sandboxes()
    assert [(i.state, i.expires_at_ms) for i in listed] == [("expired", int(T0 * 1000) + 13_000)]
    assert await second.keeper.sweep() == [("a", "lifetime")]


async def test_extend_moves_the_end_within_the_ceiling(engine: EngineFake, clock: Clock) -> None:
    daemon = Daemon(engine, clock, max_lifetime_ceiling_seconds=60)
    await daemon.service.create_sandbox("a", SandboxOptions(max_lifetime_seconds=5))
    clock.now = T0 + 4
    extended = await daemon.service.extend_sandbox("a", 10)
    assert extended.expires_at_ms == int((T0 + 14) * 1000)
    clock.now = T0 + 6
    assert await daemon.keeper.sweep() == []
    for seconds in (0, -1, 61):
        with pytest.raises(InvalidArgument, match="SANDBOXD_MAX_LIFETIME_CEILING_SECONDS"):
            await daemon.service.extend_sandbox("a", seconds)
    with pytest.raises(InvalidArgument, match="max_lifetime_seconds 61 is over"):
        await daemon.service.create_sandbox("b", SandboxOptions(max_lifetime_seconds=61))
    clock.now = T0 + 14
    with pytest.raises(NotFound, match="has expired"):
        await daemon.service.extend_sandbox("a", 10)
    assert await daemon.keeper.sweep() == [("a", "lifetime")]


async def test_no_lifetime_without_one_asked_or_defaulted(engine: EngineFake, clock: Clock) -> None:
    daemon = Daemon(engine, clock)
    info, _ = await daemon.service.create_sandbox("a")
    assert info.expires_at_ms == 0
    clock.now = T0 + 10**8
    assert await daemon.keeper.sweep() == []
    defaulted = Daemon(engine, clock, max_lifetime_seconds=30)
    info, _ = await defaulted.service.create_sandbox("b")
    assert info.expires_at_ms == int((T0 + 10**8 + 30) * 1000)


async def test_a_note_without_its_end_falls_back_to_creation_time(
    engine: EngineFake, clock: Clock
) -> None:
    """A daemon killed between the create and its note: the end is creation + lifetime
    (never later), and a note of an earlier sandbox of the same id does not apply."""
    daemon = Daemon(engine, clock)
    options = SandboxOptions(max_lifetime_seconds=5)
    await engine.create("a", options, options)
    engine.marks["a"] = {"created_at_ms": "1", "expires_at_ms": str(int(T0 * 1000) + 99_000)}
    clock.now = T0 + 5
    assert await daemon.keeper.sweep() == [("a", "lifetime")]


async def test_a_stop_is_noted_with_its_reason_and_deleted_after(
    engine: EngineFake, clock: Clock
) -> None:
    first = Daemon(engine, clock)
    options = SandboxOptions(idle_ttl_seconds=2, delete_after_stopped_seconds=10)
    await first.service.create_sandbox("a", options)
    clock.now = T0 + 3
    engine.stop("a", TerminationReason.IDLE)
    assert await first.keeper.sweep() == []
    assert engine.marks["a"]["reason"] == "idle"
    # A restarted engine backend no longer knows it parked the sandbox: the note does.
    engine.stop("a", "")
    clock.now = T0 + 12.9
    second = Daemon(engine, clock)
    info = await second.service.get_sandbox("a")
    assert (info.state, info.termination_reason) == ("stopped", "idle")
    assert await second.keeper.sweep() == []
    clock.now = T0 + 13
    assert await second.keeper.sweep() == [("a", "idle")]
    assert engine.sandboxes == {} and engine.marks == {}


async def test_a_sandbox_started_again_forgets_its_stop(engine: EngineFake, clock: Clock) -> None:
    daemon = Daemon(engine, clock)
    await daemon.service.create_sandbox("a", SandboxOptions(delete_after_stopped_seconds=10))
    engine.stop("a", TerminationReason.OUT_OF_MEMORY)
    await daemon.keeper.sweep()
    assert (await daemon.service.get_sandbox("a")).termination_reason == "out_of_memory"
    clock.now = T0 + 5
    engine.start_again("a")
    await daemon.keeper.sweep()
    assert "a" not in engine.marks
    assert (await daemon.service.get_sandbox("a")).termination_reason == ""
    clock.now = T0 + 100
    assert await daemon.keeper.sweep() == []  # it runs: delete_after_stopped does not apply


async def test_notes_of_deleted_sandboxes_are_removed(engine: EngineFake, clock: Clock) -> None:
    daemon = Daemon(engine, clock)
    await daemon.service.create_sandbox("a", SandboxOptions(max_lifetime_seconds=50))
    await daemon.service.create_sandbox("b", SandboxOptions(max_lifetime_seconds=50))
    await daemon.service.delete_sandbox("a")
    assert set(engine.marks) == {"b"}
    await engine.delete("b")  # behind the service's back
    await daemon.keeper.sweep()
    assert engine.marks == {}


async def test_a_policy_set_later_survives_a_restart_a_stop_and_an_extend(
    engine: EngineFake, clock: Clock
) -> None:
    """SetNetworkPolicy's policy is a note kept by the engine: a new daemon
    reads it back, the keeper keeps it across a stop and a start, ExtendSandbox
    keeps it; a bad rule changes nothing."""
    from sandboxd.contract.models import NetworkPolicy

    first = Daemon(engine, clock)
    await first.service.create_sandbox("a", SandboxOptions(max_lifetime_seconds=60))
    allow = NetworkPolicy("allow", ("pypi.org",))
    assert (await first.service.set_network_policy("a", allow)).options.network == allow
    assert first.service.network.current("a") == allow
    engine.stop("a", TerminationReason.IDLE)
    await first.keeper.sweep()
    engine.start_again("a")
    await first.keeper.sweep()  # started again: the stop notes go, the policy stays
    await first.service.extend_sandbox("a", 30)
    second = Daemon(engine, clock)
    assert second.service.network.current("a") == NetworkPolicy()  # not yet restored
    assert await second.service.restore_network() == 1
    assert second.service.network.current("a") == allow
    assert (await second.service.get_sandbox("a")).options.network == allow
    with pytest.raises(InvalidArgument, match="'pypi org'"):
        await second.service.set_network_policy("a", NetworkPolicy("allow", ("pypi org",)))
    # What a rule means is the gateway's parser's to say (egress.rules.parse_rule).
    with pytest.raises(InvalidArgument, match=r"network.allow: network rule 'pypi.org:x': port"):
        await second.service.set_network_policy("a", NetworkPolicy("allow", ("pypi.org:x",)))
    assert (await second.service.get_sandbox("a")).options.network == allow  # unchanged


async def test_nothing_of_a_deleted_sandbox_serves_the_next_one_of_its_id(
    engine: EngineFake, clock: Clock
) -> None:
    """A secret's placeholder is a function of the id and the name: the values of
    a sandbox the keeper deleted (or the engine lost) must not serve the next
    sandbox of that id, whoever creates it. How checked: without the keeper's
    ``forget`` (and without the forget on a new create) the book still holds
    the first sandbox's value and these asserts fail."""
    from sandboxd.contract.models import NetworkDecision, NetworkPolicy
    from sandboxd.contract.secrets import Secret

    daemon = Daemon(engine, clock)
    allow = NetworkPolicy("allow", ("api.example.com",))
    token = Secret("TOKEN", "s3cr3t-value", ("api.example.com",), env="TOKEN")
    options = SandboxOptions(max_lifetime_seconds=5, network=allow, secrets=(token,))
    await daemon.service.create_sandbox("a", options)
    daemon.service.network.record("a", NetworkDecision(1, "x", 1, "", False, "", "r"))
    assert daemon.service.secrets.names("a") == ("TOKEN",)
    clock.now = T0 + 5
    assert await daemon.keeper.sweep() == [("a", "lifetime")]
    assert daemon.service.secrets.names("a") == ()
    assert daemon.service.secrets.for_host("a", "api.example.com") == {}
    assert daemon.service.network.current("a") == NetworkPolicy()
    assert daemon.service.network.entries("a") == []
    # The engine loses a sandbox behind the daemon's back; the id is made anew.
    await daemon.service.create_sandbox("b", SandboxOptions(network=allow, secrets=(token,)))
    del engine.sandboxes["b"]
    await daemon.service.create_sandbox("b", SandboxOptions(network=allow))
    assert daemon.service.secrets.for_host("b", "api.example.com") == {}


# ------------------------------------------------------------ tombstones


@contextlib.contextmanager
def _as_tenant(tenant: str | None) -> Iterator[None]:
    token = enter_scope(Scope(tenant=tenant))
    try:
        yield
    finally:
        leave_scope(token)


async def test_a_deleted_sandbox_is_not_found_saying_when_and_why(
    engine: EngineFake, clock: Clock
) -> None:
    daemon = Daemon(engine, clock)
    await daemon.service.create_sandbox("a")
    await daemon.service.delete_sandbox("a")
    clock.now = T0 + 60
    with pytest.raises(
        NotFound,
        match=r"^no sandbox with instance id 'a': deleted 60 s ago, at .*Z "
        r"\(termination_reason: deleted\); create it with CreateSandbox$",
    ):
        await daemon.service.get_sandbox("a")
    with pytest.raises(NotFound, match=r"termination_reason: deleted"):
        await daemon.service.delete_sandbox("a")  # a second delete says so too
    # Kept for a while only: then the plain answer.
    clock.now = T0 + tombstones.KEEP_MS / 1000 + 1
    with pytest.raises(NotFound, match=r"^no sandbox with instance id 'a'; create"):
        await daemon.service.get_sandbox("a")
    assert len(daemon.service.tombstones) == 0
    # A new sandbox of the id is no longer "deleted".
    await daemon.service.create_sandbox("b")
    await daemon.service.delete_sandbox("b")
    await daemon.service.create_sandbox("b")
    assert (await daemon.service.get_sandbox("b")).state == "running"
    assert len(daemon.service.tombstones) == 0


async def test_the_keeper_s_deletes_say_lifetime_or_the_stop_s_reason(
    engine: EngineFake, clock: Clock
) -> None:
    daemon = Daemon(engine, clock)
    await daemon.service.create_sandbox("short", SandboxOptions(max_lifetime_seconds=5))
    await daemon.service.create_sandbox(
        "parked", SandboxOptions(idle_ttl_seconds=1, delete_after_stopped_seconds=10)
    )
    engine.stop("parked", TerminationReason.IDLE)
    await daemon.keeper.sweep()
    clock.now = T0 + 11
    assert sorted(await daemon.keeper.sweep()) == [("parked", "idle"), ("short", "lifetime")]
    with pytest.raises(NotFound, match=r"'short': deleted 0 s ago.*termination_reason: lifetime"):
        await daemon.service.get_sandbox("short")
    with pytest.raises(NotFound, match=r"termination_reason: idle"):
        await daemon.service.get_sandbox("parked")
    # Daemon memory only: a restarted daemon answers as before.
    with pytest.raises(NotFound, match=r"^no sandbox with instance id 'short'; create"):
        await Daemon(engine, clock).service.get_sandbox("short")


async def test_a_tombstone_is_its_tenant_s_alone(engine: EngineFake, clock: Clock) -> None:
    daemon = Daemon(engine, clock)
    with _as_tenant("t1"):
        await daemon.service.create_sandbox("mine")
    with _as_tenant(None):  # the operator deletes it: its tenant is told
        await daemon.service.delete_sandbox("mine")
    with (
        _as_tenant("t2"),
        pytest.raises(NotFound, match=r"^no sandbox with instance id 'mine'; create"),
    ):
        await daemon.service.get_sandbox("mine")
    with _as_tenant("t1"), pytest.raises(NotFound, match=r"termination_reason: deleted"):
        await daemon.service.get_sandbox("mine")
    with _as_tenant(None), pytest.raises(NotFound, match=r"termination_reason: deleted"):
        await daemon.service.get_sandbox("mine")


def test_tombstones_are_bounded_however_many_ids_come_and_go() -> None:
    kept = tombstones.Tombstones()
    now = int(T0 * 1000)
    kept.bury("other", "theirs", "deleted", now)
    for n in range(20_000):  # one tenant creating and deleting ids without end
        kept.bury("busy", f"id-{n}", "deleted", now)
    assert len(kept) == tombstones.PER_TENANT + 1
    assert kept.find("busy", "id-0", now) is None  # the oldest went first
    assert kept.find("busy", "id-19999", now) is not None
    assert kept.find("other", "theirs", now) is not None  # not pushed out by another tenant
    for n in range(3 * tombstones.TENANTS):
        kept.bury(f"tenant-{n}", "x", "deleted", now)
    assert len(kept) <= tombstones.TENANTS * tombstones.PER_TENANT
    assert kept.find(None, "theirs", now) is None  # the least recently written tenants went
    assert sum(1 for _ in kept._by_tenant) == tombstones.TENANTS


async def test_a_policy_set_through_one_replica_is_in_force_on_the_other_within_a_sweep(
    engine: EngineFake, clock: Clock
) -> None:
    """Replicas serve one sandbox at once: a policy set through one must not
    stay unknown to the other (whose gateway may be the one the workload
    reaches next), and a read made before a change never undoes it."""
    from sandboxd.contract.models import NetworkPolicy

    first, second = Daemon(engine, clock), Daemon(engine, clock)
    await first.service.create_sandbox("a", SandboxOptions())
    await second.keeper.sweep()
    assert second.service.network.current("a") == NetworkPolicy()
    clock.now += 1
    allow = NetworkPolicy("allow", ("pypi.org",))
    await first.service.set_network_policy("a", allow)
    assert second.service.network.current("a") == NetworkPolicy()  # until its next look
    await second.keeper.sweep()
    assert second.service.network.current("a") == allow
    await first.keeper.sweep()
    assert first.service.network.current("a") == allow
    # A read of the notes from before the change (a sweep's snapshot) is older: ignored.
    created = (await first.service.get_sandbox("a")).created_at_ms
    first.service.network.refresh("a", NetworkPolicy(), (created, 0))
    assert first.service.network.current("a") == allow
    # Back the other way: narrowed on the second, the first follows.
    clock.now += 1
    await second.service.set_network_policy("a", NetworkPolicy())
    await first.keeper.sweep()
    assert first.service.network.current("a") == NetworkPolicy()
    # A new sandbox of the id is newer than any note of the old one.
    await first.service.delete_sandbox("a")
    await first.service.create_sandbox("a", SandboxOptions(network=allow))
    first.service.network.refresh("a", NetworkPolicy(), (created, 10**15))
    assert first.service.network.current("a") == allow

"""The ping before a call on a quiet channel (backends.shared.session):
a channel whose executor died unnoticed costs the call nothing — the ping
finds it dead, the workspace reconnects, and the call goes out once, on the
new channel. Fakes for the channel; the engines' side is
tests/hostile/test_dead_executor.py."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest

from sandboxd.backends.shared.session import PROBE_AFTER_IDLE_S, Activity, ChannelCalls
from sandboxd.contract.errors import SandboxUnavailable, Timeout

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


class _Channel:
    def __init__(self, name: str, *, dead: bool = False, wedged: bool = False) -> None:
        self.name = name
        self.dead = dead
        self.wedged = wedged
        self.closed = False
        self.sent: list[str] = []

    async def call(
        self, op: str, args: Mapping[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        self.sent.append(op)
        if self.dead:
            # What a stream the engine has not closed yet does: the bytes go
            # out, then the end arrives.
            self.closed = True
            raise SandboxUnavailable(f"workspace {self.name}: the executor channel closed")
        if self.wedged and op == "ping":
            raise Timeout("ping got no answer")
        return {"op": op}


class _Workspace(ChannelCalls):
    def __init__(self, first: _Channel) -> None:
        self.activity = Activity(idle_ttl_seconds=0)
        self.channels = [first]
        self.connects = 0

    async def ensure_running(self) -> Any:
        if self.channels[-1].closed:
            self.connects += 1
            self.channels.append(_Channel(f"new-{self.connects}"))
        return self.channels[-1]


def _quiet_for(workspace: _Workspace, seconds: float) -> None:
    workspace.activity.last_used = time.monotonic() - seconds


async def test_a_call_after_a_quiet_spell_on_a_dead_channel_runs_once_on_a_new_one() -> None:
    dead = _Channel("old", dead=True)
    workspace = _Workspace(dead)
    _quiet_for(workspace, PROBE_AFTER_IDLE_S + 1)
    assert await workspace.call("tool", {"name": "bash"}) == {"op": "tool"}
    assert dead.sent == ["ping"]  # the call itself never went to the dead channel
    assert workspace.channels[-1].sent == ["tool"] and workspace.connects == 1


async def test_without_the_quiet_spell_no_ping_and_the_dead_channel_fails_the_call() -> None:
    # Back-to-back calls pay nothing; the price is that a death within the
    # last second is met by the call (which may have run: never resent).
    dead = _Channel("old", dead=True)
    workspace = _Workspace(dead)
    _quiet_for(workspace, PROBE_AFTER_IDLE_S / 10)
    with pytest.raises(SandboxUnavailable):
        await workspace.call("tool", {"name": "bash"})
    assert dead.sent == ["tool"] and workspace.connects == 0


async def test_a_live_channel_answers_the_ping_and_takes_the_call() -> None:
    live = _Channel("live")
    workspace = _Workspace(live)
    _quiet_for(workspace, PROBE_AFTER_IDLE_S + 1)
    await workspace.call("read_file", {})
    assert live.sent == ["ping", "read_file"] and workspace.connects == 0


async def test_a_wedged_executor_still_gets_the_call() -> None:
    wedged = _Channel("wedged", wedged=True)
    workspace = _Workspace(wedged)
    _quiet_for(workspace, PROBE_AFTER_IDLE_S + 1)
    await workspace.call("read_file", {})
    assert wedged.sent == ["ping", "read_file"]


async def test_calls_in_flight_make_the_channel_busy_not_quiet() -> None:
    live = _Channel("live")
    workspace = _Workspace(live)
    _quiet_for(workspace, PROBE_AFTER_IDLE_S + 1)
    with workspace.activity.busy():
        await workspace.call("read_file", {})
    assert live.sent == ["read_file"]

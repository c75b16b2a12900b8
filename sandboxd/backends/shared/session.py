"""What a container engine's workspace does the same on every engine: the
executor's hello, how long a call may take, a check of a quiet channel
before a call goes out on it, and when a workspace is idle."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn, Protocol

from sandboxd.backends.shared.channel import ExecutorChannel
from sandboxd.backends.shared.proxy_env import proxy_env
from sandboxd.backends.shared.settings import EGRESS_CA_CERT, ContainerSettings
from sandboxd.contract.errors import SandboxdError, SandboxUnavailable, Timeout
from sandboxd.contract.models import SandboxOptions
from sandboxd.contract.tools import BASH_MAX_TIMEOUT_S
from sandboxd.executor.bundle import bundle_id
from sandboxd.executor.wire import PROTOCOL_VERSION

log = logging.getLogger(__name__)

#: Slack on top of an operation's own timeout before the daemon gives up on it.
CALL_GRACE_S = 30.0
DEFAULT_CALL_TIMEOUT_S = 300.0
#: bash's own largest timeout: the daemon never gives up before it.
MAX_BASH_TIMEOUT_S = BASH_MAX_TIMEOUT_S
#: A channel unused this long is pinged before a call goes out on it.
PROBE_AFTER_IDLE_S = 1.0
#: How long the ping may take before the call goes out regardless.
PROBE_TIMEOUT_S = 5.0


def timeout_for(op: str, args: Mapping[str, Any]) -> float:
    if op == "exec":
        timeout_ms = args.get("timeout_ms") or 0
        if isinstance(timeout_ms, int) and timeout_ms > 0:
            return timeout_ms / 1000 + CALL_GRACE_S
    if op == "tool" and args.get("name") == "bash":
        return MAX_BASH_TIMEOUT_S + CALL_GRACE_S
    return DEFAULT_CALL_TIMEOUT_S


def bridged(options: SandboxOptions) -> bool:
    """The container is on the engine's network (mode full): no proxy in between."""
    return options.network is not None and options.network.bridged


def hello_args(options: SandboxOptions, settings: ContainerSettings) -> dict[str, Any]:
    args = {
        "workdir": options.workdir or "/workspace",
        "max_payload_bytes": settings.max_payload_bytes,
        "max_output_bytes": settings.max_output_bytes,
        "read_guard": not options.disable_read_guard,
        # The workload's environment: never the container's (the executor's).
        # Its egress proxies first (a caller's own values win): none and allow
        # both, so a policy changed to allow later finds new processes ready.
        "env": {**({} if bridged(options) else proxy_env()), **options.env},
        "allow_ptrace": bool(options.allow_ptrace),
    }
    ca = trust_pem(settings.state_dir / EGRESS_CA_CERT)
    if ca is not None:
        # The workload trusts the daemon's egress CA (executor/trust.py).
        args["trust"] = ca
    return args


def trust_pem(path: Path) -> str | None:
    """The egress CA certificate, once read per change of the file; None without one."""
    try:
        return _read_pem(path, path.stat().st_mtime_ns)
    except OSError:
        return None


@functools.lru_cache(maxsize=4)
def _read_pem(path: Path, mtime_ns: int) -> str:
    return path.read_text(encoding="ascii")


async def handshake(
    channel: ExecutorChannel,
    options: SandboxOptions,
    settings: ContainerSettings,
    timeout: float,
) -> dict[str, Any] | None:
    """The executor's hello reply, if it is this daemon's executor; else None."""
    try:
        hello = await channel.call("hello", hello_args(options, settings), timeout=timeout)
    except SandboxdError as exc:
        log.info("workspace %s: no hello: %s", channel.name, exc)
        return None
    ours = bundle_id(bytecode=settings.ship_bytecode)
    if hello.get("protocol") == PROTOCOL_VERSION and hello.get("bundle") == ours:
        return hello
    return None


class Activity:
    """Calls in flight and the last use: what idle stop goes by."""

    def __init__(self, idle_ttl_seconds: int) -> None:
        self.idle_ttl_seconds = idle_ttl_seconds
        self.last_used = time.monotonic()
        self.in_flight = 0
        self.parked = False  # stopped for idleness; the next call starts it

    @contextlib.contextmanager
    def busy(self) -> Iterator[float]:
        """A call in flight; yields how long the workspace was unused before it."""
        now = time.monotonic()
        unused_for = 0.0 if self.in_flight else now - self.last_used
        self.in_flight += 1
        self.last_used = now
        try:
            yield unused_for
        finally:
            self.in_flight -= 1
            self.last_used = time.monotonic()

    def idle_expired(self, now: float) -> bool:
        ttl = self.idle_ttl_seconds
        return bool(ttl) and not self.parked and self.in_flight == 0 and now - self.last_used >= ttl


class _Connectable(Protocol):
    activity: Activity

    async def ensure_running(self) -> ExecutorChannel: ...


class _Reconnecting(Protocol):
    """What an engine's workspace keeps of its channel and how it makes one."""

    activity: Activity
    _channel: ExecutorChannel | None
    _connecting: asyncio.Lock

    async def _drop_channel(self) -> None: ...

    async def _connect(self) -> ExecutorChannel: ...


class ChannelCalls:
    """``call``/``stream``/``idle_expired``/``ensure_running`` of a workspace
    that has ``activity`` and makes its channel (``_connect``).

    A call must not be the one that finds out the executor died: the call
    would fail (it may have run, so it is never sent again), and only the next
    one would start the container anew. On an engine whose stream outlives the
    executor until something is written (Docker's attach, as under gVisor) that
    was every first call after an executor's death. So a channel unused for
    ``PROBE_AFTER_IDLE_S`` is pinged first: the ping has no effect, so when it
    finds the channel dead the workspace reconnects and the call goes out once,
    on the live channel. Back-to-back calls pay nothing.
    """

    #: The workspace's (each engine sets it): its channel, while it has one.
    _channel: ExecutorChannel | None

    async def call(self: _Connectable, op: str, args: Mapping[str, Any]) -> dict[str, Any]:
        with self.activity.busy() as unused_for:
            channel = await _checked_channel(self, unused_for)
            return await channel.call(op, args, timeout=timeout_for(op, args))

    async def stream(
        self: _Connectable, op: str, args: Mapping[str, Any]
    ) -> AsyncIterator[dict[str, Any]]:
        with self.activity.busy() as unused_for:
            channel = await _checked_channel(self, unused_for)
            async for event in channel.stream(op, args):
                yield event

    def idle_expired(self: _Connectable, now: float) -> bool:
        return self.activity.idle_expired(now)

    async def ensure_running(self: _Reconnecting) -> ExecutorChannel:
        """The live channel; a closed one is made again (the engine starting
        the workspace first if it must), one caller at a time."""
        channel = self._channel
        if channel is not None and not channel.closed:
            return channel
        async with self._connecting:
            channel = self._channel
            if channel is not None and not channel.closed:
                return channel
            await self._drop_channel()
            channel = self._channel = await self._connect()
            self.activity.parked = False
            return channel


async def _checked_channel(workspace: _Connectable, unused_for: float) -> ExecutorChannel:
    channel = await workspace.ensure_running()
    if unused_for < PROBE_AFTER_IDLE_S:
        return channel
    try:
        await channel.call("ping", {}, timeout=PROBE_TIMEOUT_S)
    except SandboxUnavailable as exc:
        log.info("workspace %s: found dead before a call (%s); reconnecting", channel.name, exc)
        return await workspace.ensure_running()
    except Timeout:
        pass  # alive but wedged: the call meets it as it would have
    return channel


class IdleStoppable(Protocol):
    @property
    def instance_id(self) -> str: ...

    def idle_expired(self, now: float) -> bool: ...

    async def stop_idle(self) -> None: ...


async def stop_idle_workspaces(
    workspaces: Callable[[], Iterable[IdleStoppable]], interval_s: float
) -> NoReturn:
    """An engine's idle reaper: every ``interval_s``, stop each workspace idle past its TTL."""
    while True:
        await asyncio.sleep(interval_s)
        now = time.monotonic()
        for workspace in list(workspaces()):
            if workspace.idle_expired(now):
                try:
                    await workspace.stop_idle()
                except SandboxUnavailable as exc:
                    log.warning("workspace %s: idle stop failed: %s", workspace.instance_id, exc)

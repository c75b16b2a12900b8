"""One Docker workspace: its container and the channel to the executor inside.

The executor is shipped, and first greeted, over the container's own
stdin/stdout held through the Docker attach API: it needs no network and no
host socket inside the sandbox, so it works the same under runc and gVisor.
Under runc the channel then moves to the executor's own unix socket
(docker_direct), past dockerd and containerd-shim; where that is not
possible it stays on the attach stream. A broken channel is re-established
on the next call (re-attach to a running executor, or restart the container,
whose files live on the volume).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import docker.errors
from docker.models.containers import Container

from sandboxd.backends.docker.attach import DemuxedStdout, open_attach, widen
from sandboxd.backends.docker.direct import (
    DirectUnavailable,
    SocketSource,
    connect,
    executor_gone,
)
from sandboxd.backends.docker.settings import DockerSettings
from sandboxd.backends.shared.channel import ExecutorChannel
from sandboxd.backends.shared.pipes import PipeEndpoints
from sandboxd.backends.shared.session import Activity, ChannelCalls, handshake
from sandboxd.contract.errors import SandboxdError, SandboxUnavailable
from sandboxd.contract.models import Runtime, SandboxOptions
from sandboxd.executor import wire
from sandboxd.executor.bundle import bundle_payload, takes_nonce
from sandboxd.observability import metrics

log = logging.getLogger(__name__)

Run = Callable[..., Awaitable[Any]]

#: How long a re-attached executor has to answer before the container restarts.
ADOPT_HELLO_TIMEOUT_S = 5.0
#: How long a container whose executor died may take to show it has stopped.
STOP_WAIT_S = 5.0


class DockerWorkspace(ChannelCalls, PipeEndpoints):
    def __init__(
        self,
        instance_id: str,
        container: Container,
        *,
        settings: DockerSettings,
        options: SandboxOptions,
        run: Run,
    ) -> None:
        self._instance_id = instance_id
        self.container_id: str = container.id or ""
        self._container = container
        self._settings = settings
        self._options = options
        self._run = run
        self._channel: ExecutorChannel | None = None
        self._stdout: DemuxedStdout | None = None
        #: On the direct channel: the attach stream, kept only for the
        #: executor's stderr (its log lines); no call goes over it.
        self._logs: ExecutorChannel | None = None
        #: "direct" or "attach" while connected (docker_direct), else None.
        self.channel_kind: str | None = None
        #: How the executor's modules were made: "shipped" (the daemon's
        #: bytecode, executor.bundle) or "compiled" in the container.
        self.executor_bytecode: str | None = None
        self._connecting = asyncio.Lock()
        self.activity = Activity(options.idle_ttl_seconds)

    @property
    def instance_id(self) -> str:
        return self._instance_id

    @property
    def container(self) -> Container:
        return self._container

    @property
    def connected(self) -> bool:
        return self._channel is not None and not self._channel.closed

    async def rename(self, name: str, instance_id: str) -> None:
        """Make this (pooled) workspace the instance ``instance_id``."""
        try:
            await self._run(self._container.rename, name)
            await self._run(self._container.reload)
        except docker.errors.NotFound:
            raise SandboxUnavailable("the pooled container disappeared") from None
        self._instance_id = instance_id
        for channel in (self._channel, self._logs):
            if channel is not None:
                channel.name = instance_id

    async def stop_idle(self) -> None:
        """Stop the container (the volume stays); the next call starts it again."""
        async with self._connecting:
            if self.activity.in_flight or not self.idle_expired(time.monotonic()):
                return
            # Parked before the stop: a GetSandbox during it sees the exited
            # container, and must say idle, not killed.
            self.activity.parked = True
            try:
                await self._drop_channel()
                with contextlib.suppress(docker.errors.NotFound):
                    await self._run(self._container.stop, timeout=5)
            except BaseException:
                self.activity.parked = False  # not stopped: the next sweep tries again
                raise
        log.info(
            "workspace %s: stopped after %d s idle",
            self._instance_id,
            self._options.idle_ttl_seconds,
        )

    async def disconnect(self) -> None:
        async with self._connecting:
            await self._drop_channel()

    async def restart(self, stopped: Callable[[], Awaitable[None]] | None = None) -> None:
        """Stop the container and start it again; ``stopped`` runs in between,
        while nothing in the sandbox runs (a snapshot's restore)."""
        async with self._connecting:
            await self._drop_channel()
            with contextlib.suppress(docker.errors.NotFound, SandboxdError):
                await self._run(self._container.kill)
            with contextlib.suppress(docker.errors.NotFound, SandboxdError):
                await self._run(self._container.wait, timeout=30)
            if stopped is not None:
                await stopped()
            self._channel = await self._connect()
            self.activity.parked = False

    # ------------------------------------------------------------ internals

    async def _drop_channel(self) -> None:
        for channel in (self._channel, self._logs):
            if channel is not None:
                await channel.close()
        self._channel = self._logs = None

    async def _connect(self) -> ExecutorChannel:
        try:
            await self._run(self._container.reload)
        except docker.errors.NotFound:
            raise SandboxUnavailable(
                f"the container of sandbox {self._instance_id!r} was removed outside sandboxd; "
                "delete the sandbox and create it again"
            ) from None
        was_direct, self.channel_kind = self.channel_kind == "direct", None
        if self._container.status == "running" and was_direct:
            await self._let_a_dead_executors_container_stop()
        if self._container.status == "running":
            channel = await self._attach(resync=True)
            # Ends any frame a previous daemon left torn, raw payload included.
            await channel.send_raw(wire.resync_padding())
            hello = await self._handshake(channel, ADOPT_HELLO_TIMEOUT_S)
            if hello is not None:
                log.info("workspace %s: re-attached to its running executor", self._instance_id)
                return await self._go_direct(channel, hello)
            await channel.close()
            log.info("workspace %s: executor stale or silent; restarting", self._instance_id)
            with contextlib.suppress(docker.errors.NotFound, SandboxdError):
                await self._run(self._container.kill)
            with contextlib.suppress(docker.errors.NotFound, SandboxdError):
                await self._run(self._container.wait, timeout=30)
        channel = await self._attach()
        try:
            await self._run(self._container.start)
            metrics.container_started()
            nonce = None
            if takes_nonce(self._container.attrs.get("Config", {}).get("Cmd") or []):
                # Only a bundle with this start's nonce is taken: nothing a
                # previous executor left unread in stdin (executor.bundle).
                nonce = await channel.nonce(self._settings.start_timeout_s)
                if nonce is None:
                    raise SandboxUnavailable(self._not_started())
            await channel.send_raw(
                bundle_payload(bytecode=self._settings.ship_bytecode, nonce=nonce)
            )
            hello = await self._handshake(channel, self._settings.start_timeout_s)
            if hello is not None:
                # Refresh the cached state ("created" -> "running") for SandboxInfo,
                # and State.Pid for the direct channel.
                await self._run(self._container.reload)
                return await self._go_direct(channel, hello)
        except BaseException:
            await channel.close()
            raise
        await channel.close()
        raise SandboxUnavailable(self._not_started())

    def _not_started(self) -> str:
        clue = self._stdout.last_stderr.strip() if self._stdout else ""
        return f"the executor of sandbox {self._instance_id!r} did not start" + (
            f": {clue}"
            if clue
            else f"; does the image have {self._settings.executor_python} "
            "(SANDBOXD_EXECUTOR_PYTHON)?"
        )

    async def _let_a_dead_executors_container_stop(self) -> None:
        """After a direct channel broke: if the executor is dead, wait for its
        container to stop instead of re-attaching.

        The socket closes the moment the executor dies, before the engine has
        seen the container exit; re-attaching then would send the resync
        padding and a hello into a stdin the engine keeps across the restart
        and copies into it while the next bundle goes in (seen corrupting
        the bundle in CI). Its init exits right after the executor, so the
        wait is short.
        """
        state = self._container.attrs.get("State") or {}
        if not executor_gone(state.get("Pid")):
            return
        # One blocking wait on the engine rather than polling its state.
        with contextlib.suppress(docker.errors.NotFound, SandboxdError):
            await self._run(self._container.wait, timeout=STOP_WAIT_S, condition="not-running")
        await self._run(self._container.reload)

    async def _attach(self, *, resync: bool = False) -> ExecutorChannel:
        reader, writer = await open_attach(self._settings.docker_host, self.container_id)
        self._stdout = DemuxedStdout(reader, self._instance_id)
        return ExecutorChannel(
            self._stdout,
            writer,
            name=self._instance_id,
            max_line=self._settings.executor_max_line_bytes,
            resync=resync,
        )

    async def _handshake(self, channel: ExecutorChannel, timeout: float) -> dict[str, Any] | None:
        """The executor's hello reply, if it is our executor; else None."""
        hello = await handshake(channel, self._options, self._settings, timeout)
        if hello is not None:
            self.executor_bytecode = str(hello.get("bytecode", "compiled"))
        return hello

    async def _go_direct(
        self, attached: ExecutorChannel, hello: Mapping[str, Any]
    ) -> ExecutorChannel:
        """Move to the executor's unix socket if possible; else keep ``attached``."""
        try:
            channel = await self._open_direct(attached, hello)
        except (DirectUnavailable, OSError) as exc:  # fallback, never failure
            _fallback(self._instance_id, str(exc))
            self.channel_kind = "attach"
            metrics.executor_channel("attach")
            return attached
        # The executor answers each call on the channel it came on, so
        # nothing but its stderr (log lines, rare) comes over the attach
        # stream now: kept open for those, it costs dockerd nothing per call.
        self._logs = attached
        self.channel_kind = "direct"
        metrics.executor_channel("direct")
        log.debug("workspace %s: executor channel: direct", self._instance_id)
        return channel

    async def _open_direct(
        self, attached: ExecutorChannel, hello: Mapping[str, Any]
    ) -> ExecutorChannel:
        if not self._settings.direct_channel:
            raise DirectUnavailable("turned off (SANDBOXD_DIRECT_CHANNEL=0)")
        if self._options.runtime == Runtime.RUNSC:
            raise DirectUnavailable("gVisor (runsc): /proc/<pid>/root is not the sandbox's files")
        if "direct" not in hello:
            raise DirectUnavailable("the executor has no direct channel")
        state = self._container.attrs.get("State") or {}
        sock = await anyio.to_thread.run_sync(
            connect, state.get("Pid"), hello.get("direct"), hello.get("pid")
        )
        try:
            reader, writer = await asyncio.open_unix_connection(sock=sock, limit=1 << 20)
        except BaseException:
            sock.close()
            raise
        widen(writer)
        channel = ExecutorChannel(
            SocketSource(reader),
            writer,
            name=self._instance_id,
            max_line=self._settings.executor_max_line_bytes,
        )
        if await self._handshake(channel, ADOPT_HELLO_TIMEOUT_S) is None:
            await channel.close()
            # Quiet on its socket: whether it still answers on the attach
            # stream decides between the fallback and a restart.
            if await self._handshake(attached, ADOPT_HELLO_TIMEOUT_S) is None:
                await attached.close()
                raise SandboxUnavailable(
                    f"the executor of sandbox {self._instance_id!r} stopped answering"
                )
            raise DirectUnavailable("the executor did not answer hello on its socket")
        return channel


_fallbacks_logged: set[str] = set()


def _fallback(instance_id: str, reason: str) -> None:
    # Once per kind of reason at INFO (a fleet under gVisor would repeat it
    # for every sandbox); the rest at DEBUG.
    key = re.sub(r"\d+", "N", reason)
    level = logging.DEBUG if key in _fallbacks_logged else logging.INFO
    _fallbacks_logged.add(key)
    log.log(level, "workspace %s: executor channel stays on attach: %s", instance_id, reason)

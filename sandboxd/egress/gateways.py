"""The daemon's gateways: one per sandbox whose policy is ``allow``, while it runs.

Started when a sandbox's policy becomes ``allow`` (create, a policy change,
the policies restored after a daemon restart) and whenever the service
reaches a running workspace that should have one and has not (an executor
restarted under it); stopped when the policy leaves ``allow`` or the
sandbox goes. Under ``none`` no proxy listens (a connection to it is
refused); under ``full`` the container has the engine's network instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from sandboxd.backends.shared.pipes import Listener, Pipe
from sandboxd.contract.errors import Conflict, SandboxdError
from sandboxd.egress.gateway import LISTENERS, DecisionLog, Gateway, Policies
from sandboxd.egress.intercept import Interceptor
from sandboxd.egress.limits import Limits, LoopPacer
from sandboxd.egress.precedence import Precedence
from sandboxd.egress.resolver import Resolver
from sandboxd.egress.rules import Address, Policy

__all__ = ["Accepting", "Gateways"]

log = logging.getLogger(__name__)

#: After a gateway could not listen (the workload holds the port), wait this long to retry.
RETRY_S = 5.0
#: ``ready`` waits at most this long for a gateway's listeners.
READY_TIMEOUT_S = 5.0


class Accepting(Protocol):
    """A live workspace, as far as the gateway needs it."""

    async def call(self, op: str, args: Mapping[str, Any]) -> dict[str, Any]: ...

    def accept_pipes(self, listeners: Sequence[Listener]) -> AsyncIterator[tuple[str, Pipe]]: ...


class Gateways:
    def __init__(
        self,
        policies: Policies,
        decisions: DecisionLog,
        resolver: Resolver,
        limits: Limits,
        attach: Callable[[str], Awaitable[Accepting | None]],
        interceptor: Interceptor | None = None,
        own: frozenset[Address] | None = None,
    ) -> None:
        self._policies = policies
        self._decisions = decisions
        self._resolver = resolver
        self._limits = limits
        #: The running workspace of an id, or None (stopped, gone): never starts one.
        self._attach = attach
        self.interceptor = interceptor
        self._own = own
        #: One for all the daemon's gateways: the loop they share.
        self._pacer = LoopPacer()
        #: The calls agents wait on, which every relay lets go first (the service marks them).
        self.precedence = Precedence()
        self._running: dict[str, tuple[Gateway, asyncio.Task[None]]] = {}
        self._workspaces: dict[str, Accepting] = {}
        self._failed: dict[str, float] = {}
        self._attaching: dict[str, asyncio.Task[None]] = {}

    def gateway(self, instance_id: str) -> Gateway | None:
        entry = self._running.get(instance_id)
        return entry[0] if entry is not None and not entry[1].done() else None

    def _wanted(self, instance_id: str) -> bool:
        return self._policies.current(instance_id).mode == "allow"

    def seen(self, instance_id: str, workspace: Accepting) -> None:
        """The service reached this running workspace: start its gateway if it should have one."""
        if self.gateway(instance_id) is not None or not self._wanted(instance_id):
            return
        if time.monotonic() - self._failed.get(instance_id, -RETRY_S) < RETRY_S:
            return
        self._start(instance_id, workspace)

    def changed(self, instance_id: str, policy: Policy) -> None:
        """The registry's listener: a sandbox's policy in force changed."""
        gateway = self.gateway(instance_id)
        if policy.mode != "allow":
            self._stop_soon(instance_id)
            return
        if gateway is not None:
            gateway.policy_changed()
            return
        if instance_id not in self._attaching:
            task = asyncio.get_running_loop().create_task(self._attach_and_start(instance_id))
            self._attaching[instance_id] = task
            task.add_done_callback(lambda _: self._attaching.pop(instance_id, None))

    async def _attach_and_start(self, instance_id: str) -> None:
        try:
            workspace = await self._attach(instance_id)
        except SandboxdError as exc:
            log.info("egress %s: no workspace to serve: %s", instance_id, exc)
            return
        except Exception:  # a background task: its failure must not go unseen nor spread
            log.exception("egress %s: reaching the workspace failed", instance_id)
            return
        if workspace is not None and self._wanted(instance_id) and not self.gateway(instance_id):
            self._start(instance_id, workspace)

    async def ready(self, instance_id: str) -> None:
        """Return once the sandbox's proxies listen, if it should have them (bounded).

        The service awaits this before it answers a create or a policy change,
        so a workload started right after finds its proxy, not a refused port.
        """
        attaching = self._attaching.get(instance_id)
        if attaching is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(attaching), READY_TIMEOUT_S)
        workspace = self._workspaces.get(instance_id)
        if workspace is None or self.gateway(instance_id) is None:
            return
        wanted = {(x.host, x.port) for x in LISTENERS}
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline and self.gateway(instance_id) is not None:
            try:
                listed = await workspace.call("ports_list", {})
            except SandboxdError:
                return
            if wanted <= {(p.get("host"), p.get("port")) for p in listed.get("ports", ())}:
                return
            await asyncio.sleep(0.01)
        log.warning("egress %s: the proxies did not listen in time", instance_id)

    async def restarted(self, instance_id: str) -> None:
        """The sandbox's executor started afresh: a new gateway for it, listening on return."""
        await self.stop(instance_id)
        self._failed.pop(instance_id, None)
        if self._wanted(instance_id):
            await self._attach_and_start(instance_id)
            await self.ready(instance_id)

    def _start(self, instance_id: str, workspace: Accepting) -> None:
        self._workspaces[instance_id] = workspace
        gateway = Gateway(
            instance_id,
            workspace.accept_pipes,
            self._policies,
            self._decisions,
            self._resolver,
            self._limits,
            interceptor=self.interceptor,
            own=self._own,
            pacer=self._pacer,
            precedence=self.precedence,
        )
        task = asyncio.get_running_loop().create_task(
            self._serve(instance_id, gateway), name=f"egress-gateway-{instance_id}"
        )
        self._running[instance_id] = (gateway, task)

    async def _serve(self, instance_id: str, gateway: Gateway) -> None:
        try:
            await gateway.serve()
        except asyncio.CancelledError:
            raise
        except Conflict as exc:
            # The workload holds the port: try again later, not on every call.
            self._failed[instance_id] = time.monotonic()
            log.warning("egress %s: gateway cannot listen: %s", instance_id, exc)
        except SandboxdError as exc:
            # The executor went (stop, restart): seen() starts a new one with the next call.
            log.info("egress %s: gateway ended: %s", instance_id, exc)
        except Exception:
            self._failed[instance_id] = time.monotonic()
            log.exception("egress %s: gateway failed", instance_id)
        finally:
            entry = self._running.get(instance_id)
            if entry is not None and entry[0] is gateway:
                del self._running[instance_id]

    def _stop_soon(self, instance_id: str) -> None:
        self._workspaces.pop(instance_id, None)
        entry = self._running.pop(instance_id, None)
        self._failed.pop(instance_id, None)
        if entry is not None:
            entry[1].cancel()

    async def stop(self, instance_id: str) -> None:
        entry = self._running.pop(instance_id, None)
        if entry is not None:
            entry[1].cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await entry[1]

    async def close(self) -> None:
        self._pacer.close()
        for task in list(self._attaching.values()):
            task.cancel()
        for instance_id in list(self._running):
            await self.stop(instance_id)

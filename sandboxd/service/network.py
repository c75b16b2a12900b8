"""The daemon's runtime registry of network policies and egress decisions.

One per daemon (``ServiceCore.network``). It holds, per sandbox:

- the policy in force (``current``): set at create, by ``SetNetworkPolicy``
  and, after a daemon restart, from what the engine keeps with each sandbox
  (``service/netpolicy.py`` restores it). Whoever enforces the policy (the
  egress gateway) reads it here and listens for changes (``on_change``) to
  close the live connections a new policy forbids.
- the decision log (``record`` / ``entries``): the last ``LOG_SIZE``
  decisions, oldest first, a bounded ring per sandbox; every decision is
  counted on /metrics by verdict.

Memory, not the engine: the policy's durable copy is the sandbox's own
(labels and notes); the log is recent history and starts empty after a restart.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

from sandboxd.contract import network
from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.network import LOG_SIZE, NetworkDecision, NetworkPolicy
from sandboxd.egress.rules import parse_rule

log = logging.getLogger(__name__)

#: Told (instance id, new policy) after a sandbox's policy changed; a sandbox
#: that is gone is told mode none.
Listener = Callable[[str, NetworkPolicy], None]

_NONE = NetworkPolicy()

#: (the sandbox's created_at_ms, the policy's set-at ms): later is newer.
Version = tuple[int, int]


def validated(policy: NetworkPolicy) -> NetworkPolicy:
    """The policy's shape (``contract.network.check``) and each rule read by
    the one reader of rules, the gateway's ``parse_rule``: a bad rule is
    refused with its field and why, before anything changes."""
    network.check(policy)
    for field in ("allow", "deny"):
        for rule in getattr(policy, field):
            try:
                parse_rule(rule)
            except InvalidArgument as exc:
                raise InvalidArgument(f"network.{field}: {exc}") from None
    return policy


class NetworkRegistry:
    def __init__(self, log_size: int = LOG_SIZE) -> None:
        self._policies: dict[str, NetworkPolicy] = {}
        self._versions: dict[str, Version] = {}
        self._logs: dict[str, deque[NetworkDecision]] = {}
        self._listeners: list[Listener] = []
        self._log_size = log_size

    def current(self, instance_id: str) -> NetworkPolicy:
        """The policy in force; a sandbox this daemon does not know gets mode
        none (fail closed: nothing is let out on a guess)."""
        return self._policies.get(instance_id, _NONE)

    def set(self, instance_id: str, policy: NetworkPolicy, version: Version = (0, 0)) -> None:
        """Put ``policy`` in force and tell the listeners if it changed.

        ``version`` is (the sandbox's creation time, when the policy was
        set) in ms: what ``refresh`` compares."""
        self._versions[instance_id] = version
        if self._policies.get(instance_id) == policy:
            return
        self._policies[instance_id] = policy
        self._notify(instance_id, policy)

    def refresh(self, instance_id: str, policy: NetworkPolicy, version: Version) -> None:
        """A policy read back from what the engine keeps, put in force only if
        newer than the one held: another replica's SetNetworkPolicy reaches
        this daemon, while a read made before this daemon's own change never
        undoes it (nor one of an earlier sandbox of the id)."""
        if version > self._versions.get(instance_id, (-1, -1)):
            self.set(instance_id, policy, version)

    def forget(self, instance_id: str) -> None:
        """The sandbox is gone: its policy and its log go too."""
        self._logs.pop(instance_id, None)
        self._versions.pop(instance_id, None)
        if self._policies.pop(instance_id, None) is not None:
            self._notify(instance_id, _NONE)

    def on_change(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` on every change; the returned function stops it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _notify(self, instance_id: str, policy: NetworkPolicy) -> None:
        for listener in list(self._listeners):
            try:
                listener(instance_id, policy)
            except Exception:  # one listener's bug must not keep the change from the others
                log.exception("network policy listener failed for %s", instance_id)

    def record(self, instance_id: str, entry: NetworkDecision) -> None:
        ring = self._logs.get(instance_id)
        if ring is None:
            ring = self._logs[instance_id] = deque(maxlen=self._log_size)
        ring.append(entry)
        _count(entry)

    def entries(self, instance_id: str, limit: int = 0) -> list[NetworkDecision]:
        """The kept decisions, oldest first; ``limit``: only the newest that many."""
        ring = self._logs.get(instance_id, ())
        items = list(ring)
        return items[-limit:] if limit > 0 else items


def _count(entry: NetworkDecision) -> None:
    try:
        # The server extra's: an in-process (local factory) service has no /metrics.
        from sandboxd.observability import metrics
    except ImportError:
        return
    metrics.EGRESS_DECISIONS.labels("allowed" if entry.allowed else "denied").inc()

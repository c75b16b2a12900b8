"""Network policies after create: SetNetworkPolicy, the decision log, restart recovery.

The policy a sandbox was created with is kept in its options (labels /
annotations); one set later is a note kept with it by its engine
(``lifetimes.NETWORK``), which ``described`` puts in force over the first,
so GetSandbox, a restarted daemon and another replica all read the same
policy. The daemon's ``NetworkRegistry`` holds the one in force for the
gateway and tells it of every change.
"""

from __future__ import annotations

import json

from sandboxd.contract import network
from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.models import NetworkDecision, NetworkPolicy, SandboxInfo
from sandboxd.service.lifetimes import (
    CREATED,
    NETWORK,
    NETWORK_SET,
    Lifetimes,
    described,
    network_version,
    notes_for,
    now_ms,
)
from sandboxd.service.network import validated
from sandboxd.service.scope import current_scope

#: Decisions one GetNetworkLog answer carries at most (the ring's size).
MAX_LOG_LIMIT = network.LOG_SIZE


class NetworkPolicies(Lifetimes):
    async def set_network_policy(self, instance_id: str, policy: NetworkPolicy) -> SandboxInfo:
        """Put ``policy`` in force for a sandbox, running or stopped; a bad
        rule, a change to or from mode full, or a mode wider than the caller's
        token may set changes nothing."""
        info = await self._owned(instance_id) or await self.backend.get(instance_id)
        validated(policy)
        current_scope().check_network(policy)
        marks = await self.backend.read_marks(instance_id)
        notes = notes_for(info, marks.get(instance_id))
        now = now_ms(self.clock)
        before = described(info, notes, now).options.network or NetworkPolicy()
        network.transition(before, policy)
        notes.update(
            {
                CREATED: str(info.created_at_ms),
                NETWORK: json.dumps(policy.to_json()),
                NETWORK_SET: str(now),
            }
        )
        await self.backend.write_marks(instance_id, notes)
        self.network.set(instance_id, policy, network_version(info, notes))
        await self.gateways.ready(instance_id)
        return described(info, notes, now)

    async def network_log(self, instance_id: str, limit: int = 0) -> list[NetworkDecision]:
        """The sandbox's recent egress decisions, oldest first."""
        if not 0 <= limit <= MAX_LOG_LIMIT:
            raise InvalidArgument(f"limit must be between 0 (all) and {MAX_LOG_LIMIT}, got {limit}")
        await self._owned(instance_id)
        await self.backend.get(instance_id)  # an unknown id is NotFound, not an empty log
        return self.network.entries(instance_id, limit)

    async def restore_network(self) -> int:
        """After a daemon start: every sandbox's policy in force, from what its
        engine keeps. How many sandboxes have one other than mode none."""
        infos = await self._described_all(await self.backend.list({}))
        for info in infos:
            self.network.set(
                info.instance_id, info.options.network or NetworkPolicy(), self._known_now(info)
            )
        return sum(1 for i in infos if i.options.network and i.options.network.mode != "none")

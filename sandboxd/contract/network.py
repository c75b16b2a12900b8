"""A sandbox's network policy, and the egress decisions the daemon records: written once.

``NetworkPolicy`` is the one model of issue #25's policy. Every other shape
derives from it and a drift test (tests/unit/test_network_policy.py) holds
them together: the proto's ``NetworkPolicy`` and ``NetworkMode``
(``convert.py``), the HTTP API's JSON schema (``transports/http/schemas.py``
takes ``json_schema()``), the TypeScript client's type
(``clients/typescript/src/generated/network.ts``, from ``scripts/ts_data.py``),
sandboxctl's ``--network/--allow/--deny`` and the MCP bridge.

- ``none`` (the default): only the sandbox's loopback, no proxy.
- ``allow``: no route out either, but the daemon's egress gateway, reached by
  the proxies on the sandbox's loopback, relays connections that an ``allow``
  rule matches and no ``deny`` rule does (``sandboxd.egress.rules`` parses
  and decides; deny wins).
- ``full``: the engine's bridge, the whole internet and whatever the host's
  network reaches, with no gateway in between: only by explicit choice, and
  ``GetSandbox`` says so (``warning``).

A frozen dataclass rather than a pydantic model: the base install (the gRPC
client, ``sandboxd.contract``) has no pydantic; attribute access is the same.
Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, cast

from sandboxd.contract.errors import InvalidArgument

NetworkMode = Literal["none", "allow", "full"]
#: The modes, in the proto's order (NETWORK_MODE_NONE = 1, ...).
MODES: tuple[NetworkMode, ...] = ("none", "allow", "full")
#: Rules per list (allow, deny): far more than a package index and a forge
#: need; each rule is matched for every connection.
MAX_RULES = 256
#: One rule's characters: a 253-character name, a port and a wildcard fit.
MAX_RULE_CHARS = 300
#: Entries a sandbox's decision log keeps (the oldest drop out first).
LOG_SIZE = 1000

FULL_WARNING = (
    "network mode 'full': this sandbox is on the engine's bridge and reaches the "
    "whole internet, the host's network and the cloud metadata address directly; "
    "no egress rule applies. Prefer mode 'allow' with rules."
)
MODE_DESCRIPTION = (
    "none: no network (the default); allow: only what the allow rules name and "
    "no deny rule does, through the daemon's egress proxy; full: the engine's "
    "bridge, everything (GetSandbox warns)"
)
RULE_DESCRIPTION = (
    "a domain (example.com), a wildcard (*.example.com), either with :port, "
    "a CIDR (10.0.0.0/8) with optional :port, an IPv6 CIDR in brackets "
    "([2001:db8::]/32:443)"
)
# Whitespace and control characters are never part of a rule (a CR/LF could
# split a log line or a header); non-ASCII names are (IDNA, egress.rules).
_NOT_IN_RULES = re.compile(r"[\s\x00-\x1f\x7f-\x9f\"'\\]")


@dataclass(frozen=True)
class NetworkPolicy:
    """Where a sandbox may connect: ``mode`` and, in mode ``allow``, the rules
    as the caller wrote them (``allow``: what may be reached; ``deny``: wins)."""

    mode: NetworkMode = "none"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Lists from JSON or a caller become tuples, so the policy stays hashable.
        object.__setattr__(self, "allow", tuple(self.allow))
        object.__setattr__(self, "deny", tuple(self.deny))

    @property
    def bridged(self) -> bool:
        """The container is on the engine's network (mode ``full``)."""
        return self.mode == "full"

    @property
    def warning(self) -> str:
        """What ``GetSandbox`` says about this policy ("" when nothing)."""
        return FULL_WARNING if self.mode == "full" else ""

    def to_json(self) -> dict[str, object]:
        return {"mode": self.mode, "allow": list(self.allow), "deny": list(self.deny)}

    @classmethod
    def from_json(cls, data: object) -> NetworkPolicy:
        """From stored or sent JSON: a policy object, or the earlier bool
        (``true``: full, ``false``/``null``: none)."""
        if data is None or isinstance(data, bool):
            return cls(mode="full" if data else "none")
        if not isinstance(data, Mapping):
            raise InvalidArgument(
                f"network must be an object {{mode, allow, deny}}, not {type(data).__name__}"
            )
        unknown = set(data) - {"mode", "allow", "deny"}
        if unknown:
            raise InvalidArgument(f"network: unknown field(s) {', '.join(sorted(unknown))}")
        return cls(
            mode=cast(NetworkMode, data.get("mode") or "none"),
            allow=_strings(data.get("allow"), "network.allow"),
            deny=_strings(data.get("deny"), "network.deny"),
        )


def from_flags(
    mode: str | None, allow: Iterable[str] | None, deny: Iterable[str] | None
) -> NetworkPolicy | None:
    """A policy from command-line flags (sandboxctl, ``sandboxd mcp``): None
    when none is given (the daemon's default); rules without a mode mean allow."""
    allow, deny = list(allow or ()), list(deny or ())
    if mode is None and not allow and not deny:
        return None
    return NetworkPolicy.from_json({"mode": mode or "allow", "allow": allow, "deny": deny})


def _strings(value: object, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidArgument(f"{field} must be a list of rule strings")
    return tuple(value)  # each one's type is checked by ``check``


def coerce(value: NetworkPolicy | bool | Mapping[str, object] | None) -> NetworkPolicy | None:
    """A caller's ``network`` as a policy (None stays None: the daemon's default)."""
    if value is None or isinstance(value, NetworkPolicy):
        return value
    return NetworkPolicy.from_json(value)


def check(policy: NetworkPolicy) -> NetworkPolicy:
    """The policy's shape: a known mode, rules only in mode ``allow``, each a
    short string with no space or control character. What a rule means is
    ``sandboxd.egress.rules``' to say (``service/network.py`` ``validated``
    parses every rule with it). A bad rule is named."""
    if policy.mode not in MODES:
        raise InvalidArgument(f"network.mode {policy.mode!r} is not a mode: use {', '.join(MODES)}")
    if policy.mode != "allow" and (policy.allow or policy.deny):
        raise InvalidArgument(
            f"network: allow and deny rules apply only in mode 'allow' (mode is {policy.mode!r})"
        )
    for field in ("allow", "deny"):
        rules = getattr(policy, field)
        if len(rules) > MAX_RULES:
            raise InvalidArgument(
                f"network.{field} has {len(rules)} rules; at most {MAX_RULES} are accepted"
            )
        for rule in rules:
            rule_shape(rule, f"network.{field}")
    return policy


def rule_shape(rule: object, field: str) -> str:
    if not isinstance(rule, str):
        raise InvalidArgument(f"{field}: rule {rule!r} is not a string")
    if not rule:
        raise InvalidArgument(f"{field}: empty rule")
    if len(rule) > MAX_RULE_CHARS:
        raise InvalidArgument(
            f"{field}: rule {rule[:40]!r}... is {len(rule)} characters; "
            f"at most {MAX_RULE_CHARS} are accepted"
        )
    bad = _NOT_IN_RULES.search(rule)
    if bad is not None:
        raise InvalidArgument(
            f"{field}: rule {rule[:80]!r} has the character {bad.group()!r} at {bad.start()}, "
            f"which no rule uses: write {RULE_DESCRIPTION}"
        )
    return rule


def transition(old: NetworkPolicy, new: NetworkPolicy) -> None:
    """Whether a running sandbox can go from ``old`` to ``new``: between none
    and allow, yes (the gateway enforces it); to or from full, the container's
    network itself would change, which a running container cannot."""
    if old.bridged != new.bridged:
        raise InvalidArgument(
            f"network: a running sandbox cannot change from mode {old.mode!r} to {new.mode!r}: "
            "mode 'full' is the container's own network, fixed at create; "
            "create a new sandbox (or fork this one) with the mode you want"
        )


def describe(policy: NetworkPolicy) -> str:
    """The policy in words a model can act on (the MCP bridge's instructions)."""
    if policy.mode == "none":
        return "Network: none; this sandbox cannot connect anywhere outside itself."
    if policy.mode == "full":
        return "Network: full; " + FULL_WARNING
    allowed = ", ".join(policy.allow) or "nothing yet"
    denied = f" (never: {', '.join(policy.deny)})" if policy.deny else ""
    return (
        f"Network: only through the proxy the environment names (HTTP_PROXY, ALL_PROXY), "
        f"to {allowed}{denied}; a refused connection says which host and rule."
    )


def json_schema() -> dict[str, object]:
    """The JSON schema of a policy (the HTTP API's ``network``; MCP's, TypeScript's)."""
    rules = {
        "type": "array",
        "items": {"type": "string", "maxLength": MAX_RULE_CHARS},
        "maxItems": MAX_RULES,
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "mode": {
                "type": "string",
                "enum": list(MODES),
                "default": "none",
                "description": MODE_DESCRIPTION,
            },
            "allow": {**rules, "description": f"allow rules: each {RULE_DESCRIPTION}"},
            "deny": {**rules, "description": "deny rules, same forms; a deny rule wins"},
        },
    }


@dataclass(frozen=True)
class NetworkDecision:
    """One egress decision of a sandbox's gateway, as its log keeps it."""

    at_ms: int  # ms since the epoch
    host: str  # the name the workload asked for ("" for a bare address)
    port: int
    address: str  # the address the daemon resolved and would connect to ("" if none)
    allowed: bool
    rule: str  # the rule that decided ("" when none matched)
    reason: str  # the agent-facing text
    via: str = ""  # connect | http | socks

    def to_json(self) -> dict[str, object]:
        return {
            "at_ms": self.at_ms,
            "host": self.host,
            "port": self.port,
            "address": self.address,
            "allowed": self.allowed,
            "rule": self.rule,
            "reason": self.reason,
            "via": self.via,
        }

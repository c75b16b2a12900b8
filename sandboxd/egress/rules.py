"""Egress rules and the decision on one connection.

A sandbox's network policy (``mode`` none / allow / full, ``allow`` and
``deny`` rule strings) becomes a ``Ruleset``; the gateway asks it about
every connection with the name the workload asked for (``None`` when it gave
an address) and the address the daemon resolved that name to, and connects
to that very address only when ``Decision.allowed``.

Rule strings (as the user writes them; ``parse_rule`` is the one reader):

- ``example.com``        that name, any port
- ``*.example.com``      any name below example.com (not example.com itself)
- ``example.com:443``    that name, port 443 only (also ``*.example.com:443``)
- ``203.0.113.7``        that address (any port); ``203.0.113.0/24`` a range
- ``10.0.0.0/8:5432``    a range, one port
- ``2001:db8::/32``      IPv6 without a port; with one, bracket the address:
  ``[2001:db8::1]:443``, ``[2001:db8::]/32:443``

Names are compared in one form: lower case, one trailing dot dropped,
non-ASCII labels as IDNA ("xn--") labels. A name whose last label is a
number (``2130706433``, ``0x7f.1``, ``0177.0.0.1``) is refused outright: a
C resolver would read it as an IPv4 address, so it is no name.

What a name rule never opens: the ranges in ``SPECIAL`` (loopback, private,
link-local, CGNAT, multicast, reserved) and the daemon host's own addresses
stay denied unless an address rule names them (a range inside them, e.g.
``10.0.0.0/8``; for a host address, that address). The cloud metadata
addresses (``METADATA``) are denied whatever the rules say. ``deny`` wins
over ``allow``. The standard library only (``contract.errors`` aside): a
policy's validation anywhere in the daemon can call ``parse_rule``.
"""

from __future__ import annotations

import ipaddress
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from pathlib import Path
from typing import Literal, Protocol

from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.network import MAX_RULE_CHARS, MAX_RULES

__all__ = [
    "MAX_RULES",
    "MAX_RULE_LENGTH",
    "METADATA",
    "SPECIAL",
    "Address",
    "Decision",
    "Policy",
    "Rule",
    "Ruleset",
    "host_addresses",
    "normalize_host",
    "parse_rule",
    "parse_rules",
]

Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network

#: Longest rule string, and most rules in one list (allow or deny).
# The policy's limits are the model's (contract/network.py), written once.
MAX_RULE_LENGTH = MAX_RULE_CHARS

#: Cloud metadata services (IPv4 and IPv6): never reachable, whatever the rules.
METADATA: tuple[Network, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "169.254.169.254/32",  # AWS, GCP, Azure, OpenStack, DigitalOcean...
        "169.254.170.2/32",  # AWS ECS task credentials
        "169.254.170.23/32",  # AWS EKS pod identity
        "100.100.100.200/32",  # Alibaba Cloud
        "192.0.0.192/32",  # Oracle Cloud
        "fd00:ec2::254/128",  # AWS IMDS over IPv6
        "fd00:ec2::23/128",  # AWS EKS pod identity over IPv6
    )
)

#: Ranges a name rule never opens (an address rule inside them does).
SPECIAL: dict[Network, str] = {
    ipaddress.ip_network(net): what
    for net, what in (
        ("0.0.0.0/8", "an unspecified (this-host) address"),
        ("10.0.0.0/8", "a private address"),
        ("100.64.0.0/10", "a carrier-grade NAT address"),
        ("127.0.0.0/8", "a loopback address"),
        ("169.254.0.0/16", "a link-local address"),
        ("172.16.0.0/12", "a private address"),
        ("192.0.0.0/24", "an IETF protocol address"),
        ("192.168.0.0/16", "a private address"),
        ("198.18.0.0/15", "a benchmarking address"),
        ("224.0.0.0/4", "a multicast address"),
        ("240.0.0.0/4", "a reserved address"),
        ("::/128", "an unspecified address"),
        ("::1/128", "a loopback address"),
        ("::/96", "an IPv4-compatible address"),
        ("100::/64", "a discard address"),
        ("fc00::/7", "a private (unique local) address"),
        ("fe80::/10", "a link-local address"),
        ("fec0::/10", "a site-local address"),
        ("ff00::/8", "a multicast address"),
    )
}

#: IPv6 forms that carry an IPv4 address the kernel would really reach.
_EMBEDS_V4 = (ipaddress.ip_network("::ffff:0:0/96"), ipaddress.ip_network("64:ff9b::/96"))

_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)")
_PORT = re.compile(r"[0-9]{1,5}")


class Policy(Protocol):
    """What a Ruleset is made from (contract.network.NetworkPolicy has these)."""

    @property
    def mode(self) -> str: ...

    @property
    def allow(self) -> tuple[str, ...]: ...

    @property
    def deny(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    #: The rule string that decided, as the user wrote it (None: no rule did).
    rule: str | None
    #: Agent-facing: why, in words a program or a person can act on.
    reason: str


@dataclass(frozen=True, slots=True)
class Rule:
    text: str
    kind: Literal["name", "network"]
    #: Normalized name without the "*." of a wildcard ("" for a network rule).
    name: str = ""
    wildcard: bool = False
    network: Network | None = None
    port: int | None = None

    def matches_name(self, host: str, port: int) -> bool:
        if self.kind != "name" or (self.port is not None and self.port != port):
            return False
        if self.wildcard:
            return host.endswith("." + self.name)
        return host == self.name

    def matches_address(self, address: Address, port: int) -> bool:
        if self.network is None or (self.port is not None and self.port != port):
            return False
        return any(a in self.network for a in _forms(address))


def _bad(text: str, why: str) -> InvalidArgument:
    return InvalidArgument(f"network rule {text!r}: {why}")


def _normalize_name(name: str) -> str:
    """The one form of a host name; ValueError (with why) when it is none."""
    if not name:
        raise ValueError("the name is empty")
    if any(ord(c) < 0x21 or c in "/\\@#?%[]:\x7f" for c in name):
        raise ValueError("the name has a character no host name has")
    name = name[:-1] if name.endswith(".") else name
    if not name.isascii():
        try:
            name = name.encode("idna").decode("ascii")
        except UnicodeError:
            raise ValueError("the name is not a valid internationalized name") from None
    name = name.lower()
    if len(name) > 253:
        raise ValueError("the name is longer than 253 characters")
    labels = name.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(
            "each dot-separated label must be 1-63 letters, digits, '-' or '_' "
            "and not start or end with '-'"
        )
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        # "2130706433", "0x7f.1", "0177.0.0.1": a resolver's inet_aton reads an IPv4 address.
        raise ValueError("a name ending in a number is an IPv4 address in another form")
    return name


def normalize_host(host: str) -> str | Address:
    """A request's host: an address literal (canonical forms only) or a normalized name.

    Raises InvalidArgument with the agent-facing reason. IPv6 may come bracketed.
    """
    text = host
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            return _canonical(ipaddress.IPv6Address(host))
        except ValueError:
            raise InvalidArgument(f"{text!r} is not a valid IPv6 address") from None
    try:
        return _canonical(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return _normalize_name(host)
    except ValueError as exc:
        raise InvalidArgument(f"{text!r} is not a valid host name: {exc}") from None


def _canonical(address: Address) -> Address:
    """An IPv4-mapped IPv6 address is the IPv4 address it maps."""
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _forms(address: Address) -> tuple[Address, ...]:
    """The address, and the IPv4 address an IPv6 form carries (mapped, NAT64)."""
    if isinstance(address, IPv6Address):
        for net in _EMBEDS_V4:
            if address in net:
                return (address, IPv4Address(int(address) & 0xFFFFFFFF))
    return (address,)


def _port(text: str, raw: str) -> int:
    if not _PORT.fullmatch(raw) or not 1 <= int(raw) <= 65535:
        raise _bad(text, f"port must be a number from 1 to 65535 (got {raw!r})")
    return int(raw)


def _network(text: str, raw: str) -> Network:
    try:
        return ipaddress.ip_network(raw, strict=True)
    except ValueError as exc:
        if "host bits set" in str(exc):
            fixed = ipaddress.ip_network(raw, strict=False)
            raise _bad(text, f"{raw} has host bits set; did you mean {fixed}?") from None
        raise _bad(text, f"{raw!r} is not an IP address or CIDR range") from None


def parse_rule(text: str) -> Rule:
    """One rule string -> Rule; InvalidArgument naming the rule and what is wrong."""
    if not isinstance(text, str):
        raise InvalidArgument("a network rule must be a string")
    if len(text) > MAX_RULE_LENGTH:
        raise InvalidArgument(f"a network rule is at most {MAX_RULE_LENGTH} characters")
    body = text.strip()
    if not body:
        raise _bad(text, "the rule is empty")
    if any(ord(c) < 0x20 or c == "\x7f" for c in body):
        raise _bad(text, "the rule has a control character")
    port: int | None = None
    if body.startswith("["):
        # [v6], [v6]/len, [v6]:port, [v6]/len:port
        match = re.fullmatch(r"\[([^\]]*)\](/[0-9]{1,3})?(?::([^:]*))?", body)
        if match is None:
            raise _bad(text, "write an IPv6 rule as [2001:db8::1], [2001:db8::]/32 or [...]:443")
        address, length, raw_port = match.groups()
        if raw_port is not None:
            port = _port(text, raw_port)
        network = _network(text, address + (length or ""))
        if network.version != 6:
            raise _bad(text, "brackets are for IPv6 addresses")
        return Rule(text, "network", network=network, port=port)
    if body.count(":") > 1:  # bare IPv6, no port
        return Rule(text, "network", network=_network(text, body))
    if ":" in body:
        body, raw_port = body.rsplit(":", 1)
        port = _port(text, raw_port)
    if "/" in body or _looks_numeric(body):
        return Rule(text, "network", network=_network(text, body), port=port)
    wildcard = body.startswith("*.")
    name = body[2:] if wildcard else body
    if "*" in name:
        raise _bad(text, "a wildcard is only '*.' at the start (*.example.com)")
    try:
        name = _normalize_name(name)
    except ValueError as exc:
        raise _bad(text, str(exc)) from None
    return Rule(text, "name", name=name, wildcard=wildcard, port=port)


def _looks_numeric(body: str) -> bool:
    try:
        ipaddress.ip_address(body)
    except ValueError:
        return False
    return True


def parse_rules(texts: Iterable[str], what: str = "allow") -> tuple[Rule, ...]:
    rules = tuple(parse_rule(t) for t in texts)
    if len(rules) > MAX_RULES:
        raise InvalidArgument(f"at most {MAX_RULES} {what} rules (got {len(rules)})")
    return rules


# ------------------------------------------------------------ the host's addresses

_OWN_TTL_S = 5.0
_own_cache: tuple[float, frozenset[Address]] = (0.0, frozenset())


def _read_own() -> frozenset[Address]:
    found: set[Address] = set()
    try:
        trie = Path("/proc/net/fib_trie").read_text()
    except OSError:
        trie = ""
    last = ""
    for line in trie.splitlines():
        words = line.split()
        if words[:1] == ["|--"] and len(words) == 2:
            last = words[1]
        elif "/32 host LOCAL" in line and last:
            found.add(IPv4Address(last))
    try:
        inet6 = Path("/proc/net/if_inet6").read_text()
    except OSError:
        inet6 = ""
    for line in inet6.splitlines():
        words = line.split()
        if words and len(words[0]) == 32:
            found.add(IPv6Address(int(words[0], 16)))
    return frozenset(found)


def host_addresses() -> frozenset[Address]:
    """The daemon host's own addresses (every interface), re-read every few seconds."""
    global _own_cache
    now = time.monotonic()
    if now - _own_cache[0] > _OWN_TTL_S:
        _own_cache = (now, _read_own())
    return _own_cache[1]


# ------------------------------------------------------------ the decision


def _special(address: Address, own: frozenset[Address]) -> tuple[Network, str] | None:
    """The range that makes ``address`` closed to name rules, and what it is."""
    for form in _forms(address):
        if form.is_loopback:  # the host's too, but "loopback" says more
            return next((n, w) for n, w in SPECIAL.items() if form in n)
        if form in own:
            return ipaddress.ip_network(form), "an address of the daemon's host"
        for net, what in SPECIAL.items():
            if form in net:
                return net, what
    return None


class Ruleset:
    """A policy's rules, parsed once; ``decide`` per connection."""

    def __init__(
        self,
        mode: str,
        allow: tuple[Rule, ...],
        deny: tuple[Rule, ...],
        own: frozenset[Address] | None = None,
    ) -> None:
        if mode not in ("none", "allow", "full"):
            raise InvalidArgument(f"network mode must be none, allow or full (got {mode!r})")
        self.mode = mode
        self.allow = allow
        self.deny = deny
        #: Fixed host addresses (tests); None reads the host's live ones.
        self._own = own

    @classmethod
    def from_policy(cls, policy: Policy, own: frozenset[Address] | None = None) -> Ruleset:
        return cls(policy.mode, parse_rules(policy.allow), parse_rules(policy.deny, "deny"), own)

    def before_resolving(self, host: str, port: int) -> Decision | None:
        """A refusal of a name on the name alone, or None (resolve it, then ``decide``).

        Only a name an allow rule names is ever resolved: the daemon's
        resolver must not carry what a sandbox spells into a name to a DNS
        server that is listening (a DNS tunnel through the daemon).
        """
        if self.mode == "none":
            return _NONE
        try:
            normal = normalize_host(host)
        except InvalidArgument as exc:
            return Decision(False, None, exc.message)
        if not isinstance(normal, str) or self.mode == "full":
            return None
        for rule in self.deny:
            if rule.matches_name(normal, port):
                return Decision(False, rule.text, f"{normal} is denied by rule {rule.text!r}")
        if any(rule.matches_name(normal, port) for rule in self.allow):
            return None
        ports = sorted({r.port for r in self.allow if r.port and r.matches_name(normal, r.port)})
        if ports:
            listed = ", ".join(map(str, ports))
            return Decision(
                False,
                None,
                f"{normal} port {port} is not in this sandbox's allow list "
                f"(allowed ports: {listed})",
            )
        return Decision(False, None, f"{normal} is not in this sandbox's allow list")

    def decide(self, host: str | None, port: int, address: Address) -> Decision:
        """The decision on a connection to ``address`` asked for as ``host`` (None: as an address).

        A name must be one an allow rule names (``before_resolving``), and the
        address it resolved to must be no denied, metadata or special one (an
        address rule inside the special range opens it). An address asked for
        as such is allowed by an address rule only.
        """
        if self.mode == "none":
            return _NONE
        name_rule: Rule | None = None
        if host is not None:
            early = self.before_resolving(host, port)
            if early is not None:
                return early
            normal = normalize_host(host)
            host = normal if isinstance(normal, str) else None
            if host is not None:
                name_rule = next((r for r in self.allow if r.matches_name(host, port)), None)
        for net in METADATA:
            if any(form in net for form in _forms(address)):
                return Decision(
                    False, None, f"{address} is a cloud metadata address: never allowed"
                )
        if self.mode == "full":
            return Decision(True, None, "this sandbox's network policy is full")
        for rule in self.deny:
            if rule.matches_address(address, port):
                return Decision(
                    False, rule.text, f"{host or address} is denied by rule {rule.text!r}"
                )
        special = _special(address, self._own if self._own is not None else host_addresses())
        if special is not None:
            net, what = special
            for rule in self.allow:
                if (
                    rule.network is not None
                    and rule.network.version == net.version
                    and rule.network.subnet_of(net)  # type: ignore[arg-type]
                    and rule.matches_address(address, port)
                ):
                    return Decision(True, rule.text, f"allowed by rule {rule.text!r}")
            named = f"{host} resolves to {address}" if host is not None else str(address)
            return Decision(
                False,
                None,
                f"{named}, {what}: only an allow rule naming that address or range opens it",
            )
        if name_rule is not None:
            return Decision(True, name_rule.text, f"allowed by rule {name_rule.text!r}")
        if host is None:
            for rule in self.allow:
                if rule.matches_address(address, port):
                    return Decision(True, rule.text, f"allowed by rule {rule.text!r}")
        return Decision(False, None, f"{address} is not in this sandbox's allow list")


_NONE = Decision(False, None, "this sandbox's network policy is none: no connections")

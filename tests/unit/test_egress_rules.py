"""Egress rules: parsing (clear errors), name forms, and the decision per connection.

Each refusal case here is one of issue #25's attacks at the rule level (the
hostile tier repeats them through a real sandbox); the allowed twin next to
it shows the check is not simply refusing everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import ip_address, ip_network

import pytest

from sandboxd.contract.errors import InvalidArgument
from sandboxd.egress.rules import (
    MAX_RULES,
    Ruleset,
    normalize_host,
    parse_rule,
    parse_rules,
)

PUBLIC = ip_address("203.0.113.10")
OTHER = ip_address("198.51.100.20")
OWN = frozenset({ip_address("192.0.2.2"), ip_address("fd00::2")})


@dataclass(frozen=True)
class Policy:
    mode: str = "allow"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


def ruleset(*allow: str, deny: tuple[str, ...] = (), mode: str = "allow") -> Ruleset:
    return Ruleset.from_policy(Policy(mode, allow, deny), own=OWN)


# ------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    ("text", "kind", "name", "wildcard", "network", "port"),
    [
        ("example.com", "name", "example.com", False, None, None),
        ("Example.COM.", "name", "example.com", False, None, None),
        ("*.example.com", "name", "example.com", True, None, None),
        ("example.com:443", "name", "example.com", False, None, 443),
        ("*.example.com:8443", "name", "example.com", True, None, 8443),
        ("bücher.example", "name", "xn--bcher-kva.example", False, None, None),
        ("203.0.113.7", "network", "", False, "203.0.113.7/32", None),
        ("10.0.0.0/8", "network", "", False, "10.0.0.0/8", None),
        ("10.0.0.0/8:5432", "network", "", False, "10.0.0.0/8", 5432),
        ("2001:db8::/32", "network", "", False, "2001:db8::/32", None),
        ("[2001:db8::1]:443", "network", "", False, "2001:db8::1/128", 443),
        ("[2001:db8::]/32:443", "network", "", False, "2001:db8::/32", 443),
        ("  pypi.org  ", "name", "pypi.org", False, None, None),
    ],
)
def test_rules_parse_into_one_form(
    text: str, kind: str, name: str, wildcard: bool, network: str | None, port: int | None
) -> None:
    rule = parse_rule(text)
    assert (rule.text, rule.kind, rule.name, rule.wildcard, rule.port) == (
        text,
        kind,
        name,
        wildcard,
        port,
    )
    assert rule.network == (ip_network(network) if network else None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("example.com:0", "port must be a number from 1 to 65535"),
        ("example.com:99999", "port must be a number from 1 to 65535"),
        ("example.com:https", "port must be a number"),
        ("10.0.0.1/8", "host bits set; did you mean 10.0.0.0/8"),
        ("10.0.0.0/33", "not an IP address or CIDR range"),
        ("ex*ample.com", "wildcard is only"),
        ("*", "wildcard is only|label"),
        ("a..b", "label"),
        ("-a.com", "label"),
        ("a.com\r\nHost: x", "character"),
        ("a.com\x00", "character"),
        ("2130706433", "IPv4 address in another form"),
        ("0x7f.1", "IPv4 address in another form"),
        ("0177.0.0.1", "IPv4 address in another form"),
        ("[10.0.0.1]:80", "brackets are for IPv6"),
        ("[2001:db8::1:443", "write an IPv6 rule"),
        ("a" * 64 + ".com", "label"),
        ("x" * 301, "at most 300 characters"),
    ],
)
def test_bad_rules_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        parse_rule(text)


def test_a_bad_rule_is_named_in_the_error() -> None:
    with pytest.raises(InvalidArgument, match=r"network rule 'example\.com:x'"):
        parse_rule("example.com:x")


def test_too_many_rules_are_refused() -> None:
    parse_rules([f"h{i}.example" for i in range(MAX_RULES)])
    with pytest.raises(InvalidArgument, match=f"at most {MAX_RULES} allow rules"):
        parse_rules([f"h{i}.example" for i in range(MAX_RULES + 1)])


def test_mode_is_checked() -> None:
    with pytest.raises(InvalidArgument, match="none, allow or full"):
        ruleset(mode="open")


# ------------------------------------------------------------ host forms


@pytest.mark.parametrize(
    ("host", "normal"),
    [
        ("Allowed.TEST.", "allowed.test"),
        ("203.0.113.10", ip_address("203.0.113.10")),
        ("[2001:db8::1]", ip_address("2001:db8::1")),
        ("::ffff:127.0.0.1", ip_address("127.0.0.1")),
        ("[::ffff:7f00:1]", ip_address("127.0.0.1")),
        ("bücher.example", "xn--bcher-kva.example"),
    ],
)
def test_hosts_normalize(host: str, normal: object) -> None:
    assert normalize_host(host) == normal


@pytest.mark.parametrize(
    "host", ["2130706433", "0x7f000001", "0177.0.0.1", "127.1", "allowed.test..", "a b", "a\x00b"]
)
def test_hosts_that_are_no_name_are_refused(host: str) -> None:
    with pytest.raises(InvalidArgument, match="not a valid host name"):
        normalize_host(host)


# ------------------------------------------------------------ decisions


def test_none_refuses_everything_and_full_everything_but_metadata() -> None:
    assert not ruleset("allowed.test", mode="none").decide("allowed.test", 443, PUBLIC).allowed
    full = ruleset(mode="full")
    assert full.decide("x.test", 443, PUBLIC).allowed
    assert full.decide(None, 22, ip_address("10.1.2.3")).allowed
    assert not full.decide(None, 80, ip_address("169.254.169.254")).allowed


def test_an_exact_name_allows_that_name_only() -> None:
    rules = ruleset("allowed.test")
    decision = rules.decide("allowed.test", 443, PUBLIC)
    assert decision.allowed and decision.rule == "allowed.test"
    for attack in ("allowed.test.evil.test", "evil.test", "xallowed.test", "sub.allowed.test"):
        refused = rules.decide(attack, 443, PUBLIC)
        assert not refused.allowed
        assert refused.reason == f"{attack} is not in this sandbox's allow list"
    # Case and one trailing dot are the same name; an address alone is not the name.
    assert rules.decide("ALLOWED.Test.", 443, PUBLIC).allowed
    assert not rules.decide(None, 443, PUBLIC).allowed


def test_a_wildcard_allows_names_below_it_only() -> None:
    rules = ruleset("*.example.test")
    assert rules.decide("a.example.test", 443, PUBLIC).allowed
    assert rules.decide("a.b.example.test", 443, PUBLIC).allowed
    assert not rules.decide("example.test", 443, PUBLIC).allowed
    assert not rules.decide("evilexample.test", 443, PUBLIC).allowed
    assert not rules.decide("example.test.evil", 443, PUBLIC).allowed


def test_punycode_lookalikes_are_other_names() -> None:
    rules = ruleset("example.test")
    # Cyrillic U+0435 in place of the Latin "e".
    decision = rules.decide("\u0435xample.test", 443, PUBLIC)
    assert not decision.allowed and "xn--" in decision.reason
    assert ruleset("bücher.example").decide("xn--bcher-kva.example", 443, PUBLIC).allowed


def test_ports_narrow_a_rule() -> None:
    rules = ruleset("allowed.test:443", "10.9.0.0/16:5432")
    assert rules.decide("allowed.test", 443, PUBLIC).allowed
    refused = rules.decide("allowed.test", 22, PUBLIC)
    assert not refused.allowed
    assert refused.reason == (
        "allowed.test port 22 is not in this sandbox's allow list (allowed ports: 443)"
    )
    assert rules.decide(None, 5432, ip_address("10.9.1.1")).allowed
    assert not rules.decide(None, 5433, ip_address("10.9.1.1")).allowed


def test_deny_wins_over_allow() -> None:
    rules = ruleset("*.example.test", "203.0.113.0/24", deny=("bad.example.test", "203.0.113.10"))
    refused = rules.decide("bad.example.test", 443, OTHER)
    assert (refused.allowed, refused.rule) == (False, "bad.example.test")
    assert refused.reason == "bad.example.test is denied by rule 'bad.example.test'"
    # Deny on the address catches an allowed name resolving to it.
    by_address = rules.decide("good.example.test", 443, PUBLIC)
    assert (by_address.allowed, by_address.rule) == (False, "203.0.113.10")
    assert rules.decide("good.example.test", 443, OTHER).allowed
    # The deny matches the normalized name too.
    assert not rules.decide("BAD.example.test.", 443, OTHER).allowed


@pytest.mark.parametrize(
    ("address", "what"),
    [
        ("127.0.0.1", "loopback"),
        ("10.0.0.5", "private"),
        ("172.20.1.1", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("169.254.1.1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("255.255.255.255", "reserved"),
        ("::1", "loopback"),
        ("fe80::1", "link-local"),
        ("fd12::1", "unique local"),
        ("ff02::1", "multicast"),
        ("::ffff:10.0.0.5", "private"),
        ("64:ff9b::a00:5", "private"),
        ("192.0.2.2", "the daemon's host"),
        ("fd00::2", "the daemon's host"),
    ],
)
def test_a_name_rule_never_opens_special_addresses(address: str, what: str) -> None:
    # "allowed.test resolves to 10.0.0.5": the rebinding answer is refused.
    rules = ruleset("allowed.test", "*.test")
    decision = rules.decide("allowed.test", 443, ip_address(address))
    assert not decision.allowed
    assert decision.reason.startswith(f"allowed.test resolves to {ip_address(address)}, ")
    assert what in decision.reason
    assert not rules.decide(None, 443, ip_address(address)).allowed


def test_an_address_rule_inside_a_special_range_opens_it() -> None:
    rules = ruleset("10.0.0.0/8:5432", "192.0.2.2", "fd00::/8", "db.internal")
    assert rules.decide(None, 5432, ip_address("10.2.3.4")).allowed
    assert rules.decide("db.internal", 5432, ip_address("10.2.3.4")).allowed
    # The name must be allowed too: an address rule does not make every name resolvable.
    assert not rules.decide("other.internal", 5432, ip_address("10.2.3.4")).allowed
    assert rules.decide(None, 80, ip_address("192.0.2.2")).allowed
    assert rules.decide(None, 80, ip_address("fd12::1")).allowed
    # fd00::2 is the host's own: a range around it does not name it.
    assert not rules.decide(None, 80, ip_address("fd00::2")).allowed
    # 0.0.0.0/0 (everything) names no special range.
    broad = ruleset("0.0.0.0/0", "::/0")
    assert broad.decide(None, 443, PUBLIC).allowed
    assert not broad.decide(None, 443, ip_address("10.0.0.1")).allowed
    assert not broad.decide(None, 443, ip_address("::ffff:10.0.0.1")).allowed
    assert not broad.decide(None, 443, ip_address("::1")).allowed


@pytest.mark.parametrize(
    "address", ["169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254", "100.100.100.200"]
)
def test_metadata_is_never_allowed(address: str) -> None:
    rules = ruleset("169.254.0.0/16", "100.64.0.0/10", "fd00::/8", "::ffff:0:0/96", "meta.test")
    decision = rules.decide("meta.test", 80, ip_address(address))
    assert not decision.allowed
    assert "cloud metadata address: never allowed" in decision.reason


def test_names_no_rule_allows_are_refused_before_resolving() -> None:
    # A DNS tunnel through the daemon: <data>.attacker.example must never reach a resolver.
    rules = ruleset("allowed.test", "203.0.113.0/24", deny=("bad.allowed.test",))
    assert rules.before_resolving("allowed.test", 443) is None
    refused = rules.before_resolving("c2VjcmV0.attacker.example", 443)
    assert refused is not None and not refused.allowed
    assert refused.reason == "c2vjcmv0.attacker.example is not in this sandbox's allow list"
    assert rules.before_resolving("sub.allowed.test", 443) is not None  # not below allowed.test
    wild = ruleset("*.allowed.test", deny=("bad.allowed.test",))
    denied = wild.before_resolving("BAD.allowed.test.", 443)
    assert denied is not None and denied.rule == "bad.allowed.test"
    none = ruleset(mode="none").before_resolving("allowed.test", 443)
    assert none is not None and "policy is none" in none.reason
    # An address rule does not open a name whose address it covers.
    assert not rules.decide("other.test", 443, PUBLIC).allowed


def test_an_invalid_request_host_is_refused_with_why() -> None:
    decision = ruleset("allowed.test").decide("allowed.test\r\nX: y", 443, PUBLIC)
    assert not decision.allowed
    assert "not a valid host name" in decision.reason

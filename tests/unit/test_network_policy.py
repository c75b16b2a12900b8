"""The network policy model (sandboxd/contract/network.py): its checks, and every
shape derived from it (proto, HTTP, JSON schema, TypeScript) held to it; the
daemon's registry of policies and decisions; the token scope that bounds it."""

from __future__ import annotations

import pytest

from sandboxd.contract import convert, network
from sandboxd.contract.errors import InvalidArgument, PermissionDenied
from sandboxd.contract.models import NetworkDecision, NetworkPolicy, SandboxInfo, SandboxOptions
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.daemon.auth import parse_scope
from sandboxd.service.network import NetworkRegistry
from sandboxd.service.scope import Scope
from sandboxd.transports.http import schemas

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "policy",
    [
        NetworkPolicy(),
        NetworkPolicy("full"),
        NetworkPolicy("allow"),
        NetworkPolicy(
            "allow",
            ("example.com", "*.example.com", "example.com:443", "10.0.0.0/8:5432"),
            ("[2001:db8::]/32:443",),
        ),
    ],
)
def test_good_policies_pass(policy: NetworkPolicy) -> None:
    assert network.check(policy) is policy


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (NetworkPolicy("open"), "network.mode 'open' is not a mode: use none, allow, full"),  # type: ignore[arg-type]
        (NetworkPolicy("none", ("a.com",)), "only in mode 'allow'"),
        (NetworkPolicy("full", (), ("a.com",)), "only in mode 'allow'"),
        (NetworkPolicy("allow", ("",)), "network.allow: empty rule"),
        (
            NetworkPolicy("allow", ("a.com\r\nHost: b",)),
            "network.allow: rule 'a.com\\\\r\\\\nHost: b'",
        ),
        (
            NetworkPolicy("allow", (), ("a b.com",)),
            "network.deny: rule 'a b.com' has the character ' '",
        ),
        (NetworkPolicy("allow", ("a" * 301,)), "300 are accepted"),
        (NetworkPolicy("allow", ("a.com",) * 257), "257 rules; at most 256"),
        (NetworkPolicy("allow", (7,)), "rule 7 is not a string"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_policy_is_refused_naming_the_rule(policy: NetworkPolicy, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(")):
        network.check(policy)


def test_the_earlier_bool_still_reads_as_a_policy() -> None:
    assert SandboxOptions(network=True).network == NetworkPolicy("full")  # type: ignore[arg-type]
    assert SandboxOptions(network=False).network == NetworkPolicy()  # type: ignore[arg-type]
    assert SandboxOptions().network is None
    # Options a daemon stored before the policy (a label with "network": true).
    assert SandboxOptions.from_json({"network": True}).network == NetworkPolicy("full")
    assert SandboxOptions.from_json({"network": {"mode": "allow", "allow": ["a.com"]}}).network == (
        NetworkPolicy("allow", ("a.com",))
    )
    with pytest.raises(InvalidArgument, match="unknown field"):
        NetworkPolicy.from_json({"mode": "allow", "alow": ["a.com"]})


def test_only_full_warns_and_is_bridged() -> None:
    info = SandboxInfo("i", "running", "c", "v", SandboxOptions(network=NetworkPolicy("full")), 1)
    assert info.warnings == (network.FULL_WARNING,)
    assert convert.info_to_pb(info).warnings == [network.FULL_WARNING]
    assert [p.bridged for p in map(NetworkPolicy, network.MODES)] == [False, False, True]
    for mode in ("none", "allow"):
        plain = SandboxInfo(
            "i", "running", "c", "v", SandboxOptions(network=NetworkPolicy(mode)), 1
        )  # type: ignore[arg-type]
        assert plain.warnings == ()


def test_runtime_changes_between_none_and_allow_only() -> None:
    none, allow, full = (NetworkPolicy(m) for m in network.MODES)  # type: ignore[arg-type]
    network.transition(none, NetworkPolicy("allow", ("a.com",)))
    network.transition(allow, none)
    for old, new in ((none, full), (allow, full), (full, none), (full, allow)):
        with pytest.raises(InvalidArgument, match="cannot change from mode"):
            network.transition(old, new)


# ------------------------------------------------------------------ drift


def test_every_mode_has_its_proto_enum_value_and_no_other() -> None:
    names = set(pb.NetworkMode.keys()) - {"NETWORK_MODE_UNSPECIFIED"}
    assert names == {f"NETWORK_MODE_{mode.upper()}" for mode in network.MODES}
    for mode in network.MODES:
        policy = NetworkPolicy(mode, ("a.com",) if mode == "allow" else ())  # type: ignore[arg-type]
        assert convert.policy_from_pb(convert.policy_to_pb(policy)) == policy
    assert convert.policy_from_pb(pb.NetworkPolicy()) == NetworkPolicy()


def test_an_unknown_proto_mode_is_refused_not_guessed() -> None:
    with pytest.raises(InvalidArgument, match=r"network\.mode 9 is not a mode"):
        convert.policy_from_pb(pb.NetworkPolicy(mode=9))  # type: ignore[arg-type]


def test_the_http_schema_is_the_models() -> None:
    schema = schemas.NetworkPolicy.model_json_schema()
    assert schema["properties"]["mode"]["enum"] == list(network.MODES)
    assert set(schema["properties"]) == set(network.json_schema()["properties"])  # type: ignore[arg-type]
    assert schema["properties"]["allow"]["maxItems"] == network.MAX_RULES
    policy = NetworkPolicy("allow", ("a.com",), ("b.a.com",))
    assert schemas.NetworkPolicy.from_model(policy).to_model() == policy
    options = schemas.SandboxOptions.model_validate({"network": {"mode": "full"}}).to_model()
    assert options.network == NetworkPolicy("full")
    assert schemas.SandboxOptions.model_validate({"network": True}).to_model().network == (
        NetworkPolicy("full")
    )


def test_the_json_schema_names_every_mode_and_limit() -> None:
    schema = network.json_schema()
    properties = schema["properties"]
    assert properties["mode"]["enum"] == list(network.MODES)  # type: ignore[index]
    assert properties["allow"]["maxItems"] == network.MAX_RULES  # type: ignore[index]
    assert schema["additionalProperties"] is False


# ------------------------------------------------------------------ registry


def _decision(allowed: bool, n: int = 0) -> NetworkDecision:
    return NetworkDecision(n, "a.com", 443, "192.0.2.1", allowed, "a.com", "because", "connect")


def test_an_unknown_sandbox_gets_mode_none() -> None:
    assert NetworkRegistry().current("nobody") == NetworkPolicy()


def test_listeners_hear_each_change_once_and_a_bad_one_does_not_stop_the_rest() -> None:
    registry = NetworkRegistry()
    heard: list[tuple[str, NetworkPolicy]] = []

    def broken(instance_id: str, policy: NetworkPolicy) -> None:
        raise RuntimeError("listener bug")

    registry.on_change(broken)
    stop = registry.on_change(lambda i, p: heard.append((i, p)))
    allow = NetworkPolicy("allow", ("a.com",))
    registry.set("a", allow)
    registry.set("a", allow)  # no change: no word
    assert registry.current("a") == allow
    registry.forget("a")
    assert registry.current("a") == NetworkPolicy()
    assert heard == [("a", allow), ("a", NetworkPolicy())]
    stop()
    registry.set("a", allow)
    assert len(heard) == 2


def test_the_log_is_a_bounded_ring_per_sandbox() -> None:
    registry = NetworkRegistry(log_size=3)
    for n in range(5):
        registry.record("a", _decision(n % 2 == 0, n))
    registry.record("b", _decision(False))
    assert [e.at_ms for e in registry.entries("a")] == [2, 3, 4]
    assert [e.at_ms for e in registry.entries("a", limit=2)] == [3, 4]
    assert len(registry.entries("b")) == 1
    registry.forget("a")
    assert registry.entries("a") == []


def test_decisions_are_counted_by_verdict() -> None:
    from sandboxd.observability import metrics

    def count(verdict: str) -> float:
        return metrics.EGRESS_DECISIONS.labels(verdict)._value.get()  # type: ignore[no-any-return]

    before = count("allowed"), count("denied")
    registry = NetworkRegistry()
    registry.record("a", _decision(True))
    registry.record("a", _decision(False))
    registry.record("a", _decision(False))
    assert (count("allowed"), count("denied")) == (before[0] + 1, before[1] + 2)


# ------------------------------------------------------------------ scope


def test_a_token_may_set_modes_up_to_its_network_field() -> None:
    assert parse_scope([]).network == "full"  # the operator's
    assert parse_scope(["tenant=acme"]).network == "allow"
    assert parse_scope(["scope=ci-*"]).network == "allow"
    assert parse_scope(["tenant=acme", "network=full"]).network == "full"
    narrow = parse_scope(["scope=ci-*", "network=none"])
    narrow.check_network(NetworkPolicy())
    for mode in ("allow", "full"):
        with pytest.raises(PermissionDenied, match="may set network mode 'none' at most"):
            narrow.check_network(NetworkPolicy(mode))  # type: ignore[arg-type]
    Scope().check_network(NetworkPolicy("full"))
    with pytest.raises(InvalidArgument, match="network='open'"):
        parse_scope(["network=open"])


# ------------------------------------------------------------------ MCP


def test_the_mcp_bridge_tells_the_model_its_policy_and_offers_no_way_to_change_it() -> None:
    from runtime_client.sandbox import Sandbox
    from sandboxd.cli import _parser
    from sandboxd.mcp.bridge import build_server, tool_list

    args = _parser().parse_args(
        ["mcp", "--instance", "a", "--allow", "pypi.org", "--deny", "x.pypi.org"]
    )
    policy = network.from_flags(args.network, args.allow, args.deny)
    assert policy == NetworkPolicy("allow", ("pypi.org",), ("x.pypi.org",))
    assert network.from_flags(None, [], []) is None
    server = build_server(Sandbox(None, "a"), policy)  # type: ignore[arg-type]
    assert "to pypi.org (never: x.pypi.org)" in (server.instructions or "")
    assert "cannot connect anywhere" in (build_server(Sandbox(None, "a")).instructions or "")
    assert all("network" not in tool.name for tool in tool_list())

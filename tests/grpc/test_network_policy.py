"""The Network service over gRPC (local backend): a policy set at create, read
back, changed at runtime, refused when bad or wider than the token may set,
kept across a daemon restart; the decision log and its bounds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_client import GrpcSandboxFactory, InvalidArgument, NotFound, PermissionDenied
from runtime_client.sandbox import Sandbox
from sandboxd.contract.models import NetworkDecision, NetworkPolicy, SandboxOptions
from sandboxd.contract.network import FULL_WARNING
from sandboxd.daemon.assembly import Daemon
from sandboxd.daemon.settings import Settings

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

ADMIN = "admin-token-0123456789abcdef"
ACME = "acme-token-0123456789abcdef"  # tenant: up to allow
NARROW = "narrow-token-0123456789abcdef"  # network=none: may only narrow
PYPI = NetworkPolicy("allow", ("pypi.org", "files.pythonhosted.org:443"), ("evil.pypi.org",))


def _settings(tmp_path: Path) -> Settings:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{ADMIN}\n{ACME} tenant=acme\n{NARROW} scope=box-* network=none\n")
    return Settings(
        backend="local",
        local_root=tmp_path / "root",
        socket=tmp_path / "s.sock",
        tcp="127.0.0.1:0",
        tokens_file=tokens,
    )


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Daemon]:
    server = Daemon(_settings(tmp_path))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _client(server: Daemon, token: str) -> GrpcSandboxFactory:
    return GrpcSandboxFactory(f"127.0.0.1:{server.tcp_port}", token=token)


async def test_set_at_create_read_back_changed_and_refused(daemon: Daemon) -> None:
    async with _client(daemon, ADMIN) as admin:
        info, _ = await admin.transport.create_sandbox("box-1", SandboxOptions(network=PYPI))
        assert info.options.network == PYPI and info.warnings == ()
        assert (await admin.transport.get_sandbox("box-1")).options.network == PYPI
        assert daemon.service.network.current("box-1") == PYPI
        heard: list[tuple[str, NetworkPolicy]] = []
        daemon.service.network.on_change(lambda i, p: heard.append((i, p)))
        box = Sandbox(admin.transport, "box-1")
        changed = await box.set_network_policy({"mode": "none"})
        assert changed.options.network == NetworkPolicy()
        assert heard == [("box-1", NetworkPolicy())]  # the gateway is told at once
        # Bad input names the rule and changes nothing.
        with pytest.raises(InvalidArgument, match=r"network.deny: rule 'a\\nb'"):
            await box.set_network_policy(NetworkPolicy("allow", (), ("a\nb",)))
        with pytest.raises(InvalidArgument, match="cannot change from mode 'none' to 'full'"):
            await box.set_network_policy(NetworkPolicy("full"))
        assert (await admin.transport.get_sandbox("box-1")).options.network == NetworkPolicy()
        assert len(heard) == 1
        # Mode full: only by explicit choice, and GetSandbox says what it means.
        full, _ = await admin.transport.create_sandbox(
            "box-full", SandboxOptions(network=NetworkPolicy("full"))
        )
        assert full.warnings == (FULL_WARNING,)
        assert (await admin.transport.get_sandbox("box-full")).warnings == (FULL_WARNING,)
        with pytest.raises(InvalidArgument, match="cannot change from mode 'full'"):
            await Sandbox(admin.transport, "box-full").set_network_policy(PYPI)
        with pytest.raises(NotFound):
            await admin.transport.set_network_policy("box-none", PYPI)


async def test_a_token_cannot_set_a_wider_policy_than_it_may(daemon: Daemon) -> None:
    """How checked: with scope.check_network's comparison removed, the narrow
    token's create with allow rules succeeds and this test fails."""
    async with (
        _client(daemon, ADMIN) as admin,
        _client(daemon, ACME) as acme,
        _client(daemon, NARROW) as narrow,
    ):
        with pytest.raises(PermissionDenied, match="may set network mode 'none' at most"):
            await narrow.transport.create_sandbox("box-n", SandboxOptions(network=PYPI))
        await narrow.transport.create_sandbox("box-n")
        with pytest.raises(PermissionDenied, match="not 'allow'"):
            await Sandbox(narrow.transport, "box-n").set_network_policy(PYPI)
        # The operator widens it; the narrow token may narrow it again.
        await Sandbox(admin.transport, "box-n").set_network_policy(PYPI)
        await Sandbox(narrow.transport, "box-n").set_network_policy(NetworkPolicy())
        assert (await admin.transport.get_sandbox("box-n")).options.network == NetworkPolicy()
        # A tenant's token: allow rules yes, the bridge no.
        await acme.transport.create_sandbox("acme-1", SandboxOptions(network=PYPI))
        with pytest.raises(PermissionDenied, match="not 'full'"):
            await acme.transport.create_sandbox(
                "acme-2", SandboxOptions(network=NetworkPolicy("full"))
            )
        with pytest.raises(PermissionDenied):
            await acme.transport.fork_sandbox("acme-1", "acme-3", SandboxOptions(network=True))  # type: ignore[arg-type]


async def test_the_log_shows_recorded_decisions_within_bounds(daemon: Daemon) -> None:
    async with _client(daemon, ADMIN) as admin, _client(daemon, ACME) as acme:
        await admin.transport.create_sandbox("box-log", SandboxOptions(network=PYPI))
        assert await admin.transport.network_log("box-log") == []
        entries = [
            NetworkDecision(1, "pypi.org", 443, "192.0.2.10", True, "pypi.org", "ok", "connect"),
            NetworkDecision(
                2, "example.com", 443, "192.0.2.11", False, "",
                "example.com is not in this sandbox's allow list", "socks",
            ),
        ]  # fmt: skip
        for entry in entries:
            daemon.service.network.record("box-log", entry)
        assert await admin.transport.network_log("box-log") == entries
        assert await admin.transport.network_log("box-log", 1) == entries[1:]
        with pytest.raises(InvalidArgument, match="limit must be between 0"):
            await admin.transport.network_log("box-log", -1)
        with pytest.raises(NotFound):
            await admin.transport.network_log("box-nobody")
        with pytest.raises(NotFound):  # another tenant's log is as if it did not exist
            await acme.transport.network_log("box-log")


async def test_the_policy_survives_a_daemon_restart(tmp_path: Path) -> None:
    first = Daemon(_settings(tmp_path))
    await first.start()
    try:
        async with _client(first, ADMIN) as admin:
            await admin.transport.create_sandbox("box-a", SandboxOptions(network=PYPI))
            await admin.transport.create_sandbox("box-b", SandboxOptions(network=PYPI))
            await Sandbox(admin.transport, "box-b").set_network_policy(
                NetworkPolicy("allow", ("a.org",))
            )
    finally:
        await first.stop()
    second = Daemon(_settings(tmp_path))
    await second.start()
    try:
        assert second.service.network.current("box-a") == PYPI
        assert second.service.network.current("box-b") == NetworkPolicy("allow", ("a.org",))
        async with _client(second, ADMIN) as admin:
            info = await admin.transport.get_sandbox("box-b")
            assert info.options.network == NetworkPolicy("allow", ("a.org",))
            await admin.transport.delete_sandbox("box-b")
        assert second.service.network.current("box-b") == NetworkPolicy()
    finally:
        await second.stop()

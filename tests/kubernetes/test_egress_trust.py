"""Secrets' two pieces inside a Kubernetes workspace, which rides the same
executor channel as Docker's: the placeholder (never the value) in the
workload's environment, and the daemon's egress CA in the bundle every TLS
stack is pointed at (hello -> executor/trust.py)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest

from runtime_client import GrpcSandboxFactory, Sandbox, SandboxOptions
from sandboxd.contract.secrets import Secret, placeholder
from tests.kubernetes_fixtures import KubeDaemon

pytestmark = [pytest.mark.kubernetes, pytest.mark.anyio, pytest.mark.timeout(300)]


@pytest.fixture
async def factory(kube_daemon: KubeDaemon) -> AsyncIterator[GrpcSandboxFactory]:
    async with GrpcSandboxFactory(kube_daemon.target) as made:
        yield made


async def test_placeholder_and_ca_reach_a_pod(
    factory: GrpcSandboxFactory, kube_daemon: KubeDaemon
) -> None:
    value = "kube-secret-" + secrets.token_hex(8)
    instance = f"t-{secrets.token_hex(4)}"
    options = SandboxOptions(secrets=(Secret("TOKEN", value, ("api.test",), env="TOKEN"),))
    await factory.transport.create_sandbox(instance, options)
    sandbox = Sandbox(factory.transport, instance)
    try:
        result = await sandbox.exec(
            'echo "$TOKEN"; cat "$SSL_CERT_FILE"; echo; cat "$NODE_EXTRA_CA_CERTS"'
        )
        out = result.stdout.decode()
        assert out.splitlines()[0] == placeholder(instance, "TOKEN")
        assert value not in out
        ca = (kube_daemon.socket.parent / "state" / "egress-ca.pem").read_text()
        assert out.count(ca.strip()) == 2  # in the bundle, and alone for node
        assert out.count("BEGIN CERTIFICATE") > 10  # the image's own trust is kept
    finally:
        await sandbox.delete()

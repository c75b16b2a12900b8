"""The network policy on Kubernetes: set at create (the claim's and Pod's
annotations) and changed at runtime (a claim annotation, the service's note),
both read back by another daemon on the same namespace, as after a restart."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime_client import GrpcSandboxFactory
from sandboxd.contract.models import NetworkPolicy, SandboxOptions
from tests.kubernetes.kube import Cluster
from tests.kubernetes_fixtures import KubeDaemon

pytestmark = [pytest.mark.kubernetes, pytest.mark.anyio, pytest.mark.timeout(300)]

PYPI = NetworkPolicy("allow", ("pypi.org", "files.pythonhosted.org:443"))
LATER = NetworkPolicy("allow", ("github.com:443",), ("gist.github.com",))


@pytest.fixture
def other_daemon(cluster: Cluster, kube_daemon: KubeDaemon, tmp_path: Path) -> Iterator[KubeDaemon]:
    """A second daemon on the same namespaces: what a restarted one would read."""
    other = KubeDaemon(
        tmp_path / "twin.sock", cluster, kube_daemon.kube_namespace, namespace=kube_daemon.namespace
    )
    yield other
    other.stop()


async def test_a_policy_set_at_create_and_later_is_read_back_by_the_next_daemon(
    kube_daemon: KubeDaemon, other_daemon: KubeDaemon
) -> None:
    instance = f"np-{secrets.token_hex(3)}"
    async with GrpcSandboxFactory(kube_daemon.target) as made:
        info, _ = await made.transport.create_sandbox(instance, SandboxOptions(network=PYPI))
        assert info.options.network == PYPI
        await made.transport.set_network_policy(instance, LATER)
    other_daemon.start()
    async with GrpcSandboxFactory(other_daemon.target) as made:
        assert (await made.transport.get_sandbox(instance)).options.network == LATER
        back = await made.transport.set_network_policy(instance, NetworkPolicy())
        assert back.options.network == NetworkPolicy()
        await made.transport.delete_sandbox(instance)

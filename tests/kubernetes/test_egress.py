"""Egress on Kubernetes: mode ``allow`` through the daemon's gateway (the
executor channel rides ``pods/exec``), and nothing around it (the deny-all
NetworkPolicy keeps the Pod without egress; kube-router enforces it).

The test host lives in a network namespace on the node (tests/egress_net.py),
which the node routes to. That the policy is what stops the direct request
is tests/kubernetes/test_network.py's to show (the same Pod reaches the node
without it, nothing with it); not repeated here."""

from __future__ import annotations

import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime_client import GrpcSandboxFactory
from sandboxd.contract.models import NetworkPolicy, SandboxOptions
from tests.egress_net import EgressHosts
from tests.kubernetes.kube import Cluster
from tests.kubernetes_fixtures import KubeDaemon, drop_namespace, sandbox_namespace

pytestmark = [pytest.mark.kubernetes, pytest.mark.anyio, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EgressHosts]:
    folder = tmp_path_factory.mktemp("kube-egress")
    site = folder / "site"
    site.mkdir()
    (site / "hello.txt").write_text("hello over pods/exec\n")
    with EgressHosts(folder) as net:
        for address in (net.allowed, net.denied):
            net.serve(
                [sys.executable, "-m", "http.server", "--bind", address, "80"],
                cwd=site,
                ready_port=80,
                address=address,
            )
        yield net


@pytest.fixture
def egress_daemon(cluster: Cluster, hosts: EgressHosts, tmp_path: Path) -> Iterator[KubeDaemon]:
    name = sandbox_namespace(cluster)
    daemon = KubeDaemon(
        tmp_path / "sandboxd.sock",
        cluster,
        name,
        env={"SANDBOXD_EGRESS_HOSTS_FILE": str(hosts.hosts_file)},
    )
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()
        drop_namespace(cluster, name)


async def test_allowed_through_the_gateway_and_no_way_around_it(
    egress_daemon: KubeDaemon, hosts: EgressHosts
) -> None:
    options = SandboxOptions(network=NetworkPolicy(mode="allow", allow=("allowed.test",)))
    async with GrpcSandboxFactory(egress_daemon.target, options=options) as factory:
        box = await factory.create_sandbox(f"eg-{secrets.token_hex(3)}")
        try:
            ok = await box.exec("curl -sS http://allowed.test/hello.txt", timeout_ms=60_000)
            assert (ok.exit_code, ok.stdout) == (0, b"hello over pods/exec\n"), ok.stderr
            refused = await box.exec("curl -sS http://denied.test/hello.txt", timeout_ms=60_000)
            assert refused.stdout == (
                b"sandboxd egress: denied.test is not in this sandbox's allow list\n"
            )
            # Around the proxy, straight to the allowed host's address: no route.
            direct = await box.exec(
                f"curl -sS --noproxy '*' -m 5 http://{hosts.allowed}/hello.txt", timeout_ms=30_000
            )
            assert direct.exit_code != 0 and b"hello" not in direct.stdout
        finally:
            await box.delete()

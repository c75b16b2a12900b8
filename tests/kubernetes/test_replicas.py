"""Two sandboxd replicas serving one sandbox at the same time, on the cluster.

Two daemon processes on the same cluster namespace and sandboxd namespace
(what deploy/kubernetes runs as a Deployment of two behind one Service):
each reaches the Pod's executor through its own exec'd relay, and calls
through both at once are each answered right, with no reconnect (each
replica's ``sandboxd_executor_channels_total{kind="exec"}`` stays put: once a
replica's hello retired the other's channel, and every call could cost one).
"""

from __future__ import annotations

import asyncio
import re
import secrets
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime_client import GrpcSandboxFactory, Sandbox
from tests.kubernetes.kube import Cluster
from tests.kubernetes_fixtures import KubeDaemon, drop_namespace, sandbox_namespace

pytestmark = [pytest.mark.kubernetes, pytest.mark.anyio, pytest.mark.timeout(300)]

CALLS = 50


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def replicas(cluster: Cluster, tier_cleanup: None, tmp_path: Path) -> Iterator[list[KubeDaemon]]:
    kube_namespace = sandbox_namespace(cluster)
    namespace = f"k{secrets.token_hex(3)}"
    daemons: list[KubeDaemon] = []
    try:
        for n in range(2):
            port = _free_port()
            daemon = KubeDaemon(
                tmp_path / f"replica-{n}.sock",
                cluster,
                kube_namespace,
                "--http",
                f"127.0.0.1:{port}",
                namespace=namespace,
                # An HTTP listener needs a token (the unix socket's peers do not).
                env={"SANDBOXD_TOKEN": secrets.token_hex(16)},
            )
            daemon.http_port = port  # type: ignore[attr-defined]
            daemons.append(daemon)
            daemon.start()
        yield daemons
    finally:
        for daemon in daemons:
            daemon.stop()
        drop_namespace(cluster, kube_namespace)


def _exec_channels(daemon: KubeDaemon) -> float:
    """The channels this replica opened to executors (one hello each)."""
    port = daemon.http_port  # type: ignore[attr-defined]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found = re.search(r'^sandboxd_executor_channels_total\{kind="exec"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


async def test_two_replicas_call_one_sandbox_at_once(replicas: list[KubeDaemon]) -> None:
    one, two = replicas
    instance_id = f"replicas-{secrets.token_hex(3)}"
    async with GrpcSandboxFactory(one.target) as first, GrpcSandboxFactory(two.target) as second:
        made = await first.create_sandbox(instance_id)
        try:
            boxes = [made, Sandbox(second.transport, instance_id)]
            for box in boxes:  # each replica opens its channel
                assert (await box.exec("true")).exit_code == 0
            settled = [await asyncio.to_thread(_exec_channels, d) for d in replicas]
            assert all(count >= 1 for count in settled), settled
            answered = [0, 0]

            async def calls(n: int) -> None:
                for i in range(CALLS):
                    tag = f"{n}-{i}"
                    if i % 2 == 0:
                        command = f"echo {tag} >> /workspace/log-{n}; echo {tag}"
                        result = await boxes[n].call_tool("bash", {"command": command})
                        assert not result.is_error, result.text
                        assert result.text.startswith(f"{tag}\n"), result.text
                    else:
                        log = (await boxes[n].read_file(f"/workspace/log-{n}")).data
                        assert log.decode().split() == [f"{n}-{k}" for k in range(0, i, 2)]
                    answered[n] += 1

            await asyncio.gather(calls(0), calls(1))
            assert answered == [CALLS, CALLS]
            after = [await asyncio.to_thread(_exec_channels, d) for d in replicas]
            assert after == settled, "a replica reconnected while both called"
        finally:
            await made.delete()

"""The warm pool on the real cluster: a warm claim and Pod become the sandbox
by a compare-and-swap of their labels, the pool refills, a restarted daemon
finds the sandbox by its label and removes what its predecessor left warm,
and a stopping daemon removes its pool."""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from kubernetes import client

from runtime_client import GrpcSandboxFactory
from sandboxd.backends.kubernetes import manifests
from sandboxd.backends.shared import labels
from tests.kubernetes.kube import Cluster
from tests.kubernetes_fixtures import KubeDaemon, drop_namespace, sandbox_namespace

pytestmark = [pytest.mark.kubernetes, pytest.mark.anyio, pytest.mark.timeout(300)]


def _warm(cluster: Cluster, daemon: KubeDaemon, kind: str) -> list[Any]:
    selector = f"{manifests.selector(daemon.namespace)},{labels.POOLED}=true"
    if kind == "pods":
        return cluster.core.list_namespaced_pod(
            daemon.kube_namespace, label_selector=selector
        ).items
    return cluster.core.list_namespaced_persistent_volume_claim(
        daemon.kube_namespace, label_selector=selector
    ).items


async def _ready(factory: GrpcSandboxFactory, cluster: Cluster, daemon: KubeDaemon) -> str:
    """The name of the pool's one ready workspace, once the daemon says so."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (await factory.transport.get_status()).pool.ready == 1:
            [claim] = _warm(cluster, daemon, "claims")
            [pod] = _warm(cluster, daemon, "pods")
            assert pod.metadata.name == claim.metadata.name
            assert pod.status.phase == "Running" and claim.status.phase == "Bound"
            return str(claim.metadata.name)
        await anyio.sleep(0.1)
    raise AssertionError("the warm pool did not fill")


def _lease(cluster: Cluster, daemon: KubeDaemon, instance_id: str) -> Any:
    leases = client.CoordinationV1Api(cluster.api)
    try:
        return leases.read_namespaced_lease(
            manifests.object_name(daemon.namespace, instance_id), daemon.kube_namespace
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


async def test_a_warm_pod_becomes_the_sandbox_and_the_pool_refills(
    cluster: Cluster, tier_cleanup: None, tmp_path: Path
) -> None:
    kube_namespace = sandbox_namespace(cluster)
    daemon = KubeDaemon(tmp_path / "pool.sock", cluster, kube_namespace, "--kube-pool-size", "1")
    try:
        await anyio.to_thread.run_sync(daemon.start)
        instance_id = f"warm-{secrets.token_hex(3)}"
        async with GrpcSandboxFactory(daemon.target) as factory:
            warm = await _ready(factory, cluster, daemon)
            started = time.perf_counter()
            sandbox = await factory.create_sandbox(instance_id)
            result = await sandbox.exec("echo first")
            first_ms = (time.perf_counter() - started) * 1000
            assert result.stdout == b"first\n"
            print(f"warm create -> first command: {first_ms:.0f} ms")
            # The warm claim and Pod themselves, now the sandbox's (names
            # cannot change: the labels did).
            [claim] = cluster.core.list_namespaced_persistent_volume_claim(
                kube_namespace, label_selector=manifests.selector(daemon.namespace, instance_id)
            ).items
            [pod] = cluster.core.list_namespaced_pod(
                kube_namespace, label_selector=manifests.selector(daemon.namespace, instance_id)
            ).items
            assert claim.metadata.name == pod.metadata.name == warm
            for meta in (claim.metadata, pod.metadata):
                assert labels.POOLED not in meta.labels
                assert manifests.POOL_OWNER not in meta.labels
                assert meta.annotations[manifests.INSTANCE_ID] == instance_id
            # The Lease named like the instance stands for it.
            lease = _lease(cluster, daemon, instance_id)
            assert lease is not None
            assert lease.metadata.annotations[manifests.INSTANCE_ID] == instance_id
            await sandbox.write_file("/workspace/kept", b"kept")
            # Created again: the same sandbox (found by its label), not a second one.
            again = await factory.create_sandbox(instance_id)
            assert (await again.read_file("/workspace/kept")).data == b"kept"

            refill = await _ready(factory, cluster, daemon)
            assert refill != warm
            status = await factory.transport.get_status()
            assert (status.pool.size, status.pool.served) == (1, 1)

        # A daemon killed without its shutdown leaves its warm Pod; the next
        # one on this host removes it, and finds the sandbox by its label.
        await anyio.to_thread.run_sync(daemon.kill)
        await anyio.to_thread.run_sync(daemon.start)
        async with GrpcSandboxFactory(daemon.target) as factory:
            sandbox = await factory.create_sandbox(instance_id)
            assert (await sandbox.read_file("/workspace/kept")).data == b"kept"
            after = await _ready(factory, cluster, daemon)
            assert after not in (warm, refill)
            # The next warm one is a fresh claim: nothing of the first sandbox.
            other = await factory.create_sandbox(f"{instance_id}-b")
            assert await other.list_dir("/workspace") == []
            await other.delete()
            await sandbox.delete()
            assert _lease(cluster, daemon, instance_id) is None
            assert (
                cluster.core.list_namespaced_persistent_volume_claim(
                    kube_namespace, label_selector=manifests.selector(daemon.namespace, instance_id)
                ).items
                == []
            )
        # A stopping daemon removes its pool: warm Pods hold no one's data.
        await anyio.to_thread.run_sync(daemon.terminate)

        def gone() -> bool:
            return not _warm(cluster, daemon, "claims") and not _warm(cluster, daemon, "pods")

        deadline = time.monotonic() + 30
        while not gone():
            assert time.monotonic() < deadline, "the warm pool was left behind"
            await anyio.sleep(0.2)
    finally:
        daemon.stop()
        drop_namespace(cluster, kube_namespace)

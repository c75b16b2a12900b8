"""Fixtures of everything that runs on the single-node test cluster of scripts/k8s:
the kubernetes tier and the conformance suite's kubernetes backend.

The cluster is found by its admin kubeconfig (scripts/k8s/cluster.sh
kubeconfig). When it is not up, the session brings it up with
`scripts/k8s/cluster.sh up` under CI=true or SANDBOXD_K8S_UP=1 (a cold
build takes tens of minutes) and skips otherwise; under CI=true a cluster
that cannot be had fails every test of the tier, never skips it.

Every test gets a namespace of its own (label sandboxd.dev/test=kubernetes-tier),
deleted after it with everything in it; the session ends by checking that no
such namespace, and no volume of theirs, is left. The ``kubernetes`` client
package is imported inside the fixtures: this plugin is loaded by every
test run, including virtualenvs without it (the frameworks tier's).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.helpers import Daemon

if TYPE_CHECKING:
    from tests.kubernetes.kube import Cluster

REPO = Path(__file__).resolve().parents[1]
CLUSTER_SH = REPO / "scripts" / "k8s" / "cluster.sh"
#: The Pod Security Standard level a sandboxd namespace enforces
#: (sandboxd.backends.kubernetes.manifests.POD_SECURITY_LEVEL).
POD_SECURITY_LABEL = "pod-security.kubernetes.io/enforce"


def _cluster_sh(*args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLUSTER_SH), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _reachable(kubeconfig: str) -> Any:
    from kubernetes import client, config

    try:
        api = config.new_client_from_config(config_file=kubeconfig)
        client.VersionApi(api).get_code(_request_timeout=5)
        return api
    except Exception:
        return None


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: the Kubernetes test cluster is required: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    from kubernetes import client

    from tests.kubernetes.kube import Cluster

    if os.geteuid() != 0:
        _unavailable("the test cluster runs as root")
    found = _cluster_sh("kubeconfig", timeout=60)
    kubeconfig = found.stdout.strip()
    api = _reachable(kubeconfig) if found.returncode == 0 else None
    if api is None:
        if os.environ.get("CI") != "true" and os.environ.get("SANDBOXD_K8S_UP") != "1":
            _unavailable("no test cluster is up (make k8s, or SANDBOXD_K8S_UP=1 to start it here)")
        up = _cluster_sh("up")
        if up.returncode != 0:
            _unavailable(f"scripts/k8s/cluster.sh up failed:\n{up.stderr[-4000:]}")
        kubeconfig = up.stdout.strip().splitlines()[-1]
        api = _reachable(kubeconfig)
        if api is None:
            _unavailable(f"the cluster is up but its API server does not answer ({kubeconfig})")
    core = client.CoreV1Api(api)
    nodes = core.list_node().items
    assert len(nodes) == 1, [n.metadata.name for n in nodes]
    node = nodes[0]
    node_ip = next(a.address for a in node.status.addresses if a.type == "InternalIP")
    return Cluster(kubeconfig, api, core, node.metadata.name, node_ip)


@pytest.fixture(scope="session")
def tier_cleanup(cluster: Cluster) -> Iterator[None]:
    """After the tier: no test namespace and no volume of one is left."""
    from tests.kubernetes.kube import NAMESPACE_PREFIX

    yield
    deadline = time.monotonic() + 120
    while True:
        left = [
            ns.metadata.name
            for ns in cluster.core.list_namespace(
                label_selector="sandboxd.dev/test=kubernetes-tier"
            ).items
        ]
        pvs = [
            pv.metadata.name
            for pv in cluster.core.list_persistent_volume().items
            if pv.spec.claim_ref is not None
            and pv.spec.claim_ref.namespace.startswith(NAMESPACE_PREFIX)
        ]
        if not left and not pvs:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"left after the kubernetes tier: namespaces {left}, volumes {pvs}")
        time.sleep(1)


def make_namespace(cluster: Cluster, labels: dict[str, str] | None = None) -> str:
    """A fresh test namespace (deleted by ``drop_namespace``)."""
    from kubernetes import client

    from tests.kubernetes.kube import NAMESPACE_PREFIX, TEST_LABEL, wait_for

    name = NAMESPACE_PREFIX + uuid.uuid4().hex[:8]
    cluster.core.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(name=name, labels={**TEST_LABEL, **(labels or {})})
        )
    )
    # The namespace's default service account appears asynchronously; Pods need it.
    wait_for(lambda: _has_default_sa(cluster, name), 30, "the default service account")
    return name


def drop_namespace(cluster: Cluster, name: str) -> None:
    # Pods first, at once, so the namespace goes without their grace periods.
    cluster.core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
    cluster.core.delete_namespace(name)


def _has_default_sa(cluster: Cluster, namespace: str) -> bool:
    from kubernetes import client

    try:
        cluster.core.read_namespaced_service_account("default", namespace)
        return True
    except client.ApiException:
        return False


def sandbox_namespace(cluster: Cluster) -> str:
    """A namespace for sandboxd's Pods: Pod Security ``baseline`` enforced."""
    from sandboxd.backends.kubernetes.manifests import POD_SECURITY_LEVEL

    return make_namespace(cluster, {POD_SECURITY_LABEL: POD_SECURITY_LEVEL})


class KubeDaemon(Daemon):
    """``sandboxd serve --backend kubernetes`` into one cluster namespace."""

    def __init__(
        self,
        socket: Path,
        cluster: Cluster,
        kube_namespace: str,
        *args: str,
        namespace: str | None = None,
        kubeconfig: str | None = None,
        **kwargs: Any,
    ) -> None:
        from tests.kubernetes.kube import WORKSPACE_IMAGE

        self.kube_namespace = kube_namespace
        #: sandboxd's own namespace (labels); a twin daemon passes the same.
        self.namespace = namespace or f"k{secrets.token_hex(3)}"
        super().__init__(
            socket,
            "--backend", "kubernetes",
            "--kubeconfig", kubeconfig or cluster.kubeconfig,
            "--kube-namespace", kube_namespace,
            "--namespace", self.namespace,
            "--image", WORKSPACE_IMAGE,
            "--max-payload-bytes", str(1 << 20),
            "--drain-seconds", "5",
            # Room for the 64 MiB round trip; sparse, so cheap to make.
            "--disk-bytes", str(256 << 20),
            "--idle-check-interval-s", "0.5",
            "--lifetime-check-interval-s", "0.5",
            # Above the node's memory: the unschedulable request reaches the scheduler.
            "--max-memory-bytes", str(1 << 41),
            # The tier runs beside the per-Python runs on 2 cores (make test):
            # a cold Pod (claim provisioned, volume mounted, executor started)
            # took over 60 s there once. A Pod that is stuck still says why.
            "--start-timeout-s", "150",
            *args,
            **kwargs,
        )  # fmt: skip


@contextlib.contextmanager
def _daemon_of_its_own(cluster: Cluster, folder: Path, *args: str) -> Iterator[KubeDaemon]:
    """A daemon in a fresh sandbox namespace, both gone after."""
    name = sandbox_namespace(cluster)
    process = KubeDaemon(folder / "sandboxd.sock", cluster, name, *args)
    try:
        process.start()
        yield process
    finally:
        process.stop()
        drop_namespace(cluster, name)


@pytest.fixture(scope="session")
def kube_daemon(
    cluster: Cluster, tier_cleanup: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeDaemon]:
    """One daemon on the cluster for the session (the tier's; no warm pool)."""
    with _daemon_of_its_own(cluster, tmp_path_factory.mktemp("kube-daemon")) as daemon:
        yield daemon


#: The conformance daemon's warm pool: each case's fresh sandbox is claimed
#: (~0.1 s) rather than made (3-4 s), while the pool makes the next ones
#: behind it; the cold path is the tier's (tests/kubernetes).
CONFORMANCE_POOL = ("--kube-pool-size", "2", "--kube-pool-max", "4")


@pytest.fixture(scope="session")
def kube_pool_daemon(
    cluster: Cluster, tier_cleanup: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeDaemon]:
    """The conformance suite's daemon on the cluster: ``kube_daemon``'s, with a warm pool."""
    folder = tmp_path_factory.mktemp("kube-pool-daemon")
    with _daemon_of_its_own(cluster, folder, *CONFORMANCE_POOL) as daemon:
        yield daemon

"""deploy/kubernetes on the real cluster: sandboxd with nothing but the
ServiceAccount and Role it ships with serves sandboxes, a Role without the
stream permission gives an error that names it, and the whole kustomization
(Deployment, Service, policies) serves from inside the cluster."""

from __future__ import annotations

import base64
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from runtime_client import GrpcSandboxFactory
from runtime_client.errors import PermissionDenied
from tests.kubernetes.kube import CLUSTER_SH, REPO, Cluster
from tests.kubernetes_fixtures import KubeDaemon, drop_namespace, sandbox_namespace

pytestmark = [pytest.mark.kubernetes, pytest.mark.anyio, pytest.mark.timeout(300)]

DEPLOY = REPO / "deploy" / "kubernetes"


@pytest.fixture
def deployed(cluster: Cluster, tier_cleanup: None) -> Iterator[str]:
    """A sandbox namespace with deploy/kubernetes's ServiceAccount and Role."""
    name = sandbox_namespace(cluster)
    try:
        cluster.kubectl("apply", "-n", name, "-f", str(DEPLOY / "rbac.yaml"))
        yield name
    finally:
        drop_namespace(cluster, name)


def _service_account_kubeconfig(cluster: Cluster, namespace: str, folder: Path) -> str:
    """A kubeconfig holding only the ServiceAccount's token (as in a Pod)."""
    token = cluster.kubectl("create", "token", "sandboxd", "-n", namespace).stdout.strip()
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    server = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": server}],
        "users": [{"name": "sandboxd", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "sandboxd"}}],
        "current-context": "c",
    }
    assert base64.b64decode(server["certificate-authority-data"])
    path = folder / "sandboxd.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return str(path)


async def test_the_shipped_role_is_enough_and_a_missing_stream_permission_is_named(
    cluster: Cluster, deployed: str, tmp_path: Path
) -> None:
    kubeconfig = _service_account_kubeconfig(cluster, deployed, tmp_path)
    daemon = KubeDaemon(tmp_path / "sa.sock", cluster, deployed, kubeconfig=kubeconfig)
    daemon.start()
    try:
        async with GrpcSandboxFactory(daemon.target) as made:
            sandbox = await made.create_sandbox(f"sa-{secrets.token_hex(3)}")
            result = await sandbox.call_tool("bash", {"command": "echo served"})
            assert "served" in result.text
            await sandbox.delete()
            # The same Role without pods/exec: the next sandbox cannot be reached.
            role = next(
                doc
                for doc in yaml.safe_load_all((DEPLOY / "rbac.yaml").read_text())
                if doc["kind"] == "Role"
            )
            role["rules"] = [r for r in role["rules"] if "pods/exec" not in r["resources"]]
            role["rules"].append(
                {"apiGroups": [""], "resources": ["pods/attach"], "verbs": ["get", "create"]}
            )
            (tmp_path / "role.yaml").write_text(yaml.safe_dump(role))
            cluster.kubectl("apply", "-n", deployed, "-f", str(tmp_path / "role.yaml"))
            with pytest.raises(PermissionDenied, match="exec into the Pod"):
                await made.create_sandbox(f"sa-{secrets.token_hex(3)}")
    finally:
        daemon.stop()


@pytest.fixture
def sandboxd_image(cluster: Cluster) -> str:
    """sandboxd:latest (`make sidecar-image`; quick when up to date), in the cluster."""
    subprocess.run(
        [str(REPO / "images" / "sandboxd" / "build.sh"), "sandboxd:latest"],
        check=True,
        capture_output=True,
        timeout=1800,
    )
    subprocess.run(
        [str(CLUSTER_SH), "import-image", "sandboxd:latest"],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return "sandboxd:latest"


def _wait_until_the_service_routes(address: str, port: int, within: float = 60.0) -> None:
    """A rolled-out Deployment is not yet a routed Service: kube-proxy programs
    the ClusterIP from the EndpointSlice a moment after the Pods turn Ready,
    and until then the node rejects the connection (seen once in CI as
    "connection refused" right after `rollout status`)."""
    deadline = time.monotonic() + within
    while True:
        try:
            with socket.create_connection((address, port), timeout=2):
                return
        except OSError as exc:
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the Service {address}:{port} did not route within {within:.0f} s: {exc}"
                )
            time.sleep(0.5)


async def test_the_deployment_serves_from_inside_the_cluster(
    cluster: Cluster, tier_cleanup: None, sandboxd_image: str, tmp_path: Path
) -> None:
    """kubectl apply -k deploy/kubernetes: two replicas of sandboxd:latest
    (`make sidecar-image`, imported into the cluster) behind the Service,
    reached over TCP with a bearer token, serving sandboxes on the cluster."""
    name = sandbox_namespace(cluster)
    try:
        token = secrets.token_hex(16)
        (tmp_path / "tokens").write_text(token + "\n")
        cluster.kubectl(
            "create", "secret", "generic", "sandboxd-tokens", "-n", name,
            f"--from-file=tokens={tmp_path / 'tokens'}",
        )  # fmt: skip
        cluster.kubectl("apply", "-n", name, "-k", str(DEPLOY))
        rollout = cluster.kubectl(
            "rollout", "status", "deployment/sandboxd", "-n", name, "--timeout=240s", check=False
        )
        if rollout.returncode != 0:
            pods = cluster.kubectl("get", "pods", "-n", name, "-o", "wide", check=False).stdout
            logs = cluster.kubectl(
                "logs", "-n", name, "deployment/sandboxd", "--tail=30", check=False
            ).stdout
            pytest.fail(f"the Deployment did not roll out:\n{rollout.stderr}\n{pods}\n{logs}")
        service = cluster.core.read_namespaced_service("sandboxd", name)
        target = f"{service.spec.cluster_ip}:50051"
        _wait_until_the_service_routes(service.spec.cluster_ip, 50051)
        async with GrpcSandboxFactory(target, token=token) as made:
            sandbox = await made.create_sandbox(f"in-{secrets.token_hex(3)}")
            result = await sandbox.call_tool("bash", {"command": "echo in-cluster"})
            assert "in-cluster" in result.text
            await sandbox.delete()
    finally:
        drop_namespace(cluster, name)

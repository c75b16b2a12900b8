"""Networking of the test cluster: ClusterIP Services (kube-proxy) reach their
Pods from Pods and from the host, and NetworkPolicy is enforced (kube-router's
firewall): a Pod under a deny-all egress policy reaches neither the node, nor
another Pod, nor a Service, while the same Pod without it reaches all three."""

from __future__ import annotations

import urllib.request

from kubernetes import client

from tests.kubernetes.kube import Cluster, start_pod, tcp_probe, wait_for, workspace_pod

APISERVER_PORT = 6443
HTTP_PORT = 8080


def _web_server(cluster: Cluster, namespace: str) -> tuple[str, str]:
    """A Pod serving HTTP on 8080 and a ClusterIP Service for it: (pod IP, service IP)."""
    pod = start_pod(
        cluster,
        namespace,
        workspace_pod(
            "web",
            ["python3", "-m", "http.server", str(HTTP_PORT), "--directory", "/etc"],
            labels={"app": "web"},
        ),
    )
    service = cluster.core.create_namespaced_service(
        namespace,
        client.V1Service(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1ServiceSpec(
                selector={"app": "web"},
                ports=[client.V1ServicePort(port=80, target_port=HTTP_PORT, protocol="TCP")],
            ),
        ),
    )
    return pod.status.pod_ip, service.spec.cluster_ip


def test_cluster_ip_service_is_reachable_from_the_host(cluster: Cluster, namespace: str) -> None:
    _, service_ip = _web_server(cluster, namespace)

    def fetch() -> bytes | None:
        try:
            with urllib.request.urlopen(f"http://{service_ip}/hostname", timeout=2) as r:
                return r.read()
        except OSError:
            return None

    # Through kube-proxy's rules: the host's own traffic to the ClusterIP
    # lands on the Pod (which serves its /etc).
    assert wait_for(fetch, 30, f"http://{service_ip}/ from the host") == b"web\n"


def test_deny_all_egress_blocks_node_pod_and_service(cluster: Cluster, namespace: str) -> None:
    pod_ip, service_ip = _web_server(cluster, namespace)
    start_pod(
        cluster, namespace, workspace_pod("client", ["sleep", "infinity"], labels={"app": "client"})
    )
    targets = {
        "the node": (cluster.node_ip, APISERVER_PORT),
        "another pod": (pod_ip, HTTP_PORT),
        "a service": (service_ip, 80),
    }

    def reachable() -> dict[str, bool]:
        return {
            what: tcp_probe(cluster, namespace, "client", ip, port)
            for what, (ip, port) in targets.items()
        }

    # Without a policy the client reaches all three: the probe can succeed.
    assert wait_for(lambda: all(reachable().values()), 30, "the client to reach every target")

    client.NetworkingV1Api(cluster.api).create_namespaced_network_policy(
        namespace,
        client.V1NetworkPolicy(
            metadata=client.V1ObjectMeta(name="deny-all"),
            spec=client.V1NetworkPolicySpec(
                pod_selector=client.V1LabelSelector(match_labels={"app": "client"}),
                policy_types=["Egress"],
                egress=[],
            ),
        ),
    )
    blocked = wait_for(
        lambda: (r := reachable()) and not any(r.values()) and r,
        30,
        "the policy to block every target",
    )
    assert blocked == dict.fromkeys(targets, False)
    # The policy selects the client only: the web Pod still reaches the node.
    assert tcp_probe(cluster, namespace, "web", cluster.node_ip, APISERVER_PORT)

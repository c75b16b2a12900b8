"""RuntimeClass `gvisor` (handler runsc through containerd-shim-runsc-v1):
the Pod's container runs on gVisor's kernel, not the host's, without a
network (runsc --network=none, as the Docker set-up runs it; scripts/k8s/README.md
says why the sandbox network cannot work on this kernel)."""

from __future__ import annotations

import platform

from tests.kubernetes.kube import Cluster, pod_log_when_done, workspace_pod


def test_runtime_class_gvisor_runs_a_pod(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_pod(
        namespace,
        workspace_pod(
            "gvisor",
            [
                "sh",
                "-c",
                "uname -r; python3 -c "
                "'import socket; print(*(n for _, n in socket.if_nameindex()))'; dmesg",
            ],
            runtime_class="gvisor",
        ),
    )
    log = pod_log_when_done(cluster, namespace, "gvisor")
    kernel, interfaces, kmsg = log.split("\n", 2)
    # gVisor reports its own kernel version and boot messages.
    assert kernel != platform.release(), log
    assert "Starting gVisor" in kmsg, log
    assert interfaces == "lo", log
    phase = cluster.core.read_namespaced_pod("gvisor", namespace).status.phase
    assert phase == "Succeeded", log

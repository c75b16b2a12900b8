"""The test cluster itself: a Ready node of the pinned version, Pods of the
imported workspace image, no pulls, exec through the API server (v5), and
components that restart quickly (what the backend's tests will lean on)."""

from __future__ import annotations

import re
import subprocess
import time

from kubernetes import client

from tests.kubernetes.kube import (
    CLUSTER_SH,
    REPO,
    V5,
    Cluster,
    exec_ws,
    start_pod,
    wait_for,
    workspace_pod,
)


def _pinned_version() -> str:
    go_mod = (REPO / "scripts" / "k8s" / "kube" / "go.mod").read_text()
    match = re.search(r"^\s*k8s\.io/kubernetes (v\S+)$", go_mod, re.M)
    assert match, "no k8s.io/kubernetes requirement in scripts/k8s/kube/go.mod"
    return match.group(1)


def test_node_is_ready_and_runs_the_pinned_version(cluster: Cluster) -> None:
    node = cluster.core.read_node(cluster.node_name)
    ready = {c.type: c.status for c in node.status.conditions}["Ready"]
    assert ready == "True"
    # One source for the version: the wrapper module's go.mod. The kubelet and
    # the API server report it (the -X stamps of scripts/k8s/build.sh).
    assert node.status.node_info.kubelet_version == _pinned_version()
    assert client.VersionApi(cluster.api).get_code().git_version == _pinned_version()
    assert node.status.node_info.container_runtime_version.startswith("containerd://1.7.")
    assert not node.spec.taints


def test_staging_modules_are_pinned_to_the_same_release() -> None:
    # k8s.io/kubernetes vX.Y.Z is built with each staging module at v0.Y.Z.
    version = _pinned_version()
    staging = "v0." + version.removeprefix("v").split(".", 1)[1]
    go_mod = (REPO / "scripts" / "k8s" / "kube" / "go.mod").read_text()
    replaces = re.findall(r"^\s*(k8s\.io/\S+) => (k8s\.io/\S+) (v\S+)$", go_mod, re.M)
    assert len(replaces) >= 25
    assert {v for _, _, v in replaces} == {staging}
    assert all(a == b for a, b, _ in replaces)


def test_workspace_pod_runs_from_the_imported_image(cluster: Cluster, namespace: str) -> None:
    pod = start_pod(cluster, namespace, workspace_pod("ws", ["sleep", "infinity"]))
    status = pod.status.container_statuses[0]
    assert status.ready and status.image.endswith("sandboxd-workspace:latest")
    events = cluster.core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=ws"
    ).items
    assert not [e for e in events if e.reason == "Pulling"], "the kubelet tried to pull"
    result = exec_ws(cluster, namespace, "ws", ["id", "-u"])
    assert (result.exit_code, result.stdout) == (0, b"1000\n")


def test_exec_v5_stdin_half_close_gives_eof(cluster: Cluster, namespace: str) -> None:
    start_pod(cluster, namespace, workspace_pod("cat", ["sleep", "infinity"]))
    data = bytes(range(256)) * 512  # 128 KiB, every byte value
    # `cat` ends only when its stdin reaches EOF: without the v5 close frame
    # this would hang until the timeout.
    result = exec_ws(cluster, namespace, "cat", ["cat"], stdin=data, timeout=30)
    assert result.subprotocol == V5
    assert result.exit_code == 0
    assert result.stdout == data
    # The exit code travels on the status channel.
    failed = exec_ws(cluster, namespace, "cat", ["sh", "-c", "echo oops >&2; exit 7"])
    assert (failed.exit_code, failed.stderr) == (7, b"oops\n")


def test_missing_image_is_never_pulled(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_pod(
        namespace, workspace_pod("missing", ["true"], image="sandboxd-k8s-test/missing:never")
    )

    def waiting_reason() -> str | None:
        statuses = cluster.core.read_namespaced_pod("missing", namespace).status.container_statuses
        waiting = statuses[0].state.waiting if statuses else None
        return waiting.reason if waiting and waiting.reason != "ContainerCreating" else None

    assert wait_for(waiting_reason, 60, "the container to wait on its image") == "ErrImageNeverPull"


def test_a_pull_fails_at_once_rather_than_hanging(cluster: Cluster, namespace: str) -> None:
    # IfNotPresent with an image nobody imported: containerd's registries all
    # point at a closed port, so the pull is refused in seconds.
    started = time.monotonic()
    cluster.core.create_namespaced_pod(
        namespace,
        workspace_pod(
            "pull", ["true"], image="sandboxd-k8s-test/missing:pull", pull="IfNotPresent"
        ),
    )

    def waiting_reason() -> str | None:
        statuses = cluster.core.read_namespaced_pod("pull", namespace).status.container_statuses
        waiting = statuses[0].state.waiting if statuses else None
        return waiting.reason if waiting and waiting.reason != "ContainerCreating" else None

    assert wait_for(waiting_reason, 60, "the pull to fail") in ("ErrImagePull", "ImagePullBackOff")
    assert time.monotonic() - started < 60


def _exec_works(cluster: Cluster, namespace: str, pod: str) -> bool:
    try:
        return exec_ws(cluster, namespace, pod, ["true"], timeout=10).exit_code == 0
    except Exception:
        return False


def _script(*args: str) -> None:
    result = subprocess.run([str(CLUSTER_SH), *args], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr


def test_api_server_restart_and_kubelet_stop_start(cluster: Cluster, namespace: str) -> None:
    start_pod(cluster, namespace, workspace_pod("survivor", ["sleep", "infinity"]))
    started = time.monotonic()
    _script("restart", "kube-apiserver")
    assert cluster.core.read_namespaced_pod("survivor", namespace).status.phase == "Running"
    _script("stop", "kubelet")
    # The API server is up but cannot reach the kubelet: exec fails.
    assert not _exec_works(cluster, namespace, "survivor")
    _script("start", "kubelet")
    # Back once the kubelet has found its Pods again.
    wait_for(
        lambda: _exec_works(cluster, namespace, "survivor"), 60, "exec after the kubelet's restart"
    )
    # The Pod's container outlived its kubelet.
    assert (
        cluster.core.read_namespaced_pod("survivor", namespace)
        .status.container_statuses[0]
        .restart_count
        == 0
    )
    assert time.monotonic() - started < 120

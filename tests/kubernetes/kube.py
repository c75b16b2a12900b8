"""Helpers of the kubernetes tier: Pods of the workspace image, and exec
through the API server over WebSocket `v5.channel.k8s.io`, written here on
websocket-client so the test sees the protocol itself (the negotiated
subprotocol, the channel bytes, stdin's close frame [255, 0], the status
channel) rather than a client library's view of it.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import websocket
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SH = REPO / "scripts" / "k8s" / "cluster.sh"
WORKSPACE_IMAGE = os.environ.get("SANDBOXD_IMAGE", "sandboxd-workspace:latest")
TEST_LABEL = {"sandboxd.dev/test": "kubernetes-tier"}
NAMESPACE_PREFIX = "sbx-k8s-test-"

V5 = "v5.channel.k8s.io"
STDIN, STDOUT, STDERR, STATUS, CLOSE = 0, 1, 2, 3, 255


@dataclass(frozen=True)
class Cluster:
    kubeconfig: str
    api: client.ApiClient
    core: client.CoreV1Api
    node_name: str
    node_ip: str

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(CLUSTER_SH), "kubectl", *args], capture_output=True, text=True, check=check
        )


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    """Poll check() until it returns something truthy; fail with `what` after timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def workspace_pod(
    name: str,
    command: list[str],
    *,
    labels: dict[str, str] | None = None,
    image: str = WORKSPACE_IMAGE,
    pull: str = "Never",
    volumes: dict[str, str] | None = None,
    runtime_class: str | None = None,
) -> client.V1Pod:
    """A Pod of one container; volumes maps a claim name to its mount path."""
    mounts = [
        client.V1VolumeMount(name=f"v{i}", mount_path=path)
        for i, path in enumerate((volumes or {}).values())
    ]
    pod_volumes = [
        client.V1Volume(
            name=f"v{i}",
            persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(claim_name=claim),
        )
        for i, claim in enumerate((volumes or {}).keys())
    ]
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels or {"app": name}),
        spec=client.V1PodSpec(
            restart_policy="Never",
            termination_grace_period_seconds=0,
            automount_service_account_token=False,
            enable_service_links=False,
            runtime_class_name=runtime_class,
            # The workspace image's user; the volume's files become its group's.
            security_context=client.V1PodSecurityContext(
                run_as_user=1000, run_as_group=1000, fs_group=1000
            ),
            containers=[
                client.V1Container(
                    name="main",
                    image=image,
                    image_pull_policy=pull,
                    command=command,
                    volume_mounts=mounts or None,
                )
            ],
            volumes=pod_volumes or None,
        ),
    )


def start_pod(
    cluster: Cluster, namespace: str, pod: client.V1Pod, timeout: float = 90
) -> client.V1Pod:
    """Create the Pod and wait until it runs; fail with its state otherwise."""
    cluster.core.create_namespaced_pod(namespace, pod)
    name = pod.metadata.name

    def running() -> client.V1Pod | None:
        current = cluster.core.read_namespaced_pod(name, namespace)
        if current.status.phase in ("Failed", "Succeeded"):
            raise AssertionError(f"pod {name} ended: {current.status}")
        return current if current.status.phase == "Running" and current.status.pod_ip else None

    try:
        return wait_for(running, timeout, f"pod {namespace}/{name} to run")
    except BaseException:
        events = cluster.core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name}"
        )
        print(
            f"events of pod {name}:",
            *(f"{e.reason}: {e.message}" for e in events.items),
            sep="\n  ",
        )
        raise


def pod_log_when_done(cluster: Cluster, namespace: str, name: str, timeout: float = 90) -> str:
    def done() -> bool:
        return cluster.core.read_namespaced_pod(name, namespace).status.phase in (
            "Succeeded",
            "Failed",
        )

    wait_for(done, timeout, f"pod {namespace}/{name} to finish")
    return str(cluster.core.read_namespaced_pod_log(name, namespace))


@dataclass
class ExecResult:
    exit_code: int
    stdout: bytes
    stderr: bytes
    subprotocol: str


def _ssl_options(api: client.ApiClient) -> dict[str, Any]:
    c = api.configuration
    return {
        "cert_reqs": ssl.CERT_REQUIRED,
        "ca_certs": c.ssl_ca_cert,
        "certfile": c.cert_file,
        "keyfile": c.key_file,
    }


def exec_ws(
    cluster: Cluster,
    namespace: str,
    pod: str,
    argv: list[str],
    stdin: bytes | None = None,
    *,
    close_stdin: bool = True,
    timeout: float = 30,
) -> ExecResult:
    """Run argv in the Pod through the API server's exec (WebSocket, v5).

    stdin, when given, is sent on channel 0 and then, if close_stdin, closed
    with the v5 close frame; the result is read until the status channel.
    """
    host = urllib.parse.urlsplit(cluster.api.configuration.host)
    query = [("command", a) for a in argv] + [("stdout", "true"), ("stderr", "true")]
    if stdin is not None:
        query.append(("stdin", "true"))
    url = f"wss://{host.netloc}/api/v1/namespaces/{namespace}/pods/{pod}/exec?{urllib.parse.urlencode(query)}"
    ws = websocket.create_connection(
        url, subprotocols=[V5], sslopt=_ssl_options(cluster.api), timeout=timeout
    )
    try:
        if stdin is not None:
            for i in range(0, len(stdin), 32 * 1024):
                ws.send_binary(bytes([STDIN]) + stdin[i : i + 32 * 1024])
            if close_stdin:
                ws.send_binary(bytes([CLOSE, STDIN]))
        out, err = bytearray(), bytearray()
        status: dict[str, Any] | None = None
        while status is None:
            opcode, data = ws.recv_data()
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                break
            if not data:
                continue
            channel, payload = data[0], data[1:]
            if channel == STDOUT:
                out += payload
            elif channel == STDERR:
                err += payload
            elif channel == STATUS:
                status = json.loads(payload)
        if status is None:
            raise AssertionError(
                f"exec {argv}: the stream closed without a status (stdout {bytes(out)!r})"
            )
        return ExecResult(_exit_code(status), bytes(out), bytes(err), ws.subprotocol or "")
    finally:
        ws.close()


def _exit_code(status: dict[str, Any]) -> int:
    if status.get("status") == "Success":
        return 0
    for cause in status.get("details", {}).get("causes", []):
        if cause.get("reason") == "ExitCode":
            return int(cause["message"])
    raise AssertionError(f"exec failed without an exit code: {status}")


def tcp_probe(
    cluster: Cluster, namespace: str, pod: str, host: str, port: int, timeout: float = 2
) -> bool:
    """Whether a TCP connection from inside the Pod to host:port is accepted."""
    script = (
        "import socket,sys\n"
        f"try: socket.create_connection(({host!r}, {port}), timeout={timeout}).close()\n"
        "except OSError as e: print(e); sys.exit(1)\n"
    )
    return exec_ws(cluster, namespace, pod, ["python3", "-c", script]).exit_code == 0

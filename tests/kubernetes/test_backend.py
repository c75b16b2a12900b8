"""The kubernetes backend on the real test cluster: sandboxd serving over gRPC
with ``--backend kubernetes``, its Pods and claims read back through the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from runtime_client import GrpcSandboxFactory, Runtime, Sandbox, SandboxOptions
from runtime_client.errors import InvalidArgument, ResourceExhausted, SandboxUnavailable
from sandboxd.backends.kubernetes import manifests
from tests.kubernetes.kube import CLUSTER_SH, Cluster, wait_for
from tests.kubernetes_fixtures import (
    POD_SECURITY_LABEL,
    KubeDaemon,
    drop_namespace,
    sandbox_namespace,
)

pytestmark = [pytest.mark.kubernetes, pytest.mark.anyio, pytest.mark.timeout(300)]


def _selector(daemon: KubeDaemon, instance_id: str | None = None) -> str:
    return manifests.selector(daemon.namespace, instance_id)


def _pods(cluster: Cluster, daemon: KubeDaemon, instance_id: str | None = None) -> list[Any]:
    return cluster.core.list_namespaced_pod(
        daemon.kube_namespace, label_selector=_selector(daemon, instance_id)
    ).items


def _claims(cluster: Cluster, daemon: KubeDaemon, instance_id: str | None = None) -> list[Any]:
    return cluster.core.list_namespaced_persistent_volume_claim(
        daemon.kube_namespace, label_selector=_selector(daemon, instance_id)
    ).items


@pytest.fixture
async def factory(kube_daemon: KubeDaemon) -> AsyncIterator[GrpcSandboxFactory]:
    async with GrpcSandboxFactory(kube_daemon.target) as made:
        yield made


@pytest.fixture
async def sandbox(factory: GrpcSandboxFactory) -> AsyncIterator[Sandbox]:
    made = await factory.create_sandbox(f"t-{secrets.token_hex(4)}")
    try:
        yield made
    finally:
        await made.delete()


@pytest.fixture
def extra_daemons(tmp_path: Path) -> Iterator[list[KubeDaemon]]:
    """Daemons a test starts (and may kill); stopped after it."""
    started: list[KubeDaemon] = []
    yield started
    for daemon in started:
        daemon.stop()


def _twin(daemon: KubeDaemon, cluster: Cluster, folder: Path, *args: str) -> KubeDaemon:
    """Another daemon on the same cluster namespace and sandboxd namespace."""
    socket = folder / f"twin-{secrets.token_hex(3)}.sock"
    return KubeDaemon(socket, cluster, daemon.kube_namespace, *args, namespace=daemon.namespace)


async def test_create_gives_a_running_pod_and_a_bound_claim(
    cluster: Cluster, kube_daemon: KubeDaemon, sandbox: Sandbox
) -> None:
    [pod] = _pods(cluster, kube_daemon, sandbox.instance_id)
    [claim] = _claims(cluster, kube_daemon, sandbox.instance_id)
    assert pod.status.phase == "Running"
    assert claim.status.phase == "Bound"
    name = manifests.object_name(kube_daemon.namespace, sandbox.instance_id)
    assert pod.metadata.name == claim.metadata.name == name
    for meta in (pod.metadata, claim.metadata):
        assert meta.labels["sandboxd.managed"] == "true"
        assert meta.labels["sandboxd.namespace"] == kube_daemon.namespace
        assert meta.annotations[manifests.INSTANCE_ID] == sandbox.instance_id
    # The claim's size is the disk limit.
    assert claim.spec.resources.requests["storage"] == str(256 << 20)
    spec = pod.spec
    assert spec.automount_service_account_token is False
    assert spec.enable_service_links is False
    assert spec.security_context.seccomp_profile.type == "RuntimeDefault"
    assert not any(volume.host_path for volume in spec.volumes)
    [container] = spec.containers
    security = container.security_context
    assert security.capabilities.drop == ["ALL"]
    assert sorted(security.capabilities.add) == ["KILL", "SETGID", "SETUID"]
    assert security.read_only_root_filesystem is True
    assert security.allow_privilege_escalation is False
    assert set(container.resources.limits) == {"memory", "cpu", "ephemeral-storage"}
    # The workload is the sandbox user with no capability; the root is read-only.
    result = await sandbox.exec("id -u; grep CapEff /proc/self/status; touch /x 2>&1; true")
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "1000"
    assert lines[1].split()[1] == "0000000000000000"
    assert "Read-only file system" in lines[2]
    # A fresh workspace is empty (no lost+found of the claim's ext4).
    assert await sandbox.list_dir("/workspace") == []


async def test_the_namespace_enforces_pod_security_baseline(
    cluster: Cluster, kube_daemon: KubeDaemon, sandbox: Sandbox
) -> None:
    """Sandbox Pods were admitted under ``enforce: baseline`` (their namespace's
    label), and the label is enforced: a Pod adding NET_ADMIN (outside
    baseline's capabilities; privileged Pods this API server refuses anyway)
    is refused there."""
    ns = cluster.core.read_namespace(kube_daemon.kube_namespace)
    assert ns.metadata.labels[POD_SECURITY_LABEL] == manifests.POD_SECURITY_LEVEL == "baseline"
    net_admin = client.V1Pod(
        metadata=client.V1ObjectMeta(name="net-admin"),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="c",
                    image="sandboxd-workspace:latest",
                    image_pull_policy="Never",
                    security_context=client.V1SecurityContext(
                        capabilities=client.V1Capabilities(add=["NET_ADMIN"])
                    ),
                )
            ]
        ),
    )
    with pytest.raises(client.ApiException) as refused:
        cluster.core.create_namespaced_pod(kube_daemon.kube_namespace, net_admin)
    assert refused.value.status == 403
    assert "violates PodSecurity" in str(refused.value.body)


async def test_no_executor_traffic_in_the_pod_log(
    cluster: Cluster, kube_daemon: KubeDaemon, sandbox: Sandbox
) -> None:
    marker = f"channel-bytes-{secrets.token_hex(8)}"
    await sandbox.write_file("/workspace/m.txt", marker.encode())
    assert (await sandbox.read_file("/workspace/m.txt")).data == marker.encode()
    result = await sandbox.call_tool("bash", {"command": f"echo {marker}-bash"})
    assert marker in result.text
    [pod] = _pods(cluster, kube_daemon, sandbox.instance_id)
    log = cluster.core.read_namespaced_pod_log(pod.metadata.name, kube_daemon.kube_namespace)
    assert marker not in log
    assert '"id"' not in log and '"op"' not in log, log[:2000]


async def test_64_mib_binary_round_trip(sandbox: Sandbox, tmp_path: Path) -> None:
    data = os.urandom(64 << 20)
    written = await sandbox.upload("/workspace/big.bin", data)
    assert written.size == len(data)
    assert written.sha256 == hashlib.sha256(data).hexdigest()
    done = await sandbox.download("/workspace/big.bin", tmp_path / "back.bin")
    assert done.sha256 == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "back.bin").read_bytes() == data


async def test_process_stdin_half_close_gives_eof(sandbox: Sandbox) -> None:
    process = await sandbox.start_process(["sh", "-c", "wc -c; echo done"])
    await process.write(b"x" * 100_000)
    await process.close_stdin()
    output = b""
    async for chunk in process:
        output += chunk.data
    exit_ = await process.wait()
    assert exit_.info.exit_code == 0
    assert output.split() == [b"100000", b"done"]


def _kill_relays(cluster: Cluster, daemon: KubeDaemon, pod: str) -> None:
    """SIGKILL every relay in the Pod: the executor channel's exec stream ends."""
    needle = "b'sandboxd ' + b'relay'"
    code = (
        "import os\n"
        "for p in os.listdir('/proc'):\n"
        "    try:\n"
        f"        if p.isdigit() and {needle} in open('/proc/'+p+'/cmdline','rb').read():\n"
        "            os.kill(int(p), 9)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    cluster.kubectl("-n", daemon.kube_namespace, "exec", pod, "--", "/usr/bin/python3", "-c", code)


async def test_a_killed_stream_loses_and_repeats_nothing(
    cluster: Cluster, kube_daemon: KubeDaemon, sandbox: Sandbox
) -> None:
    [pod] = _pods(cluster, kube_daemon, sandbox.instance_id)
    command = "sleep 2; echo ran >> /workspace/count"
    call = asyncio.ensure_future(
        sandbox.call_tool("bash", {"command": command}, tool_call_id="once")
    )
    await asyncio.sleep(0.5)
    await asyncio.to_thread(_kill_relays, cluster, kube_daemon, pod.metadata.name)
    try:
        first: Any = await call
    except Exception as exc:  # the stream broke under the call
        first = exc
    # The next call works on a new stream; the retried call is answered from
    # the executor's record once it finished, and never runs twice.
    await asyncio.sleep(2.5)
    again = await sandbox.call_tool("bash", {"command": command}, tool_call_id="once")
    assert not again.is_error, again.text
    if not isinstance(first, Exception):
        assert again.fields.get("replayed") is True
    assert (await sandbox.read_file("/workspace/count")).data == b"ran\n", first
    # ... and 200 calls across more killed streams: each answered exactly once.
    lost = 0
    for i in range(200):
        if i % 50 == 25:
            await asyncio.to_thread(_kill_relays, cluster, kube_daemon, pod.metadata.name)
        for _ in range(3):
            try:
                result = await sandbox.call_tool(
                    "bash", {"command": f"echo {i} >> /workspace/calls"}, tool_call_id=f"c{i}"
                )
                assert not result.is_error, result.text
                break
            except Exception:
                lost += 1
    lines = (await sandbox.read_file("/workspace/calls")).data.decode().split()
    assert lines == [str(i) for i in range(200)], f"{lost} retried"


async def test_a_restarted_daemon_adopts_its_pods(
    cluster: Cluster, kube_daemon: KubeDaemon, tmp_path: Path, extra_daemons: list[KubeDaemon]
) -> None:
    first = _twin(kube_daemon, cluster, tmp_path)
    extra_daemons.append(first)
    first.start()
    async with GrpcSandboxFactory(first.target) as made:
        sandbox = await made.create_sandbox(f"adopt-{secrets.token_hex(3)}")
        await sandbox.write_file("/workspace/kept", b"kept")
        process = await sandbox.start_process(["sleep", "600"])
        [before] = _pods(cluster, kube_daemon, sandbox.instance_id)
    assert first.proc is not None
    first.proc.send_signal(signal.SIGTERM)
    first.proc.wait(30)
    second = _twin(kube_daemon, cluster, tmp_path)
    extra_daemons.append(second)
    second.start()
    async with GrpcSandboxFactory(second.target) as made:
        adopted = await made.transport.get_sandbox(sandbox.instance_id)
        assert adopted.state == "running"
        again = Sandbox(made.transport, sandbox.instance_id)
        assert (await again.read_file("/workspace/kept")).data == b"kept"
        handles = [info.handle for info in await again.list_processes()]
        assert process.handle in handles  # the executor, and its processes, lived on
        [after] = _pods(cluster, kube_daemon, sandbox.instance_id)
        assert after.metadata.uid == before.metadata.uid
        await again.delete()


async def test_two_racing_creators_end_with_one_pod(
    cluster: Cluster, kube_daemon: KubeDaemon, tmp_path: Path, extra_daemons: list[KubeDaemon]
) -> None:
    other = _twin(kube_daemon, cluster, tmp_path)
    extra_daemons.append(other)
    other.start()
    instance_id = f"race-{secrets.token_hex(3)}"
    async with (
        GrpcSandboxFactory(kube_daemon.target) as one,
        GrpcSandboxFactory(other.target) as two,
    ):
        a, b = await asyncio.gather(
            one.create_sandbox(instance_id), two.create_sandbox(instance_id)
        )
        assert len(_pods(cluster, kube_daemon, instance_id)) == 1
        assert len(_claims(cluster, kube_daemon, instance_id)) == 1
        # Both replicas serve the sandbox at once (executor.owners; calls of
        # both at once: test_replicas.py); a call that meets a stream just
        # dropped is UNAVAILABLE and safe to retry.
        await _retrying(lambda: a.write_file("/workspace/from-a", b"a"))
        read = await _retrying(lambda: b.read_file("/workspace/from-a"))
        assert read.data == b"a"
        await b.delete()


async def _retrying(call: Any, attempts: int = 3, pause: float = 0.0) -> Any:
    for attempt in range(attempts):
        try:
            return await call()
        except SandboxUnavailable:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(pause)
    return None


async def test_files_survive_a_deleted_pod_and_idle_stop(
    cluster: Cluster, kube_daemon: KubeDaemon, factory: GrpcSandboxFactory
) -> None:
    made = GrpcSandboxFactory(kube_daemon.target, options=SandboxOptions(idle_ttl_seconds=2))
    async with made:
        sandbox = await made.create_sandbox(f"idle-{secrets.token_hex(3)}")
    try:
        await sandbox.write_file("/workspace/f", b"survives")
        [pod] = _pods(cluster, kube_daemon, sandbox.instance_id)
        cluster.core.delete_namespaced_pod(
            pod.metadata.name, kube_daemon.kube_namespace, grace_period_seconds=0
        )
        wait_for(lambda: not _pods(cluster, kube_daemon, sandbox.instance_id), 60, "Pod gone")
        assert (await factory.transport.get_sandbox(sandbox.instance_id)).state == "stopped"
        # The next call makes a Pod again on the same claim.
        sandbox = Sandbox(factory.transport, sandbox.instance_id)
        assert (await sandbox.read_file("/workspace/f")).data == b"survives"
        # Idle: the Pod goes, the claim stays, the next call brings both back.
        wait_for(lambda: not _pods(cluster, kube_daemon, sandbox.instance_id), 60, "idle stop")
        assert len(_claims(cluster, kube_daemon, sandbox.instance_id)) == 1
        assert (await sandbox.read_file("/workspace/f")).data == b"survives"
    finally:
        await sandbox.delete()
    assert not _pods(cluster, kube_daemon, sandbox.instance_id)
    assert not _claims(cluster, kube_daemon, sandbox.instance_id)


async def test_fork_clones_the_claim_and_list_goes_by_labels(
    kube_daemon: KubeDaemon, factory: GrpcSandboxFactory, sandbox: Sandbox
) -> None:
    await sandbox.write_file("/workspace/src", b"source")
    forked = await sandbox.fork(
        f"fork-{secrets.token_hex(3)}", options=SandboxOptions(labels={"team": "x y/z"})
    )
    try:
        assert forked.fork_result is not None
        assert forked.fork_result.method == "volume-clone"
        assert (await forked.read_file("/workspace/src")).data == b"source"
        listed = await factory.transport.list_sandboxes({"team": "x y/z"})
        assert [info.instance_id for info in listed] == [forked.instance_id]
    finally:
        await forked.delete()


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (SandboxOptions(memory_bytes=1 << 40), ResourceExhausted),
        (SandboxOptions(image="sandboxd-no-such-image:1"), InvalidArgument),
    ],
    ids=["unschedulable", "missing-image"],
)
async def test_an_impossible_sandbox_is_a_typed_error_and_leaks_nothing(
    cluster: Cluster, kube_daemon: KubeDaemon, options: SandboxOptions, error: type[Exception]
) -> None:
    instance_id = f"no-{secrets.token_hex(3)}"
    started = time.monotonic()
    async with GrpcSandboxFactory(kube_daemon.target, options=options) as made:
        with pytest.raises(error):
            await made.create_sandbox(instance_id)
    assert time.monotonic() - started < 30
    wait_for(
        lambda: (
            not _pods(cluster, kube_daemon, instance_id)
            and not _claims(cluster, kube_daemon, instance_id)
        ),
        30,
        "the failed create's Pod and claim to go",
    )


async def test_runsc_without_its_runtime_class_is_a_typed_error(
    cluster: Cluster, kube_daemon: KubeDaemon, tmp_path: Path, extra_daemons: list[KubeDaemon]
) -> None:
    other = _twin(kube_daemon, cluster, tmp_path, "--kube-gvisor-runtime-class", "no-such-class")
    extra_daemons.append(other)
    other.start()
    async with GrpcSandboxFactory(
        other.target, options=SandboxOptions(runtime=Runtime.RUNSC)
    ) as made:
        with pytest.raises(InvalidArgument, match="RuntimeClass 'no-such-class'"):
            await made.create_sandbox(f"gv-{secrets.token_hex(3)}")


async def test_two_sandboxd_namespaces_do_not_see_each_other(
    cluster: Cluster,
    kube_daemon: KubeDaemon,
    tmp_path: Path,
    extra_daemons: list[KubeDaemon],
    sandbox: Sandbox,
) -> None:
    name = sandbox_namespace(cluster)
    try:
        other = KubeDaemon(tmp_path / "other.sock", cluster, name)
        extra_daemons.append(other)
        other.start()
        async with GrpcSandboxFactory(other.target) as made:
            assert await made.transport.list_sandboxes({}) == []
            with pytest.raises(Exception, match="no sandbox"):
                await made.transport.get_sandbox(sandbox.instance_id)
    finally:
        for daemon in extra_daemons:
            daemon.stop()
        extra_daemons.clear()
        drop_namespace(cluster, name)


def _cluster(*args: str) -> None:
    subprocess.run([str(CLUSTER_SH), *args], check=True, capture_output=True, timeout=180)


async def test_an_api_server_restart_loses_and_repeats_no_call(
    kube_daemon: KubeDaemon, sandbox: Sandbox
) -> None:
    command = "sleep 1; echo ran >> /workspace/once"
    call = asyncio.ensure_future(
        sandbox.call_tool("bash", {"command": command}, tool_call_id="api-restart")
    )
    await asyncio.sleep(0.3)
    await asyncio.to_thread(_cluster, "restart", "kube-apiserver")
    with contextlib.suppress(SandboxUnavailable):
        await call
    again = await _retrying(
        lambda: sandbox.call_tool("bash", {"command": command}, tool_call_id="api-restart"),
        attempts=20,
        pause=1.0,
    )
    assert not again.is_error, again.text
    assert (await sandbox.read_file("/workspace/once")).data == b"ran\n"


async def test_a_lifetime_ends_with_pod_and_claim_removed(
    cluster: Cluster, kube_daemon: KubeDaemon
) -> None:
    """The service's notes (a lifetime) are kept as the claim's annotations;
    its keeper deletes the sandbox when the lifetime ends."""
    options = SandboxOptions(max_lifetime_seconds=4)
    async with GrpcSandboxFactory(kube_daemon.target, options=options) as made:
        sandbox = await made.create_sandbox(f"life-{secrets.token_hex(3)}")
        info = await made.transport.get_sandbox(sandbox.instance_id)
        assert info.expires_at_ms > 0
        [claim] = _claims(cluster, kube_daemon, sandbox.instance_id)
        assert any(key.startswith(manifests.MARK_PREFIX) for key in claim.metadata.annotations)
    wait_for(
        lambda: (
            not _pods(cluster, kube_daemon, sandbox.instance_id)
            and not _claims(cluster, kube_daemon, sandbox.instance_id)
        ),
        60,
        "the expired sandbox's Pod and claim to go",
    )


async def test_a_stopped_kubelet_fails_calls_fast_and_the_sandbox_serves_after(
    cluster: Cluster, kube_daemon: KubeDaemon, sandbox: Sandbox
) -> None:
    """The node's kubelet gone: calls answer UNAVAILABLE at once (no hang to
    a timeout); back: the same Pod serves again, files and processes kept.
    Stops the shared cluster's kubelet, so kept short and restored whatever
    happens (the cluster-level half of this is test_cluster's API server
    restart; this test is the tier's only kubelet stop)."""
    await sandbox.write_file("/workspace/kept", b"kept")
    process = await sandbox.start_process(["sleep", "600"])
    [before] = _pods(cluster, kube_daemon, sandbox.instance_id)
    await asyncio.to_thread(_cluster, "stop", "kubelet")
    try:
        started = time.monotonic()
        with pytest.raises(SandboxUnavailable):
            await sandbox.exec("true")
        assert time.monotonic() - started < 15
    finally:
        await asyncio.to_thread(_cluster, "start", "kubelet")
    # Back once the kubelet has found its Pods again: the same Pod, not restarted.
    assert (await _retrying(lambda: sandbox.exec("echo back"), attempts=60, pause=1.0)).stdout == (
        b"back\n"
    )
    assert (await sandbox.read_file("/workspace/kept")).data == b"kept"
    assert process.handle in [info.handle for info in await sandbox.list_processes()]
    [after] = _pods(cluster, kube_daemon, sandbox.instance_id)
    assert after.metadata.uid == before.metadata.uid
    assert after.status.container_statuses[0].restart_count == 0

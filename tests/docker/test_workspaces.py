"""Workspaces on a real engine: persistence across daemon death, idempotency,
isolation as docker inspect reports it, and recovery of the executor."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import anyio
import docker
import docker.errors
import grpc
import pytest
from docker.models.containers import Container
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from runtime_client import (
    ExecExit,
    GrpcSandboxFactory,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Runtime,
    SandboxOptions,
    SandboxUnavailable,
)
from sandboxd.backends.shared import labels
from tests.docker_fixtures import IMAGE, RUN_PREFIX, container_name
from tests.helpers import Daemon, health_status

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


def _instance_containers(
    client: docker.DockerClient, namespace: str, instance_id: str
) -> list[Container]:
    name = container_name(namespace, instance_id)
    found = client.containers.list(all=True, filters={"name": name})
    return [c for c in found if c.name == name]


def _namespace_volumes(client: docker.DockerClient, namespace: str) -> set[str]:
    found = client.volumes.list(filters={"label": f"{labels.NAMESPACE}={namespace}"})
    return {v.name for v in found}


def _volume_exists(client: docker.DockerClient, name: str) -> bool:
    try:
        client.volumes.get(name)
    except docker.errors.NotFound:
        return False
    return True


async def test_background_daemon_serves_health_and_reflection(daemon: Daemon) -> None:
    assert await anyio.to_thread.run_sync(health_status, daemon.target) == "SERVING"

    def services() -> list[str]:
        with grpc.insecure_channel(daemon.target) as channel:
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            request = reflection_pb2.ServerReflectionRequest(list_services="")
            reply = next(iter(stub.ServerReflectionInfo(iter([request]))))
        return [s.name for s in reply.list_services_response.service]

    assert "sandboxd.v1.SandboxService" in await anyio.to_thread.run_sync(services)


async def test_files_survive_sigkill_of_the_daemon_and_delete_removes_everything(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    namespace = f"{RUN_PREFIX}-kill{secrets.token_hex(2)}"
    args = ("--namespace", namespace, "--image", IMAGE)
    first = await anyio.to_thread.run_sync(
        lambda: daemon_factory(tmp_path / "a.sock", *args).start()
    )
    async with GrpcSandboxFactory(first.target) as factory:
        box = await factory.create_sandbox("persist")
        await box.write_file("notes/today.txt", "written before the crash\n")
        assert (await box.read_file("notes/today.txt")).data == b"written before the crash\n"
        ran = await box.exec("cat notes/today.txt | wc -l")
        assert ran.stdout.strip() == b"1" and ran.exit_code == 0
        appended = await box.call_tool("bash", {"command": "echo a >> audit"}, tool_call_id="c-1")
    container = docker_client.containers.get(container_name(namespace, "persist"))
    started_at = container.attrs["State"]["StartedAt"]

    await anyio.to_thread.run_sync(first.kill)

    second = await anyio.to_thread.run_sync(
        lambda: daemon_factory(tmp_path / "b.sock", *args).start()
    )
    async with GrpcSandboxFactory(second.target) as factory:
        info = await factory.transport.get_sandbox("persist")
        assert info.state == "running"
        box = await factory.create_sandbox("persist")  # same id: the same workspace
        assert (await box.read_file("notes/today.txt")).data == b"written before the crash\n"
        assert (await box.exec(["ls", "notes"])).stdout == b"today.txt\n"
        # A retry of a call completed before the crash is answered, not re-run.
        retried = await box.call_tool("bash", {"command": "echo a >> audit"}, tool_call_id="c-1")
        assert retried.fields["replayed"] is True and retried.text == appended.text
        assert (await box.read_file("audit")).data == b"a\n"
        # Adopted, not restarted: the container kept running through the crash.
        container.reload()
        assert container.attrs["State"]["StartedAt"] == started_at
        volume = container.labels[labels.VOLUME]
        assert _volume_exists(docker_client, volume)
        await box.delete()
    assert _instance_containers(docker_client, namespace, "persist") == []
    assert not _volume_exists(docker_client, volume)


async def test_creating_the_same_id_twice_gives_one_container_and_one_volume(
    factory: GrpcSandboxFactory,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
) -> None:
    results = await asyncio.gather(
        *(factory.transport.create_sandbox(instance_id) for _ in range(3))
    )
    again, created = await factory.transport.create_sandbox(instance_id)
    assert sorted(flag for _, flag in results) == [False, False, True]
    assert created is False
    assert {info.container_id for info, _ in results} == {again.container_id}
    containers = _instance_containers(docker_client, namespace, instance_id)
    assert len(containers) == 1
    mounts = containers[0].attrs["Mounts"]
    assert len(mounts) == 1 and mounts[0]["Name"] == containers[0].labels[labels.VOLUME]
    with pytest.raises(Exception, match="already exists with different memory_bytes"):
        await factory.transport.create_sandbox(instance_id, SandboxOptions(memory_bytes=64 << 20))
    await factory.transport.delete_sandbox(instance_id)


async def test_docker_inspect_shows_the_isolation_defaults(
    factory: GrpcSandboxFactory,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
) -> None:
    box = await factory.create_sandbox(instance_id)
    attrs = docker_client.containers.get(container_name(namespace, instance_id)).attrs
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    # The container starts as root for the executor alone, with only the
    # capabilities it needs to act as the sandbox user (SECURITY.md).
    assert attrs["Config"]["User"] == "0:0"
    assert host["CapDrop"] == ["ALL"]
    assert sorted(host["CapAdd"]) == ["KILL", "SETGID", "SETUID"]
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["ReadonlyRootfs"] is True
    assert host["Memory"] == 1 << 30
    assert host["PidsLimit"] == 512
    assert host["NanoCpus"] == 1_000_000_000
    assert host["CpuShares"] == 512  # every sandbox at one weight, below sandboxd's
    assert host["Privileged"] is False
    assert not any("docker.sock" in (m.get("Source") or "") for m in attrs["Mounts"])
    assert [m["Destination"] for m in attrs["Mounts"]] == ["/workspace"]
    assert attrs["Mounts"][0]["Type"] == "volume"
    for key in (labels.MANAGED, labels.NAMESPACE, labels.VOLUME, labels.OPTIONS):
        assert key in attrs["Config"]["Labels"]
    # And from inside: what those settings mean for a process in the sandbox.
    probe = await box.exec(
        "id -u; touch /etc/x 2>&1 | grep -o 'Read-only file system'; "
        "touch /tmp/ok && echo tmp-writable; ls /sys/class/net; "
        "grep -E '^CapEff' /proc/self/status; grep NoNewPrivs /proc/self/status"
    )
    lines = probe.stdout.decode().split("\n")
    assert lines[0] == "1000"
    assert "Read-only file system" in lines
    assert "tmp-writable" in lines
    assert "lo" in lines and not any(line.startswith("eth") for line in lines)
    assert "CapEff:\t0000000000000000" in lines
    assert "NoNewPrivs:\t1" in lines
    await box.delete()


async def test_requested_limits_env_and_labels_are_applied(
    factory: GrpcSandboxFactory,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
) -> None:
    options = SandboxOptions(
        memory_bytes=128 << 20,
        pids_limit=64,
        cpus=0.5,
        env={"FOO": "bar"},
        labels={"team": "qa"},
        workdir="/workspace/project",
    )
    info, created = await factory.transport.create_sandbox(instance_id, options)
    assert created and info.state == "running"  # a cold create (non-default options)
    assert info.options.memory_bytes == 128 << 20 and info.options.workdir == "/workspace/project"
    host = docker_client.containers.get(container_name(namespace, instance_id)).attrs["HostConfig"]
    assert (host["Memory"], host["PidsLimit"], host["NanoCpus"]) == (128 << 20, 64, 500_000_000)
    box = await factory.create_sandbox(instance_id)
    result = await box.exec("echo $FOO; pwd")
    assert result.stdout == b"bar\n/workspace/project\n"
    listed = await factory.transport.list_sandboxes({"team": "qa"})
    assert [i.instance_id for i in listed] == [instance_id]
    await box.delete()


async def test_workspace_recovers_after_its_container_is_killed_outside(
    factory: GrpcSandboxFactory,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
) -> None:
    box = await factory.create_sandbox(instance_id)
    await box.write_file("keep.txt", "still here")
    docker_client.containers.get(container_name(namespace, instance_id)).kill()
    # The next call starts the container again; the files are on the volume.
    assert (await box.read_file("keep.txt")).data == b"still here"
    assert (await box.exec("echo alive")).stdout == b"alive\n"
    await box.delete()


async def test_a_dead_executor_is_replaced_on_the_next_call(
    factory: GrpcSandboxFactory,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
) -> None:
    box = await factory.create_sandbox(instance_id)
    await box.write_file("keep.txt", "x")
    container = docker_client.containers.get(container_name(namespace, instance_id))
    started_at = container.attrs["State"]["StartedAt"]
    # PID 1 is sandboxd's minimal init; its one child is the executor.
    executor = (await box.exec("cat /proc/1/task/1/children")).stdout.split()
    assert len(executor) == 1
    pid = executor[0].decode()
    # The workload may not signal the executor (it runs as another user)...
    refused = await box.exec(f"kill -9 {pid}", timeout_ms=5000)
    assert refused.exit_code != 0 and b"Operation not permitted" in refused.stderr
    # ...so it dies from outside here: the next call must still find the files.
    await anyio.to_thread.run_sync(lambda: container.exec_run(["kill", "-9", pid], user="0"))
    # A call that meets the dead channel says so; the one after restarts the
    # container: same volume, same files.
    try:
        data = (await box.read_file("keep.txt")).data
    except SandboxUnavailable as exc:
        assert "channel closed" in str(exc)
        data = (await box.read_file("keep.txt")).data
    assert data == b"x"
    container.reload()
    assert container.attrs["State"]["StartedAt"] != started_at
    await box.delete()


async def test_exec_timeout_and_stream_on_docker(
    factory: GrpcSandboxFactory, instance_id: str
) -> None:
    box = await factory.create_sandbox(instance_id)
    slow = await box.exec("sleep 20", timeout_ms=500)
    assert slow.timed_out is True and slow.duration_ms < 5000
    events = [e async for e in box.exec_stream("for i in 1 2 3; do echo $i; sleep 0.1; done")]
    output = b"".join(getattr(e, "data", b"") for e in events)
    assert output == b"1\n2\n3\n"
    assert isinstance(events[-1], ExecExit) and events[-1].exit_code == 0
    await box.delete()


async def test_var_tmp_is_a_writable_sticky_tmpfs_like_tmp(
    factory: GrpcSandboxFactory,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
) -> None:
    # Tools that install helpers for a rootless user (inspect_ai's sandbox
    # tools) need /var/tmp: root-owned, sticky, writable and executable.
    box = await factory.create_sandbox(instance_id)
    host = docker_client.containers.get(container_name(namespace, instance_id)).attrs["HostConfig"]
    assert "size=268435456" in host["Tmpfs"]["/var/tmp"]
    probe = await box.exec(
        "stat -c '%U %a' /var/tmp; findmnt -no FSTYPE /var/tmp; "
        "printf '#!/bin/sh\\necho ran\\n' > /var/tmp/helper && chmod +x /var/tmp/helper "
        "&& /var/tmp/helper"
    )
    await box.delete()
    assert probe.stdout.decode().split("\n")[:3] == ["root 1777", "tmpfs", "ran"], probe


async def test_a_read_only_file_is_not_replaced(
    factory: GrpcSandboxFactory, instance_id: str
) -> None:
    # Atomic writes rename over the target, which only the folder's mode
    # governs; a file made read-only must still refuse (as open() would).
    box = await factory.create_sandbox(instance_id)
    await box.write_file("locked.txt", "kept")
    await box.exec(["chmod", "a-w", "locked.txt"])
    try:
        with pytest.raises(PermissionDenied, match=r"locked\.txt: permission denied"):
            await box.write_file("locked.txt", "replaced")
        with pytest.raises(PermissionDenied, match=r"locked\.txt: permission denied"):
            await box.upload("locked.txt", b"replaced")
        assert (await box.read_file("locked.txt")).data == b"kept"
        await box.exec(["chmod", "u+w", "locked.txt"])
        await box.write_file("locked.txt", "replaced")
        assert (await box.read_file("locked.txt")).data == b"replaced"
    finally:
        await box.delete()


async def test_bad_input_on_docker(factory: GrpcSandboxFactory, instance_id: str) -> None:
    box = await factory.create_sandbox(instance_id)
    with pytest.raises(InvalidArgument, match="NUL byte"):
        await box.write_file("a\x00b", "x")
    with pytest.raises(InvalidArgument, match="offset must not be negative"):
        await box.read_file("f", offset=-3)
    with pytest.raises(ResourceExhausted, match="payload limit of 1048576"):
        await box.write_file("big", b"x" * (2 << 20))
    with pytest.raises(NotFound, match="/workspace/missing: no such file"):
        await box.read_file("missing")
    with pytest.raises(NotFound, match="no sandbox with instance id"):
        await factory.transport.read_file("never-created", "f")
    with pytest.raises(InvalidArgument, match="image 'no-such-image:1' is not in the local"):
        await factory.transport.create_sandbox(
            f"{instance_id}-img", SandboxOptions(image="no-such-image:1")
        )
    assert (await box.list_dir(".")) == []
    await box.delete()


async def test_idle_ttl_stops_the_container_and_the_next_call_starts_it(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    namespace = f"{RUN_PREFIX}-idle{secrets.token_hex(2)}"
    daemon = daemon_factory(
        tmp_path / "i.sock",
        "--namespace",
        namespace,
        "--image",
        IMAGE,
        "--pool-size",
        "0",
        "--idle-check-interval-s",
        "0.2",
    )
    await anyio.to_thread.run_sync(daemon.start)
    async with GrpcSandboxFactory(daemon.target) as factory:
        await factory.transport.create_sandbox("lazy", SandboxOptions(idle_ttl_seconds=1))
        await factory.transport.create_sandbox("busy")  # no TTL: never stopped
        box = await factory.create_sandbox("lazy")
        await box.write_file("kept.txt", "on the volume")
        container = docker_client.containers.get(container_name(namespace, "lazy"))
        for _ in range(100):
            container.reload()
            if container.status == "exited":
                break
            await anyio.sleep(0.1)
        assert container.status == "exited"
        assert (await factory.transport.get_sandbox("lazy")).state == "stopped"
        # Transparent: the next call starts it again, with its files.
        assert (await box.read_file("kept.txt")).data == b"on the volume"
        container.reload()
        assert container.status == "running"
        busy = docker_client.containers.get(container_name(namespace, "busy"))
        assert busy.status == "running"
        for instance in ("lazy", "busy"):
            await factory.transport.delete_sandbox(instance)


async def test_gvisor_runtime_serves_the_executor_over_stdio(
    factory: GrpcSandboxFactory,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
) -> None:
    # `make engine` registers runsc; the channel needs no host socket, so it works here too.
    await factory.transport.create_sandbox(instance_id, SandboxOptions(runtime=Runtime.RUNSC))
    attrs = docker_client.containers.get(container_name(namespace, instance_id)).attrs
    assert attrs["HostConfig"]["Runtime"] == "runsc"
    box = await factory.create_sandbox(instance_id)
    await box.write_file("g.txt", "under gvisor\n")
    assert (await box.read("g.txt")).text == "     1\tunder gvisor"
    kernel = await box.exec("dmesg | head -1")
    assert b"gVisor" in kernel.stdout
    await box.delete()

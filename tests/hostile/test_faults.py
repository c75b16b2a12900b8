"""Faults from outside the sandbox: the daemon SIGKILLed mid-write, a
workspace container killed or removed behind sandboxd's back, the engine
going away, and SIGTERM with calls in flight."""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import docker
import docker.errors
import pytest

from runtime_client import GrpcSandboxFactory, Internal, SandboxUnavailable
from sandboxd.backends.shared import labels
from tests.docker_fixtures import IMAGE, RUN_PREFIX, container_name, remove_namespace_resources
from tests.helpers import Daemon, health_status
from tests.hostile.engine_proxy import EngineProxy
from tests.hostile.support import FIGURES, Figure, known_gap, recover

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(120)]

WRITES = 500
INSTANCES = 4


def _args(namespace: str, *extra: str) -> tuple[str, ...]:
    return ("--namespace", namespace, "--image", IMAGE, "--pool-size", "0", *extra)


async def _start(daemon: Daemon) -> Daemon:
    return await anyio.to_thread.run_sync(daemon.start)


def _fault(name: str, recovery_s: float | None, outcome: str) -> None:
    # Faults have no bystander: the whole daemon or engine is the victim.
    FIGURES.append(Figure(name, 0.0, 0.0, recovery_s, outcome))


async def test_sigkill_during_500_concurrent_writes_loses_no_acknowledged_write(
    daemon_factory: type[Daemon], tmp_path: Path
) -> None:
    namespace = f"{RUN_PREFIX}-wk{secrets.token_hex(2)}"
    first = await _start(daemon_factory(tmp_path / "a.sock", *_args(namespace)))
    ids = [f"w{i}" for i in range(INSTANCES)]
    acked: dict[tuple[str, str], bytes] = {}
    async with GrpcSandboxFactory(first.target) as factory:
        boxes = await asyncio.gather(*(factory.create_sandbox(i) for i in ids))

        async def write(n: int) -> None:
            box = boxes[n % INSTANCES]
            path, data = f"out/{n}.txt", f"write {n} ".encode() * 200
            await box.write_file(path, data)
            acked[(box.instance_id, path)] = data

        writes = [asyncio.ensure_future(write(n)) for n in range(WRITES)]
        for _ in range(6000):  # 30 s at most
            if len(acked) >= WRITES // 3:
                break
            await asyncio.sleep(0.005)
        await anyio.to_thread.run_sync(first.kill)
        await asyncio.gather(*writes, return_exceptions=True)
    assert 0 < len(acked) < WRITES, "the kill must land mid-way"

    restarted = time.monotonic()
    second = await _start(daemon_factory(tmp_path / "b.sock", *_args(namespace)))
    async with GrpcSandboxFactory(second.target) as factory:
        listed = {info.instance_id for info in await factory.transport.list_sandboxes()}
        assert listed == set(ids)
        first_answer = await recover(await factory.create_sandbox(ids[0]))
        recovery = round(time.monotonic() - restarted, 2)
        for (instance, path), data in acked.items():
            assert (await factory.transport.read_file(instance, path)).data == data
        # Unacknowledged writes are whole or absent, never torn (atomic rename).
        on_disk = 0
        for instance in ids:
            box = await factory.create_sandbox(instance)
            for entry in await box.list_dir("out"):
                data = (await box.read_file(f"out/{entry.name}")).data
                n = int(entry.name.split(".")[0])
                assert data == f"write {n} ".encode() * 200
                on_disk += 1
            await box.delete()
    _fault(
        f"SIGKILL of sandboxd during {WRITES} concurrent writes",
        recovery,
        f"{len(acked)} acknowledged, all on disk ({on_disk} files in all, none torn); "
        f"{INSTANCES}/{INSTANCES} instances found again; first answer {first_answer} s "
        "after the restarted daemon was healthy",
    )


async def test_sigkill_mid_transfer_reattaches_to_the_same_executor(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    """Raw frames torn both ways by a daemon killed mid-transfer: the next
    daemon's resync padding puts the channel back in step, so it re-attaches
    to the running executor (no container restart) and bulk bytes flow again."""
    namespace = f"{RUN_PREFIX}-rw{secrets.token_hex(2)}"
    roomy = ("--disk-bytes", str(4 << 30))  # the endless upload may not fill the disk
    first = await _start(daemon_factory(tmp_path / "a.sock", *_args(namespace, *roomy)))
    name = container_name(namespace, "raw")
    async with GrpcSandboxFactory(first.target) as factory:
        box = await factory.create_sandbox("raw")
        await box.upload("big.bin", os.urandom(1 << 20) * 48)
        started_at = docker_client.containers.get(name).attrs["State"]["StartedAt"]

        async def endless() -> AsyncIterator[bytes]:
            block = os.urandom(1 << 20)
            for _ in range(2048):  # far more than flows before the kill
                yield block

        async def download() -> None:
            while True:
                async for _ in box.download_iter("big.bin"):
                    pass

        moving = [asyncio.ensure_future(box.upload("up.bin", endless()))]
        moving.append(asyncio.ensure_future(download()))
        await asyncio.sleep(1.5)
        done = [t.exception() for t in moving if t.done()]
        assert not done, f"both transfers run at the kill: {done}"
        await anyio.to_thread.run_sync(first.kill)
        await asyncio.gather(*moving, return_exceptions=True)

    restarted = time.monotonic()
    second = await _start(daemon_factory(tmp_path / "b.sock", *_args(namespace, *roomy)))
    async with GrpcSandboxFactory(second.target) as factory:
        box = await factory.create_sandbox("raw")
        assert (await box.exec("echo back")).stdout == b"back\n"
        recovery = round(time.monotonic() - restarted, 2)
        # The same executor: its container was not restarted to get a channel.
        assert docker_client.containers.get(name).attrs["State"]["StartedAt"] == started_at
        data = os.urandom(3 << 20) + b"\n\x00\n" * 1000
        await box.upload("after.bin", data)
        got = b"".join([p async for p in box.download_iter("after.bin") if isinstance(p, bytes)])
        assert got == data
        # The cut upload's temp file went when the new daemon said hello.
        left = await box.exec("ls -a | grep -c sandboxd-upload || true")
        assert left.stdout == b"0\n"
        await box.delete()
    _fault(
        "SIGKILL of sandboxd mid-transfer (raw frames torn both ways)",
        recovery,
        "re-attached to the running executor (container not restarted); uploads and "
        "downloads byte-exact afterwards; the cut upload's temp file removed",
    )


async def test_container_killed_outside_comes_back_with_its_files(
    factory: GrpcSandboxFactory,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
) -> None:
    box = await factory.create_sandbox(instance_id)
    await box.write_file("keep.txt", "kept")
    docker_client.containers.get(container_name(namespace, instance_id)).kill()
    started = time.monotonic()
    # The first call may see the dying channel; the next restarts the container.
    await recover(box)
    recovery = round(time.monotonic() - started, 2)
    assert (await box.read_file("keep.txt")).data == b"kept"
    await box.delete()
    _fault("workspace container killed outside", recovery, "restarted from its volume, files kept")


async def test_container_removed_outside_answers_unavailable_and_keeps_the_volume(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    namespace = f"{RUN_PREFIX}-rm{secrets.token_hex(2)}"
    daemon = await _start(daemon_factory(tmp_path / "r.sock", *_args(namespace)))
    async with GrpcSandboxFactory(daemon.target) as factory:
        box = await factory.create_sandbox("gone")
        await box.write_file("keep.txt", "kept")
        container = docker_client.containers.get(container_name(namespace, "gone"))
        volume = container.labels[labels.VOLUME]
        container.remove(force=True)
        with pytest.raises(SandboxUnavailable, match="removed outside sandboxd"):
            await box.read_file("keep.txt")
        # The volume outlives its container: a cold-created instance's volume is
        # named after it and labelled with its namespace, id and options, so
        # recreating the container from it is possible.
        vol = docker_client.volumes.get(volume)
        vol_labels = vol.attrs.get("Labels") or {}
        assert volume == labels.resource_name(namespace, "gone")
        assert vol_labels.get(labels.NAMESPACE) == namespace
        recreatable = labels.OPTIONS in vol_labels
        await box.delete()  # removes the orphaned volume too
        with pytest.raises(docker.errors.NotFound):
            docker_client.volumes.get(volume)
    _fault(
        "workspace container removed outside",
        None,
        f"UNAVAILABLE 'removed outside sandboxd'; volume {volume} kept with its labels "
        f"(options label present: {recreatable}); delete cleans it up",
    )


async def test_engine_outage_then_sandboxd_reconnects(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    """The engine goes away (every connection dropped, the containers killed, as
    a dockerd restart without live-restore does) and comes back."""
    namespace = f"{RUN_PREFIX}-en{secrets.token_hex(2)}"
    proxy = EngineProxy(tmp_path / "engine.sock")
    await proxy.start()
    args = _args(namespace, "--docker-host", proxy.url)
    daemon = await _start(daemon_factory(tmp_path / "e.sock", *args))
    try:
        async with GrpcSandboxFactory(daemon.target) as factory:
            box = await factory.create_sandbox("survivor")
            await box.write_file("keep.txt", "kept")
            await proxy.cut()
            docker_client.containers.get(container_name(namespace, "survivor")).kill()
            try:
                await box.read_file("keep.txt")
                pytest.fail("a call with the engine gone succeeded")
            except SandboxUnavailable as exc:
                down, typed = f"UNAVAILABLE {str(exc)[:90]!r}", True
            except Internal as exc:  # today: see the known_gap below
                down, typed = f"INTERNAL {str(exc)[:60]!r}", False
            assert await anyio.to_thread.run_sync(health_status, daemon.target) == "SERVING"
            await proxy.start()
            started = time.monotonic()
            await recover(box)
            recovery = round(time.monotonic() - started, 2)
            assert (await box.read_file("keep.txt")).data == b"kept"
            await box.delete()
    finally:
        await proxy.cut()
    _fault(
        "Docker engine outage (connections cut, containers killed)",
        recovery,
        f"while down: {down}; health SERVING; after: container restarted from its volume",
    )
    known_gap(
        typed,
        "bug: with the engine unreachable, docker-py raises requests.ConnectionError, which "
        "sandboxd.backends.docker.backend._thread does not map: the call answers INTERNAL",
    )


async def test_sigterm_drains_in_flight_docker_calls(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    namespace = f"{RUN_PREFIX}-dr{secrets.token_hex(2)}"
    args = _args(namespace, "--drain-seconds", "20")
    daemon = await _start(daemon_factory(tmp_path / "d.sock", *args))
    async with GrpcSandboxFactory(daemon.target) as factory:
        box = await factory.create_sandbox("drain")
        call = asyncio.ensure_future(box.exec("sleep 1.5; echo finished"))
        await asyncio.sleep(0.5)
        started = time.monotonic()
        code = await anyio.to_thread.run_sync(daemon.terminate)
        drained = round(time.monotonic() - started, 2)
        result = await call
    assert result.stdout == b"finished\n" and result.exit_code == 0
    assert code == 0 and not daemon.socket.exists()
    # Workspaces keep running for the next daemon to adopt.
    container = docker_client.containers.get(container_name(namespace, "drain"))
    assert container.status == "running"
    remove_namespace_resources(docker_client, namespace)  # its disk image and loop device too
    _fault("SIGTERM with an Exec in flight", drained, "the call finished; exit 0 after drain")

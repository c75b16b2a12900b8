"""The Docker backend: one container and one named volume per instance.

Docker is the source of truth: an instance is the container named
``sandboxd-<namespace>-<id>`` (names are unique per engine, so a create race
has one winner) and its labels carry the options, so a restarted daemon
finds every workspace again. docker-py is blocking and only ever runs behind
``anyio.to_thread``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import docker
import docker.errors
import requests
from docker.models.containers import Container
from docker.types import LogConfig, Mount

from sandboxd.backends.docker import disk, marks, runtimes, snapshots, templates
from sandboxd.backends.docker.settings import DockerSettings
from sandboxd.backends.docker.workspace import DockerWorkspace
from sandboxd.backends.shared import clone, labels
from sandboxd.backends.shared import snapshots as shared_snapshots
from sandboxd.backends.shared.errors import unknown_instance
from sandboxd.backends.shared.options import check_same, effective, overridden
from sandboxd.backends.shared.pool import WarmPool
from sandboxd.backends.shared.session import stop_idle_workspaces
from sandboxd.contract.errors import (
    AlreadyExists,
    InvalidArgument,
    SandboxUnavailable,
    Timeout,
)
from sandboxd.contract.models import (
    DiskLimit,
    ForkResult,
    PoolStatus,
    Runtime,
    RuntimeInfo,
    SandboxInfo,
    SandboxOptions,
    SnapshotInfo,
    TemplateInfo,
    TerminationReason,
)
from sandboxd.executor.bundle import bootstrap_command
from sandboxd.executor.environment import container_env

log = logging.getLogger(__name__)

WORKSPACE_MOUNT = "/workspace"
#: The container starts as root so that the executor is another identity than
#: the workload (executor.identity); every workload process runs as
#: SANDBOX_UID:SANDBOX_GID with no capability.
CONTAINER_USER = "0:0"
#: What the executor needs, and nothing else (SECURITY.md, "Privilege separation"):
#: SETUID/SETGID to act as the sandbox user per thread and to start children
#: as that user; KILL to stop the workload's processes from a thread acting as
#: root (shutdown). No DAC_OVERRIDE, CHOWN or FOWNER: as root without them the
#: executor cannot read or change the workload's files except as the user.
EXECUTOR_CAPS = ["SETUID", "SETGID", "KILL"]


async def _thread(func: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return await anyio.to_thread.run_sync(lambda: func(*args, **kwargs))
    except docker.errors.NotFound:
        raise
    except docker.errors.APIError as exc:
        raise SandboxUnavailable(f"Docker engine error: {exc.explanation or exc}") from exc
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        # docker-py lets connection failures through as requests/OS errors.
        raise SandboxUnavailable(f"Docker engine unreachable: {exc}") from exc


class DockerBackend:
    name = "docker"

    def __init__(self, settings: DockerSettings) -> None:
        self.settings = settings
        self._client: docker.DockerClient | None = None
        self._workspaces: dict[str, DockerWorkspace] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._reaper: asyncio.Task[None] | None = None
        # Known once start() has tried the host (_check_disks); until then, off.
        self._disk = DiskLimit(reason="the docker backend has not started")
        self.pool_options = effective(SandboxOptions(), settings)
        self.pool: WarmPool[DockerWorkspace] = WarmPool(
            settings.pool_size,
            make=self._make_pooled,
            discard=self._discard_pooled,
            usable=lambda workspace: workspace.connected,
            ceiling=settings.pool_max,
            parallel=settings.pool_parallel,
        )

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            raise SandboxUnavailable("the Docker backend has not started")
        return self._client

    async def start(self) -> None:
        def connect() -> docker.DockerClient:
            client = docker.DockerClient(base_url=self.settings.docker_host, timeout=120)
            client.ping()
            return client

        self._client = await _thread(connect)
        await self._rename_legacy()  # before the pool's clean-up, which goes by name
        await self._remove_stale_pool()
        await self._check_disks()
        await self._reattach_disks()
        for name in await _thread(
            snapshots.remove_unfinished, self.client, self.settings.namespace
        ):
            log.info("removed snapshot volume %s: its copy never finished", name)
        adopted = await self._adopt()
        log.info("docker backend ready: adopted %d workspace(s)", adopted)
        self.pool.start()
        self._reaper = asyncio.create_task(self._stop_idle_workspaces(), name="idle-reaper")

    async def _check_disks(self) -> None:
        """Decide once whether workspaces get disks of their own: tried, not assumed."""
        size = self.settings.disk_bytes
        if not size:
            self._disk = DiskLimit(reason="disk_bytes=0: turned off by configuration")
            log.warning("disk limit off (disk_bytes=0): workspaces share the host's disk")
            return
        # Random: two daemons of one namespace may start at once on one folder.
        probe_name = f"sandboxd-{self.settings.namespace}-probe-{secrets.token_hex(3)}"
        reason = await anyio.to_thread.run_sync(disk.probe, self.settings.disk_dir, probe_name)
        if reason is None:
            self._disk = DiskLimit(enforced=True, bytes=size)
            log.info("disk limit: %d MiB per workspace (%s)", size >> 20, self.settings.disk_dir)
            for device in await anyio.to_thread.run_sync(
                disk.detach_deleted, self.settings.disk_dir
            ):
                log.info("detached %s: its disk image had been deleted", device)
            return
        self._disk = DiskLimit(reason=reason)
        log.warning(
            "DISK LIMIT NOT ENFORCED: %s; every workspace shares the host's disk "
            "(GetStatus.disk; set disk_bytes=0 to turn the limit off knowingly)",
            reason,
        )

    def disk_limit(self) -> DiskLimit:
        return self._disk

    async def _reattach_disks(self) -> None:
        """Loop devices do not survive a host reboot: attach every image again."""
        volumes = await _thread(
            self.client.volumes.list, filters={"label": labels.selector(self.settings.namespace)}
        )
        for volume in volumes:
            image = (volume.attrs.get("Labels") or {}).get(disk.DISK_LABEL)
            device = (volume.attrs.get("Options") or {}).get("device")
            if not image or not device:
                continue
            try:
                if await anyio.to_thread.run_sync(disk.reattach, Path(image), device):
                    log.info("disk of volume %s re-attached on %s", volume.name, device)
            except SandboxUnavailable as exc:
                log.error("disk of volume %s cannot be re-attached: %s", volume.name, exc)

    async def _rename_legacy(self) -> None:
        """Give workspaces named the first way (``sandboxd-<ns>-<id>``, ambiguous
        across namespaces) their unambiguous name; their volumes keep theirs."""
        namespace = self.settings.namespace
        found = await _thread(
            self.client.containers.list,
            all=True,
            ignore_removed=True,
            filters={"label": labels.selector(namespace)},
        )
        for container in found:
            name = container.name or ""
            instance_id = labels.legacy_instance_from_name(namespace, name)
            if instance_id is None or not self._ours(container.labels):
                continue
            new_name = labels.resource_name(namespace, instance_id)
            try:
                await _thread(container.rename, new_name)
                log.info("renamed workspace %s to %s", name, new_name)
            except docker.errors.APIError as exc:
                log.error("workspace %s keeps its old name: %s", name, exc)

    async def _adopt(self) -> int:
        """Know every workspace already there; channels connect on first use."""
        found = await _thread(
            self.client.containers.list,
            all=True,
            # A container removed between the listing and its inspection
            # (a pool workspace discarded meanwhile) is not an error.
            ignore_removed=True,
            filters={"label": labels.selector(self.settings.namespace)},
        )
        count = 0
        for container in found:
            instance_id = labels.instance_from_name(self.settings.namespace, container.name or "")
            if instance_id is not None:
                self._workspace_for(instance_id, container)
                count += 1
        return count

    async def _stop_idle_workspaces(self) -> None:
        await stop_idle_workspaces(self._workspaces.values, self.settings.idle_check_interval_s)

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        await self.pool.close()
        for workspace in list(self._workspaces.values()):
            await workspace.disconnect()
        self._workspaces.clear()
        if self._client is not None:
            await _thread(self._client.close)
            self._client = None

    # ------------------------------------------------------------ lifecycle

    def _lock(self, instance_id: str) -> asyncio.Lock:
        return self._locks.setdefault(instance_id, asyncio.Lock())

    def _name(self, instance_id: str) -> str:
        return labels.resource_name(self.settings.namespace, instance_id)

    async def _find(self, instance_id: str) -> Container | None:
        try:
            container: Container = await _thread(
                self.client.containers.get, self._name(instance_id)
            )
        except docker.errors.NotFound:
            return None
        if container.labels.get(labels.NAMESPACE) != self.settings.namespace:
            return None
        return container

    async def create(
        self, instance_id: str, requested: SandboxOptions, wanted: SandboxOptions
    ) -> tuple[SandboxInfo, bool]:
        async with self._lock(instance_id):
            existing = await self._find(instance_id)
            if existing is not None:
                check_same(instance_id, requested, labels.options_from(existing.labels))
                workspace = self._workspace_for(instance_id, existing)
                await workspace.ensure_running()
                return _info(instance_id, existing), False
            if wanted == self.pool_options:
                claimed = await self._claim_pooled(instance_id)
                if claimed is not None:
                    return claimed, True
            await self._check_creatable(wanted)
            name = self._name(instance_id)
            container = await self._create_container(name, wanted, pooled=False)
            workspace = self._workspace_for(instance_id, container)
            try:
                await workspace.ensure_running()
            except BaseException:
                self._workspaces.pop(instance_id, None)
                await self._remove_container_and_volume(name)
                raise
            return _info(instance_id, container), True

    async def _claim_pooled(self, instance_id: str) -> SandboxInfo | None:
        workspace = self.pool.take()
        if workspace is None:
            return None
        try:
            await workspace.rename(self._name(instance_id), instance_id)
        except SandboxUnavailable as exc:
            # Another daemon won the name, or the engine failed: go cold.
            log.info("warm pool: claim for %s failed (%s)", instance_id, exc)
            await self._discard_pooled(workspace)
            return None
        self._workspaces[instance_id] = workspace
        return _info(instance_id, workspace.container)

    async def _make_pooled(self) -> DockerWorkspace:
        await self._check_creatable(self.pool_options)
        name = labels.pool_name(self.settings.namespace)
        container = await self._create_container(name, self.pool_options, pooled=True)
        workspace = DockerWorkspace(
            name, container, settings=self.settings, options=self.pool_options, run=_thread
        )
        try:
            await workspace.ensure_running()
        except BaseException:
            await self._remove_container_and_volume(name)
            raise
        return workspace

    async def _discard_pooled(self, workspace: DockerWorkspace) -> None:
        await workspace.disconnect()
        try:
            await self._remove_container_and_volume(workspace.container.name or "")
        except SandboxUnavailable as exc:
            log.warning("warm pool: could not remove %s: %s", workspace.instance_id, exc)

    async def _remove_stale_pool(self) -> None:
        # Pool workspaces of a previous run hold no one's data; start fresh.
        found = await _thread(
            self.client.containers.list,
            all=True,
            # A container removed between the listing and its inspection
            # (a pool workspace discarded meanwhile) is not an error.
            ignore_removed=True,
            filters={"label": [*labels.selector(self.settings.namespace), f"{labels.POOLED}=true"]},
        )
        for container in found:
            if labels.instance_from_name(self.settings.namespace, container.name or "") is None:
                await self._remove_container_and_volume(container.name or "")

    async def _check_creatable(self, options: SandboxOptions) -> None:
        try:
            await _thread(self.client.images.get, options.image)
        except docker.errors.NotFound:
            raise InvalidArgument(
                f"image {options.image!r} is not in the local Docker engine (sandboxd never "
                "pulls); build the default image with `make image`"
            ) from None
        if options.runtime == Runtime.RUNSC:
            info = await _thread(self.client.info)
            if "runsc" not in (info.get("Runtimes") or {}):
                raise InvalidArgument(
                    "runtime runsc (gVisor) is not registered with this Docker engine; "
                    "register it with scripts/register-gvisor.sh"
                )

    async def _create_container(
        self,
        name: str,
        options: SandboxOptions,
        *,
        pooled: bool,
        disk_image: tuple[Path, str] | None = None,
    ) -> Container:
        created_at = int(time.time() * 1000)
        resource_labels = labels.for_workspace(
            self.settings.namespace, name, options, created_at, pooled=pooled
        )

        def create() -> Container:
            self._create_volume(name, resource_labels, disk_image, options.disk_bytes)
            # The executor's environment, not the sandbox's: options.env
            # reaches the workload through hello (executor.environment).
            env = {"HOME": "/tmp/home", **container_env(options.env)}
            return self.client.containers.create(
                options.image,
                command=_bootstrap(self.settings.executor_python),
                name=name,
                labels=resource_labels,
                environment=env,
                user=CONTAINER_USER,
                working_dir=WORKSPACE_MOUNT,
                hostname="sandbox",
                stdin_open=True,
                # Without detach docker-py sets StdinOnce, and the executor would see
                # EOF the first time a daemon lets go of the attach stream.
                detach=True,
                tty=False,
                # Our bootstrap is PID 1 (see executor.bundle): docker's init would
                # hold the channel's pipes open, dumpable, as the sandbox user.
                init=False,
                network_mode="bridge" if options.network and options.network.bridged else "none",
                # IPv6 loopback (::1), off in Docker's containers by default: a
                # dev server that listens on "localhost" may pick ::1, and a
                # forwarded port reaches it there (backends.shared.pipes).
                sysctls={"net.ipv6.conf.lo.disable_ipv6": "0"},
                cap_drop=["ALL"],
                cap_add=EXECUTOR_CAPS,
                security_opt=["no-new-privileges"],
                read_only=True,
                tmpfs={
                    "/tmp": f"rw,nosuid,nodev,size={self.settings.tmp_bytes},mode=1777",
                    # FHS's other world-writable temp folder, where tools install
                    # helpers they then run as a rootless user (inspect_ai's sandbox
                    # tools): so not noexec, Docker's tmpfs default. The workload
                    # runs programs from /workspace anyway.
                    "/var/tmp": f"rw,exec,nosuid,nodev,size={self.settings.tmp_bytes},mode=1777",
                    # The executor's full bash logs, apart from /tmp; root's, so
                    # the workload may read them but not write them.
                    "/run/sandboxd": f"rw,nosuid,nodev,noexec,size={self.settings.tmp_bytes},"
                    "uid=0,gid=0,mode=0755",
                },
                mounts=[Mount(target=WORKSPACE_MOUNT, source=name, type="volume")],
                mem_limit=options.memory_bytes,
                memswap_limit=options.memory_bytes,
                nano_cpus=int(options.cpus * 1e9),
                # Equal weight for every sandbox, below a default-weight process
                # (sandboxd) where they share a parent cgroup (SECURITY.md, "CPU").
                cpu_shares=self.settings.cpu_shares,
                pids_limit=runtimes.host_pids_limit(options, self.settings.runsc_pids_limit),
                runtime=(options.runtime or Runtime.RUNC).value,
                log_config=LogConfig(type="none"),
            )

        try:
            container: Container = await _thread(create)
        except BaseException:
            await self._remove_container_and_volume(name)
            raise
        return container

    def _create_volume(
        self,
        name: str,
        resource_labels: dict[str, str],
        disk_image: tuple[Path, str] | None,
        size: int,
    ) -> None:
        """The workspace volume; ``disk_image`` (image, device): an attached
        disk image to use (a fork's copy) instead of a new one; else a new
        disk of ``size`` (the sandbox's disk_bytes) where disks are enforced."""
        if disk_image is not None:
            image, device = disk_image
        elif not self._disk.enforced:
            self.client.volumes.create(name=name, labels=resource_labels)
            return
        else:
            disk.check_room(self.settings.disk_dir, self.settings.disk_reserve_bytes)
            image, device = disk.create(self.settings.disk_dir, name, size or self._disk.bytes)
        try:
            self.client.volumes.create(
                name=name,
                driver="local",
                # No setuid program or device node on the disk counts, on
                # the host's mount of it or in the container's.
                driver_opts={"type": "ext4", "device": device, "o": "nosuid,nodev,discard"},
                labels={**resource_labels, disk.DISK_LABEL: str(image)},
            )
        except BaseException:
            disk.remove(image)
            raise

    def _workspace_for(self, instance_id: str, container: Container) -> DockerWorkspace:
        workspace = self._workspaces.get(instance_id)
        if workspace is None or workspace.container_id != container.id:
            workspace = DockerWorkspace(
                instance_id,
                container,
                settings=self.settings,
                options=labels.options_from(container.labels),
                run=_thread,
            )
            self._workspaces[instance_id] = workspace
        return workspace

    async def runtimes(self) -> list[RuntimeInfo]:
        # Status must answer while the engine does not: then nothing is available.
        try:
            info = await _thread(self.client.info)
        except SandboxUnavailable as exc:
            log.warning("docker info failed: %s", exc)
            return await runtimes.describe({})
        engine = info.get("Runtimes") if isinstance(info, dict) else None
        return await runtimes.describe(engine if isinstance(engine, dict) else {})

    def pool_status(self) -> PoolStatus:
        return self.pool.status()

    async def get(self, instance_id: str) -> SandboxInfo:
        container = await self._find(instance_id)
        if container is None:
            raise unknown_instance(instance_id)
        return _info(instance_id, container, self._parked(instance_id))

    def _parked(self, instance_id: str) -> bool:
        workspace = self._workspaces.get(instance_id)
        return workspace is not None and workspace.activity.parked

    async def read_marks(self, instance_id: str | None = None) -> dict[str, dict[str, str]]:
        found: dict[str, dict[str, str]] = await _thread(
            marks.read, self.client, self.settings.namespace, instance_id
        )
        return found

    async def write_marks(self, instance_id: str, values: Mapping[str, str]) -> None:
        await _thread(marks.write, self.client, self.settings.namespace, instance_id, values)

    async def list(self, label_selector: Mapping[str, str]) -> list[SandboxInfo]:
        found = await _thread(
            self.client.containers.list,
            all=True,
            # A container removed between the listing and its inspection
            # (a pool workspace discarded meanwhile) is not an error.
            ignore_removed=True,
            filters={"label": labels.selector(self.settings.namespace, label_selector)},
        )
        infos = []
        for container in found:
            instance_id = labels.instance_from_name(self.settings.namespace, container.name or "")
            if instance_id is not None:
                infos.append(_info(instance_id, container, self._parked(instance_id)))
        return sorted(infos, key=lambda info: info.instance_id)

    async def delete(self, instance_id: str) -> None:
        async with self._lock(instance_id):
            workspace = self._workspaces.pop(instance_id, None)
            if workspace is not None:
                await workspace.disconnect()
            if not await self._remove_container_and_volume(self._name(instance_id)):
                raise unknown_instance(instance_id)

    async def restart(self, instance_id: str) -> SandboxInfo:
        workspace = await self.workspace(instance_id)
        await workspace.restart()
        return _info(instance_id, workspace.container)

    async def fork(self, source_id: str, new_id: str, override: SandboxOptions) -> ForkResult:
        started = time.monotonic()
        first, second = sorted((source_id, new_id))
        async with self._lock(first), self._lock(second):
            source = await self._find(source_id)
            if source is None:
                raise unknown_instance(source_id)
            if await self._find(new_id) is not None:
                raise AlreadyExists(f"sandbox {new_id!r} already exists; fork onto a new id")
            wanted = effective(
                overridden(labels.options_from(source.labels), override), self.settings
            )
            await self._check_creatable(wanted)
            name = self._name(new_id)
            copied = await self._copy_image(source, name)
            if copied is not None:
                # A disk-image volume: its image was copied whole (O(data)), and
                # the fork's volume is made on the copy.
                image, device, method = copied
                container = await self._create_container(
                    name, wanted, pooled=False, disk_image=(image, device)
                )
            else:
                container = await self._create_container(name, wanted, pooled=False)
            try:
                if copied is None:
                    method = await self._copy_volume(source, name)
                workspace = self._workspace_for(new_id, container)
                await workspace.ensure_running()
            except BaseException:
                self._workspaces.pop(new_id, None)
                await self._remove_container_and_volume(name)
                raise
            return ForkResult(
                sandbox=_info(new_id, workspace.container),
                method=method,
                duration_ms=int((time.monotonic() - started) * 1000),
            )

    async def _copy_image(self, source: Container, name: str) -> tuple[Path, str, str] | None:
        """When the source's volume is a disk image: a copy of it for ``name``,
        taken with the source paused and its filesystem frozen, attached to a
        loop device: (image, device, method). None for a plain volume."""
        source_volume = source.labels.get(labels.VOLUME, source.name or "")
        attrs = await _thread(lambda: self.client.volumes.get(source_volume).attrs)
        image_label = (attrs.get("Labels") or {}).get(disk.DISK_LABEL)
        if not image_label:
            return None
        await anyio.to_thread.run_sync(
            disk.check_room, self.settings.disk_dir, self.settings.disk_reserve_bytes
        )
        mountpoint = str(attrs.get("Mountpoint") or "")
        await _thread(source.reload)
        paused = False
        if source.status == "running":
            await _thread(source.pause)
            paused = True
        try:
            mounted = bool(mountpoint) and await anyio.to_thread.run_sync(
                os.path.ismount, mountpoint
            )
            image, method = await anyio.to_thread.run_sync(
                disk.copy,
                Path(image_label),
                mountpoint if mounted else None,
                self.settings.disk_dir,
                name,
            )
        except BaseException:
            if paused:
                await self._unpause(source)
            raise
        # The source runs again while the copy gets its loop device.
        unpausing = asyncio.ensure_future(self._unpause(source)) if paused else None
        try:
            device = await anyio.to_thread.run_sync(disk.attach, image)
        except BaseException:
            image.unlink(missing_ok=True)
            raise
        finally:
            if unpausing is not None:
                await asyncio.shield(unpausing)
        return image, device, method

    async def _unpause(self, container: Container) -> None:
        with contextlib.suppress(docker.errors.NotFound, SandboxUnavailable):
            await _thread(container.unpause)

    async def _copy_volume(self, source: Container, target_volume: str) -> str:
        """Copy the source's workspace volume into ``target_volume`` with the
        source frozen (``docker pause``), so the copy is one moment's state."""
        src = await self._volume_attrs(source)
        dst = await _thread(lambda: self.client.volumes.get(target_volume).attrs)

        def copy() -> str:
            with (
                disk.volume_folder(src, writable=False) as source_dir,
                disk.volume_folder(dst, writable=True) as target_dir,
            ):
                return clone.copy_tree(source_dir, target_dir)

        async with self._frozen(source):
            method: str = await anyio.to_thread.run_sync(copy)
            return method

    async def _volume_attrs(self, container: Container) -> dict[str, Any]:
        volume = container.labels.get(labels.VOLUME, container.name or "")
        attrs: dict[str, Any] = await _thread(lambda: self.client.volumes.get(volume).attrs)
        return attrs

    @contextlib.asynccontextmanager
    async def _frozen(self, container: Container) -> AsyncIterator[None]:
        """The container paused (``docker pause``) while the body runs, if it ran."""
        await _thread(container.reload)
        paused = False
        if container.status == "running":
            await _thread(container.pause)
            paused = True
        try:
            yield
        finally:
            if paused:
                await self._unpause(container)

    # ------------------------------------------------------------ snapshots

    def _snapshot_lock(self, tenant: str, name: str) -> asyncio.Lock:
        return self._locks.setdefault(f"snapshot\0{tenant}\0{name}", asyncio.Lock())

    async def snapshot(self, instance_id: str, name: str, tenant: str) -> SnapshotInfo:
        """A disk-image workspace's snapshot is a copy of its image (taken paused
        and frozen, as a fork's); a plain volume's, a copy of its files."""
        started = time.monotonic()
        async with self._lock(instance_id), self._snapshot_lock(tenant, name):
            container = await self._find(instance_id)
            if container is None:
                raise unknown_instance(instance_id)
            namespace = self.settings.namespace
            if await _thread(snapshots.volumes, self.client, namespace, tenant, name):
                raise AlreadyExists(
                    f"snapshot {name!r} already exists; delete it or choose another"
                )
            source = await self._volume_attrs(container)
            source_image = (source.get("Labels") or {}).get(disk.DISK_LABEL)
            volume_name = snapshots.volume_name(namespace)
            image = self.settings.disk_dir / f"{volume_name}.img" if source_image else None
            if image is not None:
                await anyio.to_thread.run_sync(
                    disk.check_room, self.settings.disk_dir, self.settings.disk_reserve_bytes
                )
            volume = await _thread(
                snapshots.create_volume, self.client, namespace, tenant, name, volume_name, image
            )
            folder = str(volume.attrs.get("Mountpoint") or "")
            taking = shared_snapshots.Taking(
                name, instance_id, labels.options_from(container.labels), started
            )

            def take() -> SnapshotInfo:
                if source_image:
                    mountpoint = str(source.get("Mountpoint") or "")
                    mounted = bool(mountpoint) and os.path.ismount(mountpoint)
                    copied, method = disk.copy(
                        Path(source_image),
                        mountpoint if mounted else None,
                        self.settings.disk_dir,
                        volume_name,
                    )
                    return taking.finish(folder, method, disk.allocated(copied))
                with disk.volume_folder(source, writable=False) as source_dir:
                    return shared_snapshots.take(source_dir, folder, taking)

            try:
                async with self._frozen(container):
                    info: SnapshotInfo = await anyio.to_thread.run_sync(take)
            except BaseException:
                with contextlib.suppress(SandboxUnavailable):
                    await _thread(snapshots.remove, volume)
                raise
            return info

    async def snapshots(self, tenant: str) -> Sequence[SnapshotInfo]:
        found: Sequence[SnapshotInfo] = await _thread(
            snapshots.finished, self.client, self.settings.namespace, tenant
        )
        return found

    async def delete_snapshot(self, name: str, tenant: str) -> None:
        async with self._snapshot_lock(tenant, name):
            found = await _thread(
                snapshots.volumes, self.client, self.settings.namespace, tenant, name
            )
            if not found:
                raise shared_snapshots.unknown(name)
            for volume in found:
                await _thread(snapshots.remove, volume)

    async def restore(self, instance_id: str, name: str, tenant: str) -> ForkResult:
        """With the container stopped: an image snapshot onto a workspace image
        of its size is copied over it whole; otherwise files are copied."""
        started = time.monotonic()
        async with self._lock(instance_id), self._snapshot_lock(tenant, name):
            container = await self._find(instance_id)
            if container is None:
                raise unknown_instance(instance_id)
            (snapshot, volume), target = await asyncio.gather(
                _thread(snapshots.find, self.client, self.settings.namespace, tenant, name),
                self._volume_attrs(container),
            )
            snapshot_image = snapshots.image_of(volume)
            folder = str(volume.attrs.get("Mountpoint") or "")
            target_image = (target.get("Labels") or {}).get(disk.DISK_LABEL)
            if target_image:
                size = await anyio.to_thread.run_sync(os.path.getsize, target_image)
                shared_snapshots.check_fits(snapshot, size)

            def copy_back() -> str:
                mountpoint = str(target.get("Mountpoint") or "")
                device = (target.get("Options") or {}).get("device") or ""
                if (
                    snapshot_image is not None
                    and target_image
                    and device
                    and not (mountpoint and os.path.ismount(mountpoint))
                    and snapshot_image.stat().st_size == os.path.getsize(target_image)
                ):
                    return disk.overwrite(snapshot_image, Path(target_image), device)
                with disk.volume_folder(target, writable=True) as target_dir:
                    if snapshot_image is None:
                        return shared_snapshots.restore(folder, target_dir)
                    with disk.image_folder(snapshot_image) as source_dir:
                        return shared_snapshots.restore_tree(source_dir, target_dir)

            method = ""

            async def stopped() -> None:
                nonlocal method
                method = await anyio.to_thread.run_sync(copy_back)

            workspace = self._workspace_for(instance_id, container)
            await workspace.restart(stopped)
            return ForkResult(
                sandbox=_info(instance_id, workspace.container),
                method=method,
                duration_ms=int((time.monotonic() - started) * 1000),
            )

    # ------------------------------------------------------------ templates

    async def build_template(
        self, context: Path, dockerfile: str
    ) -> AsyncIterator[str | TemplateInfo]:
        """Build (or find, by its content's digest) a template; see templates.py."""
        started = time.monotonic()
        network = self.settings.template_build_network
        text = await anyio.to_thread.run_sync(templates.dockerfile_of, context, dockerfile)

        def local(image: str) -> bool:
            try:
                self.client.images.get(image)
            except docker.errors.ImageNotFound:
                return False
            return True

        def digest() -> str:
            bases = templates.check(text, network=network, local=local)
            ids = [self.client.images.get(b).id for b in bases if b.lower() != "scratch"]
            return templates.digest(context, dockerfile, network, ids)

        found = await _thread(digest)
        tag = f"{templates.REPOSITORY}:{self.settings.namespace}-{found[:32]}"
        async with self._lock(f"template\0{tag}"):
            if not local(tag):
                async for line in self._build(context, dockerfile, tag, found, network):
                    yield line
                await _thread(
                    templates.check_needs, self.client, tag, self.settings.executor_python
                )
                cached = False
            else:
                cached = True
            image = await _thread(self.client.images.get, tag)
        yield TemplateInfo(
            image=tag,
            cached=cached,
            duration_ms=int((time.monotonic() - started) * 1000),
            size_bytes=int(image.attrs.get("Size") or 0),
        )

    async def template_from_snapshot(
        self, name: str, tenant: str
    ) -> AsyncIterator[str | TemplateInfo]:
        """The snapshot's files in /workspace of its sandbox's image, built as
        any template is (same checks, same content tag)."""
        snapshot, volume = await _thread(
            snapshots.find, self.client, self.settings.namespace, tenant, name
        )
        image = snapshots.image_of(volume)
        folder = str(volume.attrs.get("Mountpoint") or "")
        fd, name_of_context = tempfile.mkstemp(prefix="sandboxd-template-", suffix=".tar")
        os.close(fd)
        context = Path(name_of_context)

        def make() -> None:
            with contextlib.ExitStack() as stack:
                files = (
                    stack.enter_context(disk.image_folder(image))
                    if image is not None
                    else os.path.join(folder, shared_snapshots.FILES)
                )
                templates.snapshot_context(context, files, snapshot.options.image)

        try:
            await anyio.to_thread.run_sync(make)
            async for part in self.build_template(context, "Dockerfile"):
                yield part
        finally:
            with contextlib.suppress(OSError):
                os.unlink(context)

    async def _build(
        self, context: Path, dockerfile: str, tag: str, digest: str, network: bool
    ) -> AsyncIterator[str]:
        """The engine's build in a thread, its log lines handed over as they
        come, within the operator's time limit. A build that makes no
        template (over its limit, failed, or its caller gone) is stopped
        and what it made removed before this returns."""
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[str | BaseException | None] = asyncio.Queue()
        build = templates.Build(self.client)

        def run() -> None:
            def emit(line: str) -> None:
                loop.call_soon_threadsafe(lines.put_nowait, line)

            try:
                build.run(
                    context,
                    dockerfile=dockerfile,
                    tag=tag,
                    labels={
                        labels.MANAGED: "true",
                        labels.NAMESPACE: self.settings.namespace,
                        templates.TEMPLATE_LABEL: digest,
                    },
                    network=network,
                    memory_bytes=self.settings.memory_bytes,
                    emit=emit,
                )
            except docker.errors.APIError as exc:
                failure: BaseException = (
                    InvalidArgument(f"the template build failed: {exc.explanation or exc}")
                    if exc.is_client_error()
                    else SandboxUnavailable(f"Docker engine error: {exc.explanation or exc}")
                )
                loop.call_soon_threadsafe(lines.put_nowait, failure)
            except BaseException as exc:  # handed to the caller, raised there
                loop.call_soon_threadsafe(lines.put_nowait, exc)
            else:
                loop.call_soon_threadsafe(lines.put_nowait, None)

        limit = self.settings.template_build_timeout_s
        deadline = loop.time() + limit
        worker = asyncio.ensure_future(anyio.to_thread.run_sync(run))
        made = False
        try:
            while True:
                try:
                    # A deadline per wait, not asyncio.timeout around the loop:
                    # this generator is suspended in its caller's task at each yield.
                    item = await asyncio.wait_for(lines.get(), max(deadline - loop.time(), 0))
                except TimeoutError:
                    raise Timeout(
                        f"the template build ran over its time limit of {limit:g} s "
                        "(SANDBOXD_TEMPLATE_BUILD_TIMEOUT_S): it was stopped and what it "
                        "had made removed; make its slow steps faster, or ask the operator "
                        "for a longer limit"
                    ) from None
                if item is None:
                    made = True
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            if not made:
                build.stop()
            await asyncio.shield(worker)
            if not made:
                removed = await _thread(build.remove_leftovers, tag)
                log.info("template build %s made nothing: removed %d image(s)", tag, len(removed))

    def _ours(self, found_labels: Mapping[str, str] | None) -> bool:
        """Made by a daemon of this namespace: nothing else is ever removed
        (a name alone once matched another namespace's workspace)."""
        found_labels = found_labels or {}
        return (
            found_labels.get(labels.MANAGED) == "true"
            and found_labels.get(labels.NAMESPACE) == self.settings.namespace
        )

    async def _remove_container_and_volume(self, name: str) -> bool:
        def remove() -> bool:
            removed = False
            volume = name
            try:
                container = self.client.containers.get(name)
                if not self._ours(container.labels):
                    log.warning("not removing %s: not this namespace's", name)
                    return False
                volume = container.labels.get(labels.VOLUME, name)
                container.remove(force=True)
                removed = True
            except docker.errors.NotFound:
                pass
            try:
                found = self.client.volumes.get(volume)
                if not self._ours(found.attrs.get("Labels")):
                    log.warning("not removing volume %s: not this namespace's", volume)
                    return removed
                image = (found.attrs.get("Labels") or {}).get(disk.DISK_LABEL)
                found.remove(force=True)
                if image:
                    disk.remove(Path(image))
                removed = True
            except docker.errors.NotFound:
                pass
            return removed

        result: bool = await _thread(remove)
        return result

    async def workspace(self, instance_id: str) -> DockerWorkspace:
        workspace = self._workspaces.get(instance_id)
        if workspace is None:
            async with self._lock(instance_id):
                workspace = self._workspaces.get(instance_id)
                if workspace is None:
                    container = await self._find(instance_id)
                    if container is None:
                        raise unknown_instance(instance_id)
                    workspace = self._workspace_for(instance_id, container)
        return workspace


def _bootstrap(python: str) -> list[str]:
    return bootstrap_command(python, separate=True, nonce=True)


def _stop_reason(container: Container, parked: bool) -> str:
    """Why the engine says a container is not running ("" while it runs or never ran)."""
    if container.status in ("running", "created", "restarting"):
        return ""
    state = container.attrs.get("State")
    state = state if isinstance(state, dict) else {}
    if state.get("OOMKilled"):
        return TerminationReason.OUT_OF_MEMORY
    if parked:
        return TerminationReason.IDLE
    code = state.get("ExitCode", 0)
    return (
        TerminationReason.KILLED
        if isinstance(code, int) and code >= 128
        else TerminationReason.EXITED
    )


def _info(instance_id: str, container: Container, parked: bool = False) -> SandboxInfo:
    container_labels = container.labels
    return SandboxInfo(
        instance_id=instance_id,
        state="running" if container.status == "running" else "stopped",
        container_id=container.id or "",
        volume=container_labels.get(labels.VOLUME, container.name or ""),
        options=labels.options_from(container_labels),
        created_at_ms=int(container_labels.get(labels.CREATED_AT, "0") or 0),
        termination_reason=_stop_reason(container, parked),
    )

"""The Docker backend: one container and one named volume per instance.

Docker is the source of truth: names are unique per engine (so a create race
has one winner), and labels carry the instance id and its options, so a
restarted daemon finds every workspace again. docker-py is blocking and only
ever runs behind ``anyio.to_thread``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

import anyio
import docker
import docker.errors
from docker.models.containers import Container
from docker.types import LogConfig, Mount

from sandboxd.backends import labels
from sandboxd.backends.docker_workspace import DockerWorkspace
from sandboxd.config import Settings
from sandboxd.errors import InvalidArgument, SandboxUnavailable
from sandboxd.models import Runtime, SandboxInfo, SandboxOptions
from sandboxd.options import check_same, effective
from sandboxd.validation import unknown_instance

log = logging.getLogger(__name__)

WORKSPACE_MOUNT = "/workspace"
SANDBOX_USER = "1000:1000"


async def _thread(func: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return await anyio.to_thread.run_sync(lambda: func(*args, **kwargs))
    except docker.errors.NotFound:
        raise
    except docker.errors.APIError as exc:
        raise SandboxUnavailable(f"Docker engine error: {exc.explanation or exc}") from exc
    except docker.errors.DockerException as exc:
        raise SandboxUnavailable(f"Docker engine unreachable: {exc}") from exc


class DockerBackend:
    name = "docker"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._client: docker.DockerClient | None = None
        self._workspaces: dict[str, DockerWorkspace] = {}
        self._locks: dict[str, asyncio.Lock] = {}

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
        adopted = await self.list({})
        log.info("docker backend ready: adopted %d workspace(s)", len(adopted))

    async def close(self) -> None:
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

    async def create(self, instance_id: str, options: SandboxOptions) -> tuple[SandboxInfo, bool]:
        wanted = effective(options, self.settings)
        async with self._lock(instance_id):
            existing = await self._find(instance_id)
            if existing is not None:
                check_same(instance_id, options, labels.options_from(existing.labels))
                workspace = self._workspace_for(instance_id, existing)
                await workspace.ensure_running()
                return await self._info(instance_id), False
            await self._check_creatable(wanted)
            container = await self._create_container(instance_id, wanted)
            workspace = self._workspace_for(instance_id, container)
            try:
                await workspace.ensure_running()
            except BaseException:
                await self._remove_resources(instance_id)
                raise
            return await self._info(instance_id), True

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

    async def _create_container(self, instance_id: str, options: SandboxOptions) -> Container:
        name = self._name(instance_id)
        created_at = int(time.time() * 1000)
        resource_labels = labels.for_instance(
            self.settings.namespace, instance_id, options, created_at
        )

        def create() -> Container:
            self.client.volumes.create(name=name, labels=resource_labels)
            env = {"HOME": "/tmp/home", **options.env}
            return self.client.containers.create(
                options.image,
                command=_bootstrap(),
                name=name,
                labels=resource_labels,
                environment=env,
                user=SANDBOX_USER,
                working_dir=WORKSPACE_MOUNT,
                hostname="sandbox",
                stdin_open=True,
                # Without detach docker-py sets StdinOnce, and the executor would see
                # EOF the first time a daemon lets go of the attach stream.
                detach=True,
                tty=False,
                init=True,
                network_mode="bridge" if options.network else "none",
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                read_only=True,
                tmpfs={"/tmp": f"rw,nosuid,nodev,size={self.settings.tmp_bytes},mode=1777"},
                mounts=[Mount(target=WORKSPACE_MOUNT, source=name, type="volume")],
                mem_limit=options.memory_bytes,
                memswap_limit=options.memory_bytes,
                nano_cpus=int(options.cpus * 1e9),
                pids_limit=options.pids_limit,
                runtime=(options.runtime or Runtime.RUNC).value,
                log_config=LogConfig(type="none"),
            )

        try:
            container: Container = await _thread(create)
        except BaseException:
            await self._remove_resources(instance_id)
            raise
        return container

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

    async def get(self, instance_id: str) -> SandboxInfo:
        return await self._info(instance_id)

    async def _info(self, instance_id: str) -> SandboxInfo:
        container = await self._find(instance_id)
        if container is None:
            raise unknown_instance(instance_id)
        return _info(container)

    async def list(self, label_selector: Mapping[str, str]) -> list[SandboxInfo]:
        found = await _thread(
            self.client.containers.list,
            all=True,
            filters={"label": labels.selector(self.settings.namespace, label_selector)},
        )
        return sorted((_info(c) for c in found), key=lambda info: info.instance_id)

    async def delete(self, instance_id: str) -> None:
        async with self._lock(instance_id):
            workspace = self._workspaces.pop(instance_id, None)
            if workspace is not None:
                await workspace.disconnect()
            if not await self._remove_resources(instance_id):
                raise unknown_instance(instance_id)

    async def _remove_resources(self, instance_id: str) -> bool:
        name = self._name(instance_id)

        def remove() -> bool:
            removed = False
            try:
                self.client.containers.get(name).remove(force=True)
                removed = True
            except docker.errors.NotFound:
                pass
            try:
                self.client.volumes.get(name).remove(force=True)
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


def _bootstrap() -> list[str]:
    from sandboxd.executor.bundle import bootstrap_command

    return bootstrap_command()


def _info(container: Container) -> SandboxInfo:
    container_labels = container.labels
    status = container.status
    return SandboxInfo(
        instance_id=container_labels.get(labels.INSTANCE, ""),
        state="running" if status == "running" else "stopped",
        container_id=container.id or "",
        volume=container.name or "",
        options=labels.options_from(container_labels),
        created_at_ms=int(container_labels.get(labels.CREATED_AT, "0") or 0),
    )

"""Docker fixtures (a pytest plugin, loaded by tests/conftest.py): a real engine,
the real workspace image, a real daemon process.

Everything made here lives in a per-run namespace and is removed at the end.
Under CI=true a missing engine or image FAILS these tests; elsewhere they skip
with the reason.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import docker
import docker.errors
import pytest

from runtime_client import GrpcSandboxFactory
from sandboxd.backends.docker import disk
from sandboxd.backends.shared import labels
from sandboxd.contract.models import Runtime, SandboxOptions
from tests.helpers import TEST_DISK_BYTES, Daemon

if TYPE_CHECKING:
    from sandboxd.backends.docker.backend import DockerBackend
    from sandboxd.backends.docker.workspace import DockerWorkspace

IMAGE = os.environ.get("SANDBOXD_IMAGE", "sandboxd-workspace:latest")
RUN_PREFIX = f"t{secrets.token_hex(3)}"
ROOMY_DISK_BYTES = 2 << 30


def _engine_problem() -> str | None:
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        return f"no Docker engine answers ({exc}); run `make engine`"
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        return f"image {IMAGE} is missing; run `make image`"
    finally:
        client.close()
    return None


def remove_namespace_resources(client: docker.DockerClient, prefix: str) -> None:
    """Remove every container and volume whose namespace starts with ``prefix``."""
    # The low-level listing: containers.list inspects each container, which
    # races with other test runs on the same engine removing theirs.
    for found in client.api.containers(all=True, filters={"label": f"{labels.MANAGED}=true"}):
        if (found.get("Labels") or {}).get(labels.NAMESPACE, "").startswith(prefix):
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(found["Id"], force=True)
    for volume in client.volumes.list(filters={"label": f"{labels.MANAGED}=true"}):
        volume_labels = volume.attrs.get("Labels") or {}
        if volume_labels.get(labels.NAMESPACE, "").startswith(prefix):
            with contextlib.suppress(docker.errors.NotFound):
                volume.remove(force=True)
            if disk.DISK_LABEL in volume_labels:  # its loop device and image too
                disk.remove(Path(volume_labels[disk.DISK_LABEL]))


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    problem = _engine_problem()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and the Docker tier cannot run: {problem}")
        pytest.skip(problem)
    client = docker.from_env()
    try:
        yield client
    finally:
        remove_namespace_resources(client, RUN_PREFIX)
        client.close()
    # Every disk of this run went with its sandbox or its daemon's pool: a loop
    # device still attached to one of its images is a leak (detached here, so
    # that it does not outlive the run, and reported).
    leaked = [line for line in disk.loop_devices() if f"/sandboxd-{RUN_PREFIX}-" in line]
    for line in leaked:
        subprocess.run(["losetup", "--detach", line.split()[0]], check=False)
    assert leaked == [], "loop devices leaked by the docker tier"


@pytest.fixture(scope="session")
def namespace() -> str:
    return f"{RUN_PREFIX}-main"


@pytest.fixture(scope="session")
def daemon(
    docker_client: docker.DockerClient, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    folder = tmp_path_factory.mktemp("daemon")
    process = Daemon(
        folder / "sandboxd.sock",
        "--namespace",
        namespace,
        "--image",
        IMAGE,
        "--max-payload-bytes", str(1 << 20),
        "--drain-seconds", "5",
        # Every workspace of the docker tier gets a 64 MiB disk of its own;
        # tests that need more use ``roomy_daemon``.
        "--disk-bytes", str(TEST_DISK_BYTES),
        "--disk-dir", str(folder / "disks"),
    ).start()  # fmt: skip
    yield process
    process.stop()
    assert_nothing_left(docker_client, namespace, folder / "disks")


@pytest.fixture(scope="session")
def roomy_daemon(
    docker_client: docker.DockerClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    """A daemon whose workspaces get 2 GiB disks, for the few tests that write
    more than the tier's 64 MiB (a 1 GiB file, 200 MiB transfers); no pool."""
    folder = tmp_path_factory.mktemp("roomy")
    namespace = f"{RUN_PREFIX}-roomy"
    process = Daemon(
        folder / "sandboxd.sock",
        "--namespace", namespace,
        "--image", IMAGE,
        "--max-payload-bytes", str(1 << 20),
        "--drain-seconds", "5",
        "--pool-size", "0",
        "--disk-bytes", str(ROOMY_DISK_BYTES),
        "--disk-dir", str(folder / "disks"),
    ).start()  # fmt: skip
    yield process
    process.stop()
    assert_nothing_left(docker_client, namespace, folder / "disks")


@pytest.fixture
async def roomy_factory(roomy_daemon: Daemon) -> AsyncIterator[GrpcSandboxFactory]:
    async with GrpcSandboxFactory(roomy_daemon.target) as factory:
        yield factory


def assert_nothing_left(client: docker.DockerClient, namespace: str, disks: Path) -> None:
    # Every test deletes what it made and a stopped daemon removes its pool,
    # so nothing of this namespace may be left: no container, volume, disk
    # image or loop device.
    where = {"label": f"{labels.NAMESPACE}={namespace}"}
    leftovers = client.api.containers(all=True, filters=where)
    assert [c["Names"] for c in leftovers] == [], "containers leaked by the docker tier"
    assert [v.name for v in client.volumes.list(filters=where)] == [], "volumes leaked"
    images = sorted(disks.glob("*.img")) if disks.exists() else []
    assert images == [], "disk images leaked by the docker tier"
    attached = [line for line in disk.loop_devices() if str(disks) in line]
    assert attached == [], "loop devices leaked by the docker tier"


@pytest.fixture
def daemon_factory(docker_client: docker.DockerClient, tmp_path: Path) -> Iterator[type[Daemon]]:
    """Start extra daemons (their own namespace) that the test may kill."""
    started: list[Daemon] = []

    class TestDaemon(Daemon):
        def start(self, timeout: float = 60.0) -> Daemon:
            started.append(self)
            return super().start(timeout)

    yield TestDaemon
    for process in started:
        process.stop()


@pytest.fixture
async def factory(daemon: Daemon) -> AsyncIterator[GrpcSandboxFactory]:
    async with GrpcSandboxFactory(daemon.target) as factory:
        yield factory


@pytest.fixture
def instance_id(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name[:40].strip('_-[]')}-{secrets.token_hex(3)}".replace(
        "[", "-"
    ).replace("]", "")


def container_name(namespace: str, instance_id: str) -> str:
    return labels.resource_name(namespace, instance_id)


OpenWorkspace = Callable[..., Awaitable["DockerWorkspace"]]


@pytest.fixture
async def open_workspace(
    docker_client: docker.DockerClient, tmp_path: Path
) -> AsyncIterator[OpenWorkspace]:
    """Running workspaces of an in-process DockerBackend, for tests that look at
    its internals (``open_workspace(runtime, **settings)``); removed at the end."""
    # In-process backend modules only where a test asks for them.
    from sandboxd.backends.docker.backend import DockerBackend
    from sandboxd.backends.shared.options import effective
    from sandboxd.daemon.settings import Settings

    made: list[tuple[DockerBackend, str]] = []
    backends: list[DockerBackend] = []

    async def open_one(runtime: Runtime = Runtime.RUNC, **overrides: object) -> DockerWorkspace:
        settings = Settings.model_validate(
            {
                "namespace": f"{RUN_PREFIX}-ws-{secrets.token_hex(2)}",
                "image": IMAGE,
                "pool_size": 0,
                "disk_bytes": 0,
                "disk_dir": tmp_path / "disks",
                **overrides,
            }
        )
        backend = DockerBackend(settings)
        await backend.start()
        backends.append(backend)
        instance_id = f"ws-{secrets.token_hex(3)}"
        options = SandboxOptions(runtime=runtime)
        await backend.create(instance_id, options, effective(options, settings))
        made.append((backend, instance_id))
        workspace = await backend.workspace(instance_id)
        await workspace.ensure_running()
        return workspace

    yield open_one
    for backend, instance_id in made:
        with contextlib.suppress(Exception):
            await backend.delete(instance_id)
    for backend in backends:
        await backend.close()

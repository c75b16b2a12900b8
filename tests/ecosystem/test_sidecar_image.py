"""The sidecar image for real: built, run with the host's Docker socket, and
reached from the host through a mounted socket folder."""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import docker
import grpc
import pytest
from docker.models.containers import Container

from runtime_client import GrpcSandboxFactory
from sandboxd.backends.shared import labels
from tests.docker_fixtures import IMAGE, RUN_PREFIX
from tests.helpers import ROOT, health_status

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

TAG = "sandboxd:latest"


def _wait_serving(target: str, container: Container) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        container.reload()
        assert container.status in ("created", "running"), container.logs().decode()[-2000:]
        try:
            if health_status(target, timeout=0.5) == "SERVING":
                return
        except grpc.RpcError:  # not listening yet
            pass
        time.sleep(0.2)
    raise AssertionError(f"sidecar never SERVING:\n{container.logs().decode()[-2000:]}")


@pytest.fixture
def sidecar(
    docker_client: docker.DockerClient, tmp_path: Path
) -> Iterator[tuple[Container, str, str]]:
    """The sidecar container, SERVING on a socket in a host folder; removed afterwards."""
    # Idempotent: a no-op when the image already matches the tree.
    subprocess.run([str(ROOT / "images/sandboxd/build.sh"), TAG], check=True, timeout=1100)
    socket_dir = tmp_path / "run"
    socket_dir.mkdir()
    namespace = f"{RUN_PREFIX}-sidecar"
    container = docker_client.containers.run(
        TAG,
        detach=True,
        name=f"sandboxd-sidecar-{secrets.token_hex(3)}",
        volumes={
            "/var/run/docker.sock": {"bind": "/var/run/docker.sock", "mode": "rw"},
            str(socket_dir): {"bind": "/run/sandboxd", "mode": "rw"},
        },
        environment={
            "SANDBOXD_NAMESPACE": namespace,
            "SANDBOXD_POOL_SIZE": "0",
            "SANDBOXD_IMAGE": IMAGE,
        },
        # The session's clean-up removes it even if this test dies half-way.
        labels={labels.MANAGED: "true", labels.NAMESPACE: namespace},
    )
    try:
        target = f"unix://{socket_dir}/sandboxd.sock"
        _wait_serving(target, container)
        yield container, target, namespace
    finally:
        container.stop(timeout=30)
        logs = container.logs().decode()
        container.remove(force=True)
    assert "sandboxd stopped" in logs, logs[-2000:]


@pytest.mark.timeout(1200)
async def test_sidecar_serves_workspaces_through_a_mounted_socket(
    sidecar: tuple[Container, str, str], docker_client: docker.DockerClient
) -> None:
    container, target, namespace = sidecar
    async with GrpcSandboxFactory(target) as factory:
        status = await factory.transport.get_status()
        assert (status.backend, status.namespace) == ("docker", namespace)
        sandbox = await factory.create_sandbox(f"sidecar-{secrets.token_hex(3)}")
        try:
            result = await sandbox.bash("id -u; echo ok")
            assert result.text.startswith("1000\nok\n"), result.text
            info = await sandbox.info()
            # A sibling container on the host's engine, not one inside the sidecar.
            assert docker_client.containers.get(info.container_id).status == "running"
        finally:
            await sandbox.delete()
    # Docker's own health check runs `sandboxctl health` inside the sidecar.
    with anyio.fail_after(30):
        while True:
            container.reload()
            if container.attrs["State"].get("Health", {}).get("Status") == "healthy":
                break
            await anyio.sleep(0.5)

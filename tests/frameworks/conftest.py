"""The frameworks tier: one real daemon on the Docker backend for every
framework's provider suite (`make frameworks-test`, .venv-frameworks)."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from tests.docker_fixtures import IMAGE, RUN_PREFIX, assert_nothing_left
from tests.helpers import Daemon

#: The suites write 50 MiB files (inspect) and inspect's tools unpack 32 MiB
#: under /var/tmp: more than the docker tier's 64 MiB disks. Sparse, so cheap.
FRAMEWORKS_DISK_BYTES = 1 << 30


@pytest.fixture(scope="session")
def frameworks_daemon(
    docker_client: docker.DockerClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    """sandboxd as the frameworks meet it: the product's payload and output
    limits, a warm pool, its own namespace (removed, and checked empty, at the end)."""
    folder = tmp_path_factory.mktemp("frameworks")
    namespace = f"{RUN_PREFIX}-fw"
    process = Daemon(
        folder / "sandboxd.sock",
        "--namespace", namespace,
        "--image", IMAGE,
        "--drain-seconds", "5",
        "--disk-bytes", str(FRAMEWORKS_DISK_BYTES),
        "--disk-dir", str(folder / "disks"),
    ).start()  # fmt: skip
    yield process
    process.stop()
    assert_nothing_left(docker_client, namespace, folder / "disks")

"""Issue 23 item 10: space freed in a sandbox goes back to the host.

Disk images never shrank: write 100 MB in a workspace, delete it, and the
image kept its 101 MB on the host, so about 18 full sandboxes filled this
host's disk. Workspace disks are now mounted with ``discard``: ext4 tells
the loop device which blocks it freed, and the loop device punches them out
of the image file.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import docker
import pytest

from runtime_client import Sandbox
from sandboxd.backends.docker import disk
from sandboxd.backends.shared import labels

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(180)]

MB = 1000 * 1000


def _used(image: Path) -> int:
    return os.stat(image).st_blocks * 512


async def test_freed_space_goes_back_to_the_host(
    box: Sandbox, docker_client: docker.DockerClient, namespace: str
) -> None:
    container = docker_client.containers.get(labels.resource_name(namespace, box.instance_id))
    volume = docker_client.volumes.get(container.labels[labels.VOLUME])
    image = Path(volume.attrs["Labels"][disk.DISK_LABEL])
    start = _used(image)
    # 40 MB: the docker tier's disks are 64 MiB.
    await box.exec("head -c 40000000 /dev/urandom > big && sync -f big", timeout_ms=60_000)
    full = _used(image)
    assert full - start >= 35 * MB
    await box.exec("rm big && sync -f .", timeout_ms=60_000)
    for _ in range(50):  # the discard reaches the image soon after the sync
        after = _used(image)
        if after - start < 5 * MB:
            break
        await anyio.sleep(0.2)
    print(f"\nimage on the host: {start // MB} -> {full // MB} -> {after // MB} MB")
    assert after - start < 5 * MB, (start, full, after)

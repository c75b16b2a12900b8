"""No setuid or setgid file from a client, and a workspace mounted without them
(issue 23, item 12).

The attack: ``Upload`` (and ``WriteFile``) with ``mode=0o6755`` kept both bits,
while tree uploads already stripped them. Setuid programs inside the sandbox
grant nothing (no-new-privileges), but the workspace's disk is also mounted
on the host, where such a file is one more thing to trust.
"""

from __future__ import annotations

import anyio
import docker
import pytest

from runtime_client import Sandbox
from sandboxd.backends.shared import labels
from sandboxd.contract.models import Runtime

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(180)]

_MODES = (
    "python3 -c 'import os, sys; "
    "[print(p, oct(os.stat(p).st_mode & 0o7777)) for p in sys.argv[1:]]' "
)


async def test_uploads_and_writes_never_keep_setuid_or_setgid(box: Sandbox) -> None:
    await box.upload("up.bin", b"#!/bin/sh\necho hi\n", mode=0o6755)
    await box.write_file("write.bin", b"#!/bin/sh\n", mode=0o6755)
    await box.write_file("sticky", b"x", mode=0o1777)
    # An existing file keeps its mode, but not setuid/setgid the workload gave it.
    await box.bash("printf old > kept && chmod 6750 kept")
    await box.upload("kept", b"new")
    text = (await box.bash(_MODES + "up.bin write.bin sticky kept")).text
    assert text.split("\n")[:4] == [
        "up.bin 0o755",
        "write.bin 0o755",
        "sticky 0o1777",
        "kept 0o750",
    ], text


async def test_the_workspace_disk_is_mounted_nosuid_nodev(
    box: Sandbox, docker_client: docker.DockerClient, namespace: str
) -> None:
    container = docker_client.containers.get(labels.resource_name(namespace, box.instance_id))
    volume = docker_client.volumes.get(container.labels.get(labels.VOLUME, container.name))
    # On the host, where the engine mounts the disk image.
    mountinfo = await anyio.Path("/proc/self/mountinfo").read_text()
    host = _mount_options(mountinfo, volume.attrs["Mountpoint"])
    assert {"nosuid", "nodev"} <= host, host
    if container.attrs["HostConfig"]["Runtime"] == Runtime.RUNSC.value:
        return  # gVisor's mount of its gofer's files shows no such flags
    # In the container (runc): the bind mount of it keeps them.
    inside = (await box.bash("cat /proc/self/mountinfo")).text
    assert {"nosuid", "nodev"} <= _mount_options(inside, "/workspace"), inside


def _mount_options(mountinfo: str, where: str) -> set[str]:
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if len(fields) > 5 and fields[4] == where:
            return set(fields[5].split(","))
    raise AssertionError(f"{where} is not a mount point:\n{mountinfo}")

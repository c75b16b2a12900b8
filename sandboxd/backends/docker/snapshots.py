"""Where the Docker backend keeps named snapshots: one plain local volume each.

``sandboxd-<ns>--snap-<random>`` (no instance id can make the ``--`` infix),
labelled with the snapshot's name and tenant, holding the folder layout of
``backends/shared/snapshots.py``: the files, or (a snapshot of a disk-image
workspace) only the note, the image itself beside the workspaces' disks,
copied whole as a fork copies one (O(data blocks), not O(files)). Volume and
image outlive the daemon and a host reboot; ``docker volume ls --filter
label=sandboxd.snapshot`` shows them. The daemon reads and writes the
volume's folder directly (as a fork does), so it runs on the Docker host.
"""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path

import docker
import docker.errors
from docker.models.volumes import Volume

from sandboxd.backends.docker import disk
from sandboxd.backends.shared import labels
from sandboxd.backends.shared import snapshots as shared
from sandboxd.contract.models import SnapshotInfo

#: The snapshot's name, and the tenant it belongs to ("" for the operator's).
NAME = "sandboxd.snapshot"
TENANT = "sandboxd.snapshot.tenant"


def volume_name(namespace: str) -> str:
    return f"sandboxd-{namespace}--snap-{secrets.token_hex(6)}"


def create_volume(
    client: docker.DockerClient,
    namespace: str,
    tenant: str,
    name: str,
    volume: str,
    image: Path | None,
) -> Volume:
    """The snapshot's volume; ``image``: where its disk image will be (a
    snapshot of a disk-image workspace), named by the volume's label as a
    workspace's is, so whoever removes the volume removes the image too."""
    made: Volume = client.volumes.create(
        name=volume,
        labels={
            labels.MANAGED: "true",
            labels.NAMESPACE: namespace,
            NAME: name,
            TENANT: tenant,
            **({disk.DISK_LABEL: str(image)} if image is not None else {}),
        },
    )
    return made


def image_of(volume: Volume) -> Path | None:
    """A snapshot volume's disk image (None: its files are in the volume)."""
    found = (volume.attrs.get("Labels") or {}).get(disk.DISK_LABEL)
    return Path(found) if found else None


def remove(volume: Volume) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        volume.remove(force=True)
    image = image_of(volume)
    if image is not None:
        disk.remove(image)


def volumes(
    client: docker.DockerClient, namespace: str, tenant: str, name: str | None = None
) -> list[Volume]:
    """The tenant's snapshot volumes (of one ``name``), finished or not."""
    wanted = [f"{labels.NAMESPACE}={namespace}", NAME if name is None else f"{NAME}={name}"]
    return [
        volume
        for volume in client.volumes.list(filters={"label": wanted})
        # Compared here, not filtered by the engine: the operator's tenant is "".
        if (volume.attrs.get("Labels") or {}).get(TENANT, "") == tenant
    ]


def _note(volume: Volume) -> SnapshotInfo | None:
    return shared.read_note(str(volume.attrs.get("Mountpoint") or ""))


def finished(client: docker.DockerClient, namespace: str, tenant: str) -> list[SnapshotInfo]:
    """The tenant's snapshots whose copy finished, by name."""
    found = [_note(volume) for volume in volumes(client, namespace, tenant)]
    return sorted((info for info in found if info is not None), key=lambda info: info.name)


def find(
    client: docker.DockerClient, namespace: str, tenant: str, name: str
) -> tuple[SnapshotInfo, Volume]:
    """The finished snapshot ``name`` and its volume, or NotFound."""
    for volume in volumes(client, namespace, tenant, name):
        info = _note(volume)
        if info is not None:
            return info, volume
    raise shared.unknown(name)


def remove_unfinished(client: docker.DockerClient, namespace: str) -> list[str]:
    """Remove the snapshot volumes (and images) whose copy never finished: a
    daemon stopped half-way. Run at start, before any snapshot is taken (one
    daemon per namespace on an engine). Returns their names."""
    removed = []
    wanted = [f"{labels.NAMESPACE}={namespace}", NAME]
    for volume in client.volumes.list(filters={"label": wanted}):
        if _note(volume) is None:
            remove(volume)
            removed.append(str(volume.name))
    return removed

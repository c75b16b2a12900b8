"""Where the Docker backend keeps named snapshots: one plain local volume each.

``sandboxd-<ns>--snap-<random>`` (no instance id can make the ``--`` infix),
labelled with the snapshot's name and tenant, holding the folder layout of
``backends/shared/snapshots.py``. A volume outlives the daemon and a host
reboot, and ``docker volume ls --filter label=sandboxd.snapshot`` shows them.
The daemon reads and writes the volume's folder directly (as a fork does), so
it runs on the Docker host.
"""

from __future__ import annotations

import secrets

import docker
from docker.models.volumes import Volume

from sandboxd.backends.shared import labels
from sandboxd.backends.shared import snapshots as shared
from sandboxd.contract.models import SnapshotInfo

#: The snapshot's name, and the tenant it belongs to ("" for the operator's).
NAME = "sandboxd.snapshot"
TENANT = "sandboxd.snapshot.tenant"


def create_volume(client: docker.DockerClient, namespace: str, tenant: str, name: str) -> Volume:
    volume: Volume = client.volumes.create(
        name=f"sandboxd-{namespace}--snap-{secrets.token_hex(6)}",
        labels={
            labels.MANAGED: "true",
            labels.NAMESPACE: namespace,
            NAME: name,
            TENANT: tenant,
        },
    )
    return volume


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
) -> tuple[SnapshotInfo, str]:
    """The finished snapshot ``name`` and its folder, or NotFound."""
    for volume in volumes(client, namespace, tenant, name):
        info = _note(volume)
        if info is not None:
            return info, str(volume.attrs.get("Mountpoint") or "")
    raise shared.unknown(name)

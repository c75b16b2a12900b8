"""The service's notes on a sandbox (its end, why it stopped), kept in Docker.

Docker cannot change a container's or a volume's labels after creation, and
the notes change (ExtendSandbox, a stop seen). So each sandbox's notes are
the labels of one small empty volume, ``sandboxd-<ns>--marks-<random>``
(no instance id can make the ``--`` infix), replaced on every change: the
new one is created before the old ones are removed, and a reader takes the
highest sequence. They live with the engine, not in the daemon: a restarted
daemon, or another replica, reads the same notes.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Mapping

import docker
import docker.errors

from sandboxd.backends.shared import labels

MARKS_OF = "sandboxd.marks.of"
SEQUENCE = "sandboxd.marks.seq"
MARK_PREFIX = "sandboxd.mark."


def _filters(namespace: str, instance_id: str | None) -> dict[str, list[str]]:
    owner = MARKS_OF if instance_id is None else f"{MARKS_OF}={instance_id}"
    return {"label": [f"{labels.NAMESPACE}={namespace}", owner]}


def read(
    client: docker.DockerClient, namespace: str, instance_id: str | None = None
) -> dict[str, dict[str, str]]:
    newest: dict[str, tuple[int, dict[str, str]]] = {}
    for volume in client.volumes.list(filters=_filters(namespace, instance_id)):
        found = volume.attrs.get("Labels") or {}
        owner = found.get(MARKS_OF, "")
        try:
            sequence = int(found.get(SEQUENCE, "0"))
        except ValueError:
            sequence = 0
        if owner and (owner not in newest or sequence > newest[owner][0]):
            marks = {
                k[len(MARK_PREFIX) :]: v for k, v in found.items() if k.startswith(MARK_PREFIX)
            }
            newest[owner] = (sequence, marks)
    return {owner: marks for owner, (_, marks) in newest.items()}


def write(
    client: docker.DockerClient, namespace: str, instance_id: str, marks: Mapping[str, str]
) -> None:
    """Replace the notes of ``instance_id`` (none: remove them)."""
    old = client.volumes.list(filters=_filters(namespace, instance_id))
    if marks:
        client.volumes.create(
            name=f"sandboxd-{namespace}--marks-{secrets.token_hex(6)}",
            labels={
                labels.MANAGED: "true",
                labels.NAMESPACE: namespace,
                MARKS_OF: instance_id,
                SEQUENCE: str(time.time_ns()),
                **{MARK_PREFIX + key: value for key, value in marks.items()},
            },
        )
    for volume in old:
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            volume.remove()

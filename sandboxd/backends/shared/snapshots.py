"""Named snapshots on disk, the same for every engine that has folders.

A snapshot is a folder (a labelled volume's on Docker, one under the local
root for the local engine) holding ``files/`` (the workspace's tree, copied
by ``clone.copy_tree``: reflink where the file system can, a copy otherwise)
and ``snapshot.json`` (what it is). The note is written last, atomically: a
folder without it is a snapshot whose copy never finished (a daemon killed
half-way), never listed, and removed with ``delete``.

Restoring empties the workspace's folder and copies ``files/`` back: the
caller has stopped everything that writes there (Docker: the container;
local: the executor), so the result is exactly the snapshot.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from sandboxd.backends.shared import clone, errors
from sandboxd.contract.errors import InvalidArgument, NotFound
from sandboxd.contract.models import SandboxOptions, SnapshotInfo
from sandboxd.executor import files

FILES = "files"
NOTE = "snapshot.json"


def unknown(name: str) -> NotFound:
    return NotFound(f"no snapshot named {name!r}; list them with ListSnapshots")


def unsupported(backend: str) -> InvalidArgument:
    return errors.unsupported(
        "named snapshots", backend, "ForkSandbox copies a sandbox there (README, backends)"
    )


def tree_bytes(folder: str) -> int:
    """The bytes of every file under ``folder`` (what a snapshot holds and the quota counts)."""
    total = 0
    for parent, _dirs, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(parent, name)).st_size
            except OSError:
                continue
    return total


@dataclass(frozen=True)
class Taking:
    """What a snapshot being taken is: its name, its source, when it started."""

    name: str
    source_id: str
    options: SandboxOptions
    started: float  # time.monotonic()

    def finish(self, folder: str, method: str, size: int) -> SnapshotInfo:
        """Mark ``folder`` a finished snapshot: its note, written last."""
        snapshot = SnapshotInfo(
            name=self.name,
            source_id=self.source_id,
            size_bytes=size,
            created_at_ms=int(time.time() * 1000),
            method=method,
            duration_ms=int((time.monotonic() - self.started) * 1000),
            options=self.options,
        )
        _write_note(folder, snapshot)
        return snapshot


def take(source: str, folder: str, taking: Taking) -> SnapshotInfo:
    """Copy the workspace tree ``source`` into snapshot ``folder`` (the caller
    has frozen the workspace) and mark it finished."""
    target = os.path.join(folder, FILES)
    os.makedirs(target, exist_ok=True)
    method = clone.copy_tree(source, target)
    return taking.finish(folder, method, tree_bytes(target))


def _write_note(folder: str, snapshot: SnapshotInfo) -> None:
    """Mark ``folder`` a finished snapshot (written once the files are all there)."""
    partial = os.path.join(folder, NOTE + ".tmp")
    with open(partial, "w") as out:
        json.dump(snapshot.to_json(), out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, os.path.join(folder, NOTE))


def read_note(folder: str) -> SnapshotInfo | None:
    """The snapshot in ``folder``; None while (or if) unfinished."""
    try:
        with open(os.path.join(folder, NOTE)) as handle:
            return SnapshotInfo.from_json(json.load(handle))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def check_fits(snapshot: SnapshotInfo, disk_bytes: int) -> None:
    """Refuse, before anything is emptied, a snapshot larger than the target's disk."""
    if disk_bytes and snapshot.size_bytes > disk_bytes:
        raise InvalidArgument(
            f"snapshot {snapshot.name!r} holds {snapshot.size_bytes} bytes, more than the "
            f"sandbox's disk of {disk_bytes} bytes; create a sandbox from it with a larger "
            "disk_bytes instead"
        )


def restore(folder: str, target: str) -> str:
    """Empty the workspace folder ``target`` and copy the snapshot's files in: the method."""
    return restore_tree(os.path.join(folder, FILES), target)


def restore_tree(source: str, target: str) -> str:
    """Empty the workspace folder ``target`` and copy the tree ``source`` in: the method."""
    empty(target)
    return clone.copy_tree(source, target)


def empty(folder: str) -> None:
    """Remove everything inside ``folder`` (not the folder: it may be a mount point)."""
    with os.scandir(folder) as entries:
        for entry in list(entries):
            if entry.is_dir(follow_symlinks=False):
                files.remove_tree(entry.path)
            else:
                os.unlink(entry.path)


def remove(folder: Path) -> None:
    """Remove a snapshot folder, finished or not."""
    if folder.exists():
        files.remove_tree(str(folder))

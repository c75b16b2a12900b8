"""Logs the executor keeps for the model to read (bash output, process output).

In a container they live in the executor's own root-owned folder: the
sandbox user may read them (0644 in a 0755 folder) but never write, replace
or remove them, so what the model is pointed at is what the command printed.
Files are created fresh (``O_EXCL``, ``O_NOFOLLOW``): nothing planted at the
path can redirect the executor's writes.
"""

from __future__ import annotations

import contextlib
import os

from sandboxd.executor import identity

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def prepare(folder: str) -> None:
    """(Re)create the log folder."""
    with identity.as_executor():
        os.makedirs(folder, mode=0o755, exist_ok=True)


def create(folder: str, name: str) -> int:
    """A new, empty log; returns a write-only descriptor."""
    path = os.path.join(folder, name)
    with identity.as_executor():
        try:
            return os.open(path, _CREATE, 0o644)
        except FileExistsError:
            # Left by an earlier executor on the same state folder (local backend).
            os.unlink(path)
            return os.open(path, _CREATE, 0o644)


def remove(path: str) -> None:
    with identity.as_executor(), contextlib.suppress(OSError):
        os.unlink(path)

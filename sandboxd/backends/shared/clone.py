"""Copying a workspace's files for a fork: reflink when the filesystem can,
a plain copy otherwise, and an honest report of which one ran."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import tempfile

from sandboxd.contract.errors import ResourceExhausted, SandboxUnavailable

#: linux/fs.h FICLONE: share the source's blocks copy-on-write.
_FICLONE = 0x40049409


def reflink_supported(folder: str) -> bool:
    """Whether files in ``folder`` can be cloned (tried on a throwaway pair)."""
    try:
        fd, source = tempfile.mkstemp(prefix=".sandboxd-probe-", dir=folder)
    except OSError:
        return False
    target = source + ".clone"
    try:
        os.write(fd, b"probe")
        with open(target, "wb") as out:
            fcntl.ioctl(out.fileno(), _FICLONE, fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
        for path in (source, target):
            with contextlib.suppress(OSError):
                os.unlink(path)


def copy_tree(source: str, target: str) -> str:
    """Copy the contents of folder ``source`` into folder ``target`` keeping
    modes, owners, times and links; returns ``reflink`` or ``copy``."""
    method = "reflink" if reflink_supported(target) else "copy"
    try:
        subprocess.run(
            ["cp", "-a", "--reflink=auto", "--", f"{source.rstrip('/')}/.", target],
            check=True,
            capture_output=True,
            text=True,
            timeout=3600,
        )
    except subprocess.CalledProcessError as exc:
        message = (exc.stderr or "").strip()[:500]
        if "No space left" in message:
            raise ResourceExhausted(
                f"fork: no space left to copy the workspace: {message}"
            ) from exc
        raise SandboxUnavailable(f"fork: copying the workspace failed: {message}") from exc
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"fork: copying the workspace failed: {exc}") from exc
    return method

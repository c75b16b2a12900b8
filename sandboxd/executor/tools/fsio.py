"""File-system primitives for the writing tools: atomic replace, errno texts."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from functools import cache
from typing import BinaryIO

#: The permission bits a file the executor writes may get: never setuid or
#: setgid (a tree upload never kept them either; issue 23, item 12).
PERMISSION_BITS = 0o1777

_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


class NotRegularFile(OSError):
    """The path is a pipe, socket or device: reading it could block forever."""

    def __init__(self, path: str, mode: int) -> None:
        self.kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        super().__init__(errno.EINVAL, f"{self.kind}, not a regular file", path)


def open_regular(path: str) -> BinaryIO:
    """Open ``path`` for reading only if it is a regular file, never blocking.

    The check is made on the opened descriptor (no check-then-open race): a
    FIFO with no writer, swapped in for a file, would otherwise hang the
    calling thread in ``open`` or ``read`` for good. O_NONBLOCK makes the
    open itself return at once; it changes nothing for a regular file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", path)
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path, mode)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


@cache
def umask() -> int:
    # os.umask can only be read by setting it, which races with other
    # threads creating files; Linux exposes it read-only in /proc.
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` via a temporary file in the same folder.

    Readers see the old or the new content, never a mix. An existing file
    keeps its mode (but setuid and setgid); a new one gets ``0666 & ~umask``.
    """
    try:
        mode = os.stat(path).st_mode & PERMISSION_BITS
    except FileNotFoundError:
        mode = 0o666 & ~umask()
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix="." + name[:64] + ".", suffix=".sandboxd-tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def make_parents(path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)


_REASONS = {
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "the file system is full (no space left on device)",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "the path is a folder",
    errno.ENAMETOOLONG: "the file name is too long",
    errno.ELOOP: "too many levels of symbolic links",
}


def reason(exc: OSError) -> str:
    return _REASONS.get(exc.errno or 0, exc.strerror or str(exc))

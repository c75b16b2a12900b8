"""Extracting an untrusted tar stream into a folder, safely; standard library only.

Shared by the executor (uploads into a sandbox) and runtime_client
(downloads out of one): the stream comes from the other side of a trust
boundary either way. Every member is validated *before* it is written, and
written through directory file descriptors opened with ``O_NOFOLLOW``: an
entry can never land outside the target, whether the tar asks for it
(``..``, absolute names, links pointing out, devices) or a process races
the extraction by swapping a folder for a symlink (the open fails, nothing
is followed). A refused entry stops the extraction with InvalidArgument
naming it; the entries before it stay extracted *inside* the target.
Failures of the filesystem itself are raised as OSError.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat as stat_module
import tarfile
from typing import Any, Protocol

from sandboxd.errors import InvalidArgument

#: Bytes copied per read from a member into its file.
CHUNK = 1 << 20
MAX_HEADER = 1 << 20
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_LONG_HEADERS = {
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
}


class _BoundedInfo(tarfile.TarInfo):
    """Refuses a metadata header so large that tarfile would read it into memory."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> Any:
        if self.type in _LONG_HEADERS and self.size > MAX_HEADER:
            raise InvalidArgument(
                f"tar header of {self.size} bytes is over the {MAX_HEADER}-byte limit"
            )
        return super()._proc_member(tarfile_)  # type: ignore[misc]


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def _parts(name: str, what: str) -> list[str]:
    if name.startswith("/") or "\x00" in name:
        raise InvalidArgument(f"tar entry {what!r}: absolute names are refused")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise InvalidArgument(f"tar entry {what!r}: '..' would escape the target")
    return parts


class _Dirs:
    """Opens folders below the target one component at a time, never following
    a symlink; keeps the last one open (tars list a folder's files together)."""

    def __init__(self, root_fd: int) -> None:
        self.root_fd = root_fd
        self._cached: tuple[tuple[str, ...], int] | None = None

    def open(self, parts: list[str], entry: str, *, create: bool) -> int:
        key = tuple(parts)
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        fd = os.dup(self.root_fd)
        try:
            for part in parts:
                try:
                    try:
                        child = os.open(part, DIR_FLAGS, dir_fd=fd)
                    except FileNotFoundError:
                        if not create:
                            raise
                        with contextlib.suppress(FileExistsError):
                            os.mkdir(part, 0o755, dir_fd=fd)
                        child = os.open(part, DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise InvalidArgument(
                            f"tar entry {entry!r}: {'/'.join(parts)} is not a folder "
                            "(a symlink or a file is in the way); nothing is followed"
                        ) from exc
                    raise
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        self.close()
        self._cached = (key, fd)
        return fd

    def close(self) -> None:
        if self._cached is not None:
            os.close(self._cached[1])
            self._cached = None


def _clear(name: str, dir_fd: int, entry: str) -> None:
    """Make room for a new entry: remove a non-folder already there."""
    try:
        info = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return
    if stat_module.S_ISDIR(info.st_mode):
        raise InvalidArgument(f"tar entry {entry!r}: a folder is already there")
    os.unlink(name, dir_fd=dir_fd)


def _link_inside(parts: list[str], target: str, entry: str) -> None:
    if target.startswith("/"):
        raise InvalidArgument(f"tar entry {entry!r}: symlink to absolute path {target!r} refused")
    depth = len(parts) - 1
    for part in target.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                raise InvalidArgument(
                    f"tar entry {entry!r}: symlink to {target!r} points out of the target"
                )
        elif part not in ("", "."):
            depth += 1


def extract(feed: Readable, target: str) -> dict[str, int]:
    """Extract the tar stream ``feed`` into the folder ``target`` (created);
    counts of files, directories, symlinks and bytes."""
    os.makedirs(target, exist_ok=True)
    root_fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    dirs = _Dirs(root_fd)
    counts = {"files": 0, "directories": 0, "symlinks": 0, "bytes": 0}
    deferred: list[tuple[list[str], int, float]] = []
    umask = os.umask(0)
    os.umask(umask)
    try:
        try:
            tar = tarfile.open(fileobj=feed, mode="r|", tarinfo=_BoundedInfo)  # type: ignore[call-overload]  # noqa: SIM115
        except tarfile.TarError as exc:
            raise InvalidArgument(f"not a tar stream: {exc}") from exc
        while True:
            try:
                member = tar.next()
            except tarfile.TarError as exc:
                raise InvalidArgument(f"bad tar stream: {exc}") from exc
            if member is None:
                break
            tar.members.clear()  # stream mode keeps every header otherwise
            _extract_member(tar, member, dirs, counts, deferred, umask)
        # Folder modes last (a read-only folder would refuse its own files).
        for parts, mode, mtime in reversed(deferred):
            fd = dirs.open(parts, "/".join(parts), create=False)
            os.fchmod(fd, mode)
            os.utime(fd, (mtime, mtime))
    finally:
        dirs.close()
        os.close(root_fd)
    return counts


def _extract_member(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    dirs: _Dirs,
    counts: dict[str, int],
    deferred: list[tuple[list[str], int, float]],
    umask: int,
) -> None:
    entry = member.name
    parts = _parts(entry, entry)
    mode = member.mode & 0o1777  # no setuid/setgid from a tar
    if member.isdir():
        if parts:
            fd = dirs.open(parts, entry, create=True)
            deferred.append((parts, mode, member.mtime))
            del fd
        counts["directories"] += 1
        return
    if not parts:
        raise InvalidArgument(f"tar entry {entry!r}: a non-folder entry names the target itself")
    if not (member.isreg() or member.issym() or member.islnk()):
        raise InvalidArgument(
            f"tar entry {entry!r}: devices, FIFOs and other special files are refused"
        )
    parent = dirs.open(parts[:-1], entry, create=True)
    name = parts[-1]
    try:
        if member.issym():
            _link_inside(parts, member.linkname, entry)
            try:
                os.symlink(member.linkname, name, dir_fd=parent)
            except FileExistsError:
                _clear(name, parent, entry)
                os.symlink(member.linkname, name, dir_fd=parent)
            counts["symlinks"] += 1
        elif member.islnk():
            source = _parts(member.linkname, entry)
            if not source:
                raise InvalidArgument(f"tar entry {entry!r}: hard link to the target itself")
            _clear(name, parent, entry)
            source_dir = dirs.open(source[:-1], entry, create=False)
            if source_dir != parent:
                # _Dirs keeps one folder open: re-open the parent for the link.
                source_fd = os.dup(source_dir)
                parent = dirs.open(parts[:-1], entry, create=True)
                try:
                    os.link(
                        source[-1],
                        name,
                        src_dir_fd=source_fd,
                        dst_dir_fd=parent,
                        follow_symlinks=False,
                    )
                finally:
                    os.close(source_fd)
            else:
                os.link(
                    source[-1], name, src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False
                )
            counts["files"] += 1
        else:
            # Created exclusively (never opened through what is there); what is
            # in the way is cleared only when there is something.
            try:
                fd = os.open(name, _NEW_FILE, 0o600, dir_fd=parent)
            except FileExistsError:
                _clear(name, parent, entry)
                fd = os.open(name, _NEW_FILE, 0o600, dir_fd=parent)
            try:
                source_file = tar.extractfile(member)
                if source_file is not None:
                    while chunk := source_file.read(CHUNK):
                        view = memoryview(chunk)
                        while view:
                            view = view[os.write(fd, view) :]
                        counts["bytes"] += len(chunk)
                os.fchmod(fd, mode)
                os.utime(fd, (member.mtime, member.mtime))
            finally:
                os.close(fd)
            counts["files"] += 1
    except tarfile.TarError as exc:
        raise InvalidArgument(f"tar entry {entry!r}: {exc}") from exc
    except FileNotFoundError as exc:
        if member.islnk():
            raise InvalidArgument(
                f"tar entry {entry!r}: hard link to {member.linkname!r}, which is not in the tree"
            ) from exc
        raise


class ChunkReader:
    """A read-only file object over a stream of byte chunks, for tarfile.

    ``next_chunk`` gives the next chunk, or None at the end. The chunk being
    read is kept with a position: tarfile reads 10 KiB at a time, and slicing
    the rest off a 1 MiB chunk each time copied it anew.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._pos = 0
        self._eof = False

    def next_chunk(self) -> bytes | None:
        raise NotImplementedError

    def read(self, size: int = -1) -> bytes:
        while self._pos >= len(self._buffer) and not self._eof:
            chunk = self.next_chunk()
            if chunk is None:
                self._eof = True
            else:
                self._buffer, self._pos = chunk, 0
        start = self._pos
        end = len(self._buffer) if size < 0 else min(len(self._buffer), start + size)
        self._pos = end
        if start == 0 and end == len(self._buffer):
            return self._buffer
        return self._buffer[start:end]

"""Extracting an untrusted tar stream into a folder, safely; standard library only.

Shared by the executor (uploads into a sandbox) and runtime_client
(downloads out of one): the stream comes from the other side of a trust
boundary either way. Every member is validated *before* it is written, and
written through directory file descriptors opened with ``O_NOFOLLOW``: an
entry can never land outside the target, whether the tar asks for it
(``..``, absolute names, devices) or a process races the extraction by
swapping a folder for a symlink (the open fails, nothing is followed). A
refused entry stops the extraction with InvalidArgument naming it; the
entries before it stay extracted *inside* the target. Failures of the
filesystem itself are raised as OSError.

Symlinks are made last, and only those that resolve inside the target
(``_Links``): a link is judged by where it leads through the links of the
same tree, which may come in any order (``sub/up -> ..`` with
``docs -> sub/up/sub/up/../..``: each step inside, the whole outside, issue
23 item 3), so none exists until all are known. A link that points out,
absolutely, or through another link is left out and listed (with its
reason) in the result, never a reason to stop: a virtualenv's
``python -> /usr/bin/python3`` costs that one link (item 13). Hard links to
symlinks are left out the same way.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat as stat_module
import tarfile
from typing import Any, Protocol

from sandboxd.contract.errors import InvalidArgument

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


#: Symlinks one tree may hold (each is kept until the end of the stream).
MAX_LINKS = 100_000
#: Left-out links listed in a result (all are counted).
MAX_LISTED = 100
#: Longest chain of links followed when judging one (the kernel's own limit).
MAX_CHAIN = 40

Parts = tuple[str, ...]


class _Links:
    """The tree's symlinks, made once the whole stream is known (see the module doc)."""

    def __init__(self, root_fd: int) -> None:
        self.root_fd = root_fd
        self.pending: dict[Parts, str] = {}
        self.skipped: list[dict[str, str]] = []
        self.count_skipped = 0

    def note(self, parts: list[str], target: str, entry: str) -> None:
        if len(self.pending) >= MAX_LINKS and tuple(parts) not in self.pending:
            raise InvalidArgument(
                f"tar entry {entry!r}: more than {MAX_LINKS} symlinks in one tree are refused"
            )
        self.pending[tuple(parts)] = target

    def replaced(self, parts: list[str]) -> None:
        """A later entry of another kind takes the path: its link is not made."""
        self.pending.pop(tuple(parts), None)

    def guard(self, parts: list[str], entry: str) -> None:
        """No entry goes below a link of the tree (it would be written through it)."""
        for depth in range(1, len(parts)):
            if parts[:depth] and tuple(parts[:depth]) in self.pending:
                raise InvalidArgument(
                    f"tar entry {entry!r}: {'/'.join(parts[:depth])} is a symlink in this "
                    "tree; nothing is written through one"
                )

    def through_link(self, parts: list[str]) -> bool:
        """``parts`` is, or lies below, a link of the tree."""
        return any(tuple(parts[:depth]) in self.pending for depth in range(1, len(parts) + 1))

    def skip(self, path: str, target: str, reason: str) -> None:
        self.count_skipped += 1
        if len(self.skipped) < MAX_LISTED:
            self.skipped.append({"path": path, "target": target, "reason": reason})

    def finish(self, dirs: _Dirs, counts: dict[str, int]) -> None:
        verdicts: dict[Parts, str | None] = {}
        for parts in sorted(self.pending):
            reason = self._verdict(parts, verdicts, 0)
            target = self.pending[parts]
            if reason is not None:
                self.skip("/".join(parts), target, reason)
                continue
            parent = dirs.open(list(parts[:-1]), "/".join(parts), create=True)
            name = parts[-1]
            try:
                os.symlink(target, name, dir_fd=parent)
            except FileExistsError:
                if stat_module.S_ISDIR(os.lstat(name, dir_fd=parent).st_mode):
                    self.skip("/".join(parts), target, "a folder is in its place")
                    continue
                os.unlink(name, dir_fd=parent)
                os.symlink(target, name, dir_fd=parent)
            counts["symlinks"] += 1

    def _verdict(self, parts: Parts, verdicts: dict[Parts, str | None], depth: int) -> str | None:
        """Why the link at ``parts`` is left out, or None to make it."""
        if parts in verdicts:
            return verdicts[parts]
        if depth > MAX_CHAIN:
            return f"it leads through more than {MAX_CHAIN} links"
        verdicts[parts] = None  # a loop resolves to nothing: harmless
        verdicts[parts] = self._judge(parts, self.pending[parts], verdicts, depth)
        return verdicts[parts]

    def _judge(
        self, parts: Parts, target: str, verdicts: dict[Parts, str | None], depth: int
    ) -> str | None:
        if target.startswith("/"):
            return "it points to an absolute path"
        where = list(parts[:-1])
        steps = [step for step in target.split("/") if step not in ("", ".")]
        for number, step in enumerate(steps, 1):
            if step == "..":
                if not where:
                    return "it points out of the target"
                where.pop()
                continue
            where.append(step)
            here = tuple(where)
            if number < len(steps):
                # Followed on the way: must be a folder, never a link.
                if here in self.pending or self._link_on_disk(here):
                    return f"it leads through the symlink {'/'.join(here)}"
            elif here in self.pending:
                # The last step may be a link of the tree that is itself made.
                if self._verdict(here, verdicts, depth + 1) is None:
                    return None
                if self._link_on_disk(here):
                    return f"it points to {'/'.join(here)}, a symlink that was already there"
            elif self._link_on_disk(here):
                return f"it points to {'/'.join(here)}, a symlink that was already there"
        return None

    def _link_on_disk(self, parts: Parts) -> bool:
        """A symlink is at ``parts`` below the target now (nothing followed)."""
        fd = os.dup(self.root_fd)
        try:
            for part in parts[:-1]:
                try:
                    child = os.open(part, DIR_FLAGS, dir_fd=fd)
                except OSError:
                    return False  # not a folder (a link on the way is judged on its own)
                os.close(fd)
                fd = child
            try:
                return stat_module.S_ISLNK(os.lstat(parts[-1], dir_fd=fd).st_mode)
            except OSError:
                return False
        finally:
            os.close(fd)


def extract(feed: Readable, target: str) -> dict[str, Any]:
    """Extract the tar stream ``feed`` into the folder ``target`` (created).

    Returns the counts of files, directories, symlinks and bytes, and the
    symlinks left out: ``links_skipped`` (how many) and ``skipped_links``
    (the first MAX_LISTED: ``{"path", "target", "reason"}``).
    """
    os.makedirs(target, exist_ok=True)
    root_fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    dirs = _Dirs(root_fd)
    links = _Links(root_fd)
    counts = {"files": 0, "directories": 0, "symlinks": 0, "bytes": 0}
    deferred: list[tuple[list[str], int, float]] = []
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
            _extract_member(tar, member, dirs, links, counts, deferred)
        links.finish(dirs, counts)
        # Folder modes last (a read-only folder would refuse its own files).
        for parts, mode, mtime in reversed(deferred):
            fd = dirs.open(parts, "/".join(parts), create=False)
            os.fchmod(fd, mode)
            os.utime(fd, (mtime, mtime))
    finally:
        dirs.close()
        os.close(root_fd)
    return {**counts, "links_skipped": links.count_skipped, "skipped_links": links.skipped}


def _extract_member(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    dirs: _Dirs,
    links: _Links,
    counts: dict[str, int],
    deferred: list[tuple[list[str], int, float]],
) -> None:
    entry = member.name
    parts = _parts(entry, entry)
    mode = member.mode & 0o1777  # no setuid/setgid from a tar
    links.guard(parts, entry)
    if member.issym():
        if not parts:
            raise InvalidArgument(f"tar entry {entry!r}: a symlink names the target itself")
        # Made at the end, once every link of the tree is known (_Links).
        dirs.open(parts[:-1], entry, create=True)
        links.note(parts, member.linkname, entry)
        return
    links.replaced(parts)
    if member.isdir():
        if parts:
            fd = dirs.open(parts, entry, create=True)
            deferred.append((parts, mode, member.mtime))
            del fd
        counts["directories"] += 1
        return
    if not parts:
        raise InvalidArgument(f"tar entry {entry!r}: a non-folder entry names the target itself")
    if not (member.isreg() or member.islnk()):
        raise InvalidArgument(
            f"tar entry {entry!r}: devices, FIFOs and other special files are refused"
        )
    if member.issparse():
        # A few KB of sparse map stood for GBs written out in full (issue 23
        # item 10: 2 KB became 4.1 GB on disk). No sandboxd tar has them.
        segments: Any = member.sparse or ()  # (offset, size) pairs; typeshed says otherwise
        data = sum(size for _, size in segments)
        raise InvalidArgument(
            f"tar entry {entry!r}: sparse entries are refused ({member.size} bytes from "
            f"{data} of data); archive without --sparse"
        )
    parent = dirs.open(parts[:-1], entry, create=True)
    name = parts[-1]
    try:
        if member.islnk():
            source = _parts(member.linkname, entry)
            if not source:
                raise InvalidArgument(f"tar entry {entry!r}: hard link to the target itself")
            if links.through_link(source):
                links.skip(entry, member.linkname, "a hard link to a symlink of the tree")
                return
            source_dir = dirs.open(source[:-1], entry, create=False)
            if stat_module.S_ISLNK(os.lstat(source[-1], dir_fd=source_dir).st_mode):
                links.skip(entry, member.linkname, "a hard link to a symlink")
                return
            source_fd = os.dup(source_dir)
            try:
                parent = dirs.open(parts[:-1], entry, create=True)
                _clear(name, parent, entry)
                os.link(
                    source[-1], name, src_dir_fd=source_fd, dst_dir_fd=parent, follow_symlinks=False
                )
            finally:
                os.close(source_fd)
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

"""Tree transfers: a tar stream extracted into, or produced from, a folder.

Extraction validates every member *before* writing it and writes through
directory file descriptors opened with ``O_NOFOLLOW``: an entry can never
land outside the target, whether the tar asks for it (``..``, absolute
names, links pointing out, devices) or the workload races the extraction by
swapping a folder for a symlink (the open fails, nothing is followed). A
refused entry stops the extraction with an error naming it; the entries
before it stay extracted *inside* the target (validate-then-write, chosen
over a staging folder so a 10,000-file tree costs no second pass of
renames). Both directions run on a thread fed through a bounded queue, so
memory stays at ``QUEUE`` chunks whatever the tree's size.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import stat as stat_module
import tarfile
import threading
from collections.abc import Iterator
from typing import Any

from sandboxd.errors import InvalidArgument, SandboxdError
from sandboxd.executor.files import os_error
from sandboxd.executor.tools import gitignore
from sandboxd.executor.transfer import CHUNK, Session

#: Chunks buffered between the channel and the tar thread.
QUEUE = 4
#: The largest pax/GNU long-name header accepted (tarfile reads one whole).
MAX_HEADER = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
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


class _End(Exception):
    pass


class _Feed:
    """A file object whose bytes arrive through ``put`` (bounded)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=QUEUE)
        self._buffer = b""
        self._eof = False
        self.aborted = False

    def put(self, data: bytes | None, done: threading.Event) -> None:
        while True:
            if self.aborted or done.is_set():
                raise _End
            try:
                self._queue.put(data, timeout=0.5)
                return
            except queue.Full:
                continue

    def read(self, size: int = -1) -> bytes:
        while not self._buffer and not self._eof:
            if self.aborted:
                raise InvalidArgument("the transfer was aborted")
            try:
                item = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if item is None:
                self._eof = True
            else:
                self._buffer = item
        if size < 0 or size >= len(self._buffer):
            data, self._buffer = self._buffer, b""
        else:
            data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data


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
                        child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                    except FileNotFoundError:
                        if not create:
                            raise
                        with contextlib.suppress(FileExistsError):
                            os.mkdir(part, 0o755, dir_fd=fd)
                        child = os.open(part, _DIR_FLAGS, dir_fd=fd)
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


def extract(feed: _Feed, target: str) -> dict[str, int]:
    """Extract the tar stream ``feed`` into the folder ``target`` (created)."""
    try:
        os.makedirs(target, exist_ok=True)
        root_fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise os_error(exc, target) from exc
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
    except SandboxdError:
        raise
    except OSError as exc:
        raise os_error(exc, target) from exc
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
            _clear(name, parent, entry)
            fd = os.open(
                name,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=parent,
            )
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


class TreeUpload(Session):
    """A tar stream arriving in chunks, extracted by a thread as it comes."""

    def __init__(self, target: str) -> None:
        super().__init__()
        self.target = target
        self.feed = _Feed()
        self.done = threading.Event()
        self.result: dict[str, int] | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="untar", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.result = extract(self.feed, self.target)
            # Drain what follows the end-of-archive blocks, so a waiting chunk
            # call is not left blocked.
            while self.feed.read(CHUNK):
                pass
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()

    def write(self, data: bytes) -> None:
        try:
            self.feed.put(data, self.done)
        except _End:
            self._raise()

    def commit(self, cancel: threading.Event) -> dict[str, int]:
        with contextlib.suppress(_End):
            self.feed.put(None, self.done)
        while not self.done.wait(0.5):
            if cancel.is_set():
                self.abort()
        self._raise()
        assert self.result is not None
        return self.result

    def _raise(self) -> None:
        if self.error is not None:
            if isinstance(self.error, SandboxdError):
                raise self.error
            if isinstance(self.error, OSError):
                raise os_error(self.error, self.target)
            raise InvalidArgument(f"tar extraction failed: {self.error}")
        if self.closed:
            raise InvalidArgument("the transfer was aborted")

    def abort(self) -> None:
        super().abort()
        self.feed.aborted = True


class _Sink:
    """The write side of a tar stream: bytes gathered into chunks on a bounded queue."""

    def __init__(self, session: TreeDownload) -> None:
        self._session = session
        self._buffer = bytearray()

    def write(self, data: bytes) -> int:
        self._buffer += data
        while len(self._buffer) >= CHUNK:
            self._session.push(bytes(self._buffer[:CHUNK]))
            del self._buffer[:CHUNK]
        return len(data)

    def flush_rest(self) -> None:
        if self._buffer:
            self._session.push(bytes(self._buffer))
            self._buffer.clear()


class _Padded:
    """A file read for exactly ``size`` bytes: zeros if it shrank meanwhile."""

    def __init__(self, fd: int, size: int) -> None:
        self._fd = fd
        self._left = size

    def read(self, size: int = -1) -> bytes:
        want = self._left if size < 0 else min(size, self._left)
        if want <= 0:
            return b""
        data = os.read(self._fd, want) or bytes(want)
        self._left -= len(data)
        return data


def _walk(
    root_fd: int, prefix: str, ignores: tuple[gitignore.IgnoreFile, ...] | None, base: str
) -> Iterator[tuple[str, int, str]]:
    """(relative name, parent fd, entry name) below a folder fd, without following links."""
    with os.scandir(root_fd) as it:
        names = sorted(entry.name for entry in it)
    local = ignores
    if ignores is not None:
        found = gitignore.load(base)
        local = (*ignores, found) if found is not None else ignores
    for name in names:
        rel = f"{prefix}{name}"
        try:
            info = os.lstat(name, dir_fd=root_fd)
        except FileNotFoundError:
            continue
        is_dir = stat_module.S_ISDIR(info.st_mode)
        if local is not None and gitignore.is_ignored(local, f"{base}/{name}", is_dir):
            continue
        yield rel, root_fd, name
        if is_dir:
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=root_fd)
            except OSError:
                continue  # swapped for a symlink meanwhile: not followed
            try:
                yield from _walk(child, f"{rel}/", local, f"{base}/{name}")
            finally:
                os.close(child)


class TreeDownload(Session):
    """A folder written as a tar stream by a thread; pulled a chunk at a time."""

    def __init__(self, source: str, *, gitignore_aware: bool) -> None:
        super().__init__()
        self.source = source
        try:
            self.root_fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno == errno.ENOTDIR:
                raise InvalidArgument(f"{source} is not a folder; download files singly") from exc
            raise os_error(exc, source) from exc
        self.gitignore_aware = gitignore_aware
        self.queue: queue.Queue[bytes | None] = queue.Queue(maxsize=QUEUE)
        self.error: BaseException | None = None
        self.counts = {"entries": 0, "bytes": 0, "skipped": 0}
        self._thread = threading.Thread(target=self._run, name="tar", daemon=True)
        self._thread.start()

    def push(self, data: bytes | None) -> None:
        while True:
            if self.closed:
                raise _End
            try:
                self.queue.put(data, timeout=0.5)
                return
            except queue.Full:
                continue

    def _run(self) -> None:
        try:
            sink = _Sink(self)
            tar = tarfile.open(fileobj=sink, mode="w|", format=tarfile.GNU_FORMAT)  # type: ignore[call-overload]  # noqa: SIM115
            ignores = gitignore.ancestors(self.source) if self.gitignore_aware else None
            for rel, parent, name in _walk(self.root_fd, "", ignores, self.source.rstrip("/")):
                self._add(tar, rel, parent, name)
                tar.members.clear()
            tar.close()
            sink.flush_rest()
            self.push(None)
        except _End:
            pass
        except BaseException as exc:
            self.error = exc
            with contextlib.suppress(_End):
                self.push(None)
        finally:
            os.close(self.root_fd)

    def _add(self, tar: tarfile.TarFile, rel: str, parent: int, name: str) -> None:
        try:
            info = os.lstat(name, dir_fd=parent)
        except FileNotFoundError:
            return
        member = tarfile.TarInfo(rel)
        member.mode = stat_module.S_IMODE(info.st_mode)
        member.mtime = int(info.st_mtime)
        if stat_module.S_ISDIR(info.st_mode):
            member.type = tarfile.DIRTYPE
            tar.addfile(member)
        elif stat_module.S_ISLNK(info.st_mode):
            member.type = tarfile.SYMTYPE
            try:
                member.linkname = os.readlink(name, dir_fd=parent)
            except OSError:
                return
            tar.addfile(member)
        elif stat_module.S_ISREG(info.st_mode):
            try:
                fd = os.open(
                    name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent
                )
            except OSError:
                self.counts["skipped"] += 1
                return
            try:
                opened = os.fstat(fd)
                if not stat_module.S_ISREG(opened.st_mode):
                    self.counts["skipped"] += 1
                    return
                member.size = opened.st_size
                tar.addfile(member, _Padded(fd, opened.st_size))  # type: ignore[arg-type]
                self.counts["bytes"] += opened.st_size
            finally:
                os.close(fd)
        else:
            self.counts["skipped"] += 1  # sockets, FIFOs, devices
            return
        self.counts["entries"] += 1

    def read(self, cancel: threading.Event) -> tuple[bytes, bool]:
        while True:
            if self.closed or cancel.is_set():
                raise InvalidArgument("the transfer was aborted")
            try:
                item = self.queue.get(timeout=0.5)
                break
            except queue.Empty:
                continue
        if item is None:
            if self.error is not None:
                if isinstance(self.error, SandboxdError):
                    raise self.error
                if isinstance(self.error, OSError):
                    raise os_error(self.error, self.source)
                raise InvalidArgument(f"tar creation failed: {self.error}")
            return b"", True
        return item, False

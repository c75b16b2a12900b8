"""Tree transfers: a tar stream extracted into, or produced from, a folder.

Extraction is ``untar.extract`` (validate every member, then write it
through ``O_NOFOLLOW`` folder descriptors; see there), run as the sandbox
user. A refused entry stops the extraction with an error naming it; the
entries before it stay extracted *inside* the target (validate-then-write,
chosen over a staging folder so a 10,000-file tree costs no second pass of
renames). Both directions run on a thread fed through a bounded queue, so
memory stays at ``QUEUE`` chunks whatever the tree's size.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import queue
import stat as stat_module
import tarfile
import threading
from collections.abc import Iterator

from sandboxd.contract import untar
from sandboxd.contract.errors import InvalidArgument, SandboxdError
from sandboxd.contract.untar import DIR_FLAGS
from sandboxd.executor.files import os_error
from sandboxd.executor.tools import gitignore
from sandboxd.executor.tools.gilpause import pause
from sandboxd.executor.transfer import CHUNK, Session

#: Chunks buffered between the channel and the tar thread.
QUEUE = 4


def extract(feed: _Feed, target: str) -> dict[str, int]:
    """``untar.extract`` with the filesystem's failures as typed errors."""
    try:
        return untar.extract(feed, target)
    except SandboxdError:
        raise
    except OSError as exc:
        raise os_error(exc, target) from exc


class _End(Exception):
    pass


class _Feed(untar.ChunkReader):
    """A file object whose bytes arrive through ``put`` (bounded)."""

    def __init__(self) -> None:
        super().__init__()
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=QUEUE)
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

    def next_chunk(self) -> bytes | None:
        while True:
            if self.aborted:
                raise InvalidArgument("the transfer was aborted")
            try:
                return self._queue.get(timeout=0.5)
            except queue.Empty:
                continue


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


#: Files up to this size are read whole before their header is written, so
#: the header holds the size read, not the size stat said: a file of /sys says
#: 4096 and holds a few bytes, one of /proc says 0 and holds more.
WHOLE_READ = 64 * 1024


class _Padded:
    """A file read for exactly ``size`` bytes: zeros where it shrank, or
    failed to read (EIO from a device attribute), meanwhile.

    A header already promised ``size`` bytes; tarfile refuses a short read
    ("unexpected end of data", which was answered INTERNAL).
    """

    def __init__(self, fd: int, size: int) -> None:
        self._fd = fd
        self._left = size
        self._failed = False

    def read(self, size: int = -1) -> bytes:
        want = self._left if size < 0 else min(size, self._left)
        if want <= 0:
            return b""
        data = b""
        while not self._failed and len(data) < want:
            try:
                got = os.read(self._fd, want - len(data))
            except OSError:
                got = b""
            if not got:
                self._failed = True  # shrank or broke: the rest is zeros
            data += got
        data += bytes(want - len(data))
        self._left -= want
        return data


def _read_whole(fd: int) -> bytes | None:
    """A small file's content as it reads now (None: it cannot be read)."""
    parts: list[bytes] = []
    left = WHOLE_READ
    try:
        while left > 0:
            got = os.read(fd, left)
            if not got:
                break
            parts.append(got)
            left -= len(got)
    except OSError:
        return None
    return b"".join(parts)


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
    for number, name in enumerate(names, 1):
        if not number & 63:
            pause()  # a tree of any size, walked in Python: the other calls go on
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
                child = os.open(name, DIR_FLAGS, dir_fd=root_fd)
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
                if opened.st_size <= WHOLE_READ:
                    content = _read_whole(fd)
                    if content is None:  # EIO, EINVAL: a device attribute, say
                        self.counts["skipped"] += 1
                        return
                    member.size = len(content)
                    tar.addfile(member, io.BytesIO(content))
                else:
                    member.size = opened.st_size
                    tar.addfile(member, _Padded(fd, opened.st_size))  # type: ignore[arg-type]
                self.counts["bytes"] += member.size
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

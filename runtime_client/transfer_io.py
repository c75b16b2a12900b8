"""Local ends of transfers: files and folders on this machine as chunk streams.

Blocking file and tar work runs on a worker thread and meets the event loop
through a bounded queue, so a transfer of any size holds a few chunks in
memory. Standard library only (asyncio), like the rest of the client layer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import stat
import tarfile
import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import IO, Any

from sandboxd.contract import untar

#: Bytes read from a local file per chunk (the daemon re-chunks as it needs).
CHUNK = 1 << 20

Source = str | os.PathLike[str] | bytes | AsyncIterable[bytes] | Iterable[bytes]
Progress = Callable[[int], None]


async def file_chunks(path: str | os.PathLike[str]) -> AsyncIterator[bytes]:
    handle = await asyncio.to_thread(open, path, "rb")
    try:
        while chunk := await asyncio.to_thread(handle.read, CHUNK):
            yield chunk
    finally:
        handle.close()


async def chunks_of(source: Source, progress: Progress | None = None) -> AsyncIterator[bytes]:
    """Chunks from a local file path, bytes, or an (async) iterable of bytes."""
    if isinstance(source, bytes):
        stream: AsyncIterable[bytes] = _from_bytes(source)
    elif isinstance(source, str | os.PathLike):
        stream = file_chunks(source)
    elif isinstance(source, AsyncIterable):
        stream = source
    else:
        stream = _from_iterable(source)
    async for chunk in stream:
        if progress is not None:
            progress(len(chunk))
        yield chunk


async def _from_bytes(data: bytes) -> AsyncIterator[bytes]:
    view = memoryview(data)
    for start in range(0, len(view), CHUNK):
        yield bytes(view[start : start + CHUNK])


async def _from_iterable(items: Iterable[bytes]) -> AsyncIterator[bytes]:
    for item in items:
        yield item


class _Bridge:
    """A bounded queue from a worker thread to the event loop; the thread stops
    (``_Stopped``) when the consumer goes away."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=4)
        self.stopped = threading.Event()

    def put(self, item: bytes | None) -> None:
        while True:
            if self.stopped.is_set():
                raise _Stopped
            future = asyncio.run_coroutine_threadsafe(self.queue.put(item), self.loop)
            try:
                future.result(timeout=0.5)
                return
            # Not the builtin TimeoutError before 3.11 (the client runs on 3.10).
            except concurrent.futures.TimeoutError:
                future.cancel()


class _Stopped(Exception):
    pass


class _Writer:
    """A file object for tarfile that hands chunks to the event loop."""

    def __init__(self, bridge: _Bridge) -> None:
        self._bridge = bridge
        self._buffer = bytearray()

    def write(self, data: bytes) -> int:
        self._buffer += data
        if len(self._buffer) >= CHUNK:
            self._bridge.put(bytes(self._buffer))
            self._buffer.clear()
        return len(data)

    def flush_rest(self) -> None:
        if self._buffer:
            self._bridge.put(bytes(self._buffer))
            self._buffer.clear()


def _add(tar: tarfile.TarFile, path: str, name: str) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    member = tarfile.TarInfo(name)
    member.mode = stat.S_IMODE(info.st_mode)
    member.mtime = int(info.st_mtime)
    if stat.S_ISDIR(info.st_mode):
        member.type = tarfile.DIRTYPE
        tar.addfile(member)
    elif stat.S_ISLNK(info.st_mode):
        member.type = tarfile.SYMTYPE
        member.linkname = os.readlink(path)
        tar.addfile(member)
    elif stat.S_ISREG(info.st_mode):
        with open(path, "rb") as handle:
            member.size = os.fstat(handle.fileno()).st_size
            tar.addfile(member, handle)
    # sockets, FIFOs and devices are left out


async def tar_of(folder: str | os.PathLike[str]) -> AsyncIterator[bytes]:
    """A tar stream of ``folder``'s contents (names relative to it, links kept)."""
    root = Path(folder)
    if not await asyncio.to_thread(root.is_dir):
        raise NotADirectoryError(f"{root} is not a folder")
    bridge = _Bridge(asyncio.get_running_loop())

    def produce() -> None:
        writer = _Writer(bridge)
        try:
            # GNU format, headers built from lstat: no pax record per file and
            # no user/group name lookups, the two costs of tarfile.add.
            with tarfile.open(fileobj=writer, mode="w|", format=tarfile.GNU_FORMAT) as tar:  # type: ignore[call-overload]
                for dirpath, dirnames, filenames in os.walk(root):
                    dirnames.sort()
                    prefix = os.path.relpath(dirpath, root)
                    for name in [*dirnames, *sorted(filenames)]:
                        rel = name if prefix == "." else f"{prefix}/{name}"
                        _add(tar, os.path.join(dirpath, name), rel)
                        tar.members.clear()
            writer.flush_rest()
        finally:
            with contextlib.suppress(_Stopped):
                bridge.put(None)

    worker = asyncio.ensure_future(asyncio.to_thread(produce))
    try:
        while (chunk := await bridge.queue.get()) is not None:
            yield chunk
        await worker  # a failure of the tar thread is the caller's error
    finally:
        bridge.stopped.set()
        while not bridge.queue.empty():
            bridge.queue.get_nowait()
        with contextlib.suppress(_Stopped, Exception):
            await worker


async def write_file(
    chunks: AsyncIterator[Any], dest: str | os.PathLike[str], keep: Callable[[Any], bool]
) -> list[Any]:
    """Write the byte chunks to ``dest`` (through a temp file, renamed at the
    end); returns the non-byte items (the final summary)."""
    target = Path(dest)
    temp = target.with_name(f".{target.name}.part")
    others: list[Any] = []
    handle: IO[bytes] = await asyncio.to_thread(open, temp, "wb")
    try:
        async for item in chunks:
            if isinstance(item, bytes):
                await asyncio.to_thread(handle.write, item)
            elif keep(item):
                others.append(item)
        handle.close()
        os.replace(temp, target)
    except BaseException:
        handle.close()
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    return others


class _Reader(untar.ChunkReader):
    """A file object for tarfile that pulls chunks from the event loop."""

    def __init__(self, pull: Callable[[], Any], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._pull = pull
        self._loop = loop

    def next_chunk(self) -> bytes | None:
        chunk: bytes | None = asyncio.run_coroutine_threadsafe(self._pull(), self._loop).result()
        return chunk


async def extract_to(
    chunks: AsyncIterator[Any], dest: str | os.PathLike[str]
) -> tuple[list[Any], dict[str, Any]]:
    """Extract the tar byte chunks into ``dest`` with the executor's own
    extractor (``sandboxd.contract.untar``: the stream comes from a sandbox, so
    no absolute names, no devices, nothing written through a symlink,
    InvalidArgument naming a refused entry; and no symlink that would resolve
    outside ``dest``: those are left out and listed); returns the non-byte
    items and what the extraction counted."""
    others: list[Any] = []
    folder = Path(dest)
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    loop = asyncio.get_running_loop()

    async def pull() -> bytes | None:
        async for item in chunks:
            if isinstance(item, bytes):
                return item
            others.append(item)
        return None

    def extract() -> dict[str, Any]:
        return untar.extract(_Reader(pull, loop), str(folder))

    counted = await asyncio.to_thread(extract)
    async for item in chunks:  # the summary after the end-of-archive blocks
        if not isinstance(item, bytes):
            others.append(item)
    return others, counted

"""Local ends of transfers: files and folders on this machine as chunk streams.

Blocking file and tar work runs on a worker thread and meets the event loop
through a bounded memory stream, so a transfer of any size holds a few
chunks in memory.
"""

from __future__ import annotations

import contextlib
import os
import tarfile
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.from_thread
import anyio.to_thread

from sandboxd.executor.transfer import CHUNK

Source = str | os.PathLike[str] | bytes | AsyncIterable[bytes] | Iterable[bytes]
Progress = Callable[[int], None]


async def file_chunks(path: str | os.PathLike[str]) -> AsyncIterator[bytes]:
    handle = await anyio.to_thread.run_sync(lambda: open(path, "rb"))  # noqa: SIM115
    try:
        while chunk := await anyio.to_thread.run_sync(handle.read, CHUNK):
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


class _Writer:
    """A file object for tarfile that hands chunks to the event loop."""

    def __init__(self, send: Callable[[bytes], Any]) -> None:
        self._send = send
        self._buffer = bytearray()

    def write(self, data: bytes) -> int:
        self._buffer += data
        if len(self._buffer) >= CHUNK:
            anyio.from_thread.run(self._send, bytes(self._buffer))
            self._buffer.clear()
        return len(data)

    def flush_rest(self) -> None:
        if self._buffer:
            anyio.from_thread.run(self._send, bytes(self._buffer))
            self._buffer.clear()


async def tar_of(folder: str | os.PathLike[str]) -> AsyncIterator[bytes]:
    """A tar stream of ``folder``'s contents (names relative to it, links kept)."""
    root = Path(folder)
    if not await anyio.to_thread.run_sync(root.is_dir):
        raise NotADirectoryError(f"{root} is not a folder")
    send, receive = anyio.create_memory_object_stream[bytes | None](4)

    def produce() -> None:
        writer = _Writer(send.send)
        with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames.sort()
                base = Path(dirpath)
                for name in [*dirnames, *sorted(filenames)]:
                    path = base / name
                    tar.add(path, arcname=str(path.relative_to(root)), recursive=False)
        writer.flush_rest()

    async with anyio.create_task_group() as group:

        async def run() -> None:
            try:
                await anyio.to_thread.run_sync(produce)
            finally:
                await send.send(None)

        group.start_soon(run)
        async with receive:
            async for chunk in receive:
                if chunk is None:
                    break
                yield chunk


async def write_file(
    chunks: AsyncIterator[Any], dest: str | os.PathLike[str], keep: Callable[[Any], bool]
) -> list[Any]:
    """Write the byte chunks to ``dest`` (through a temp file, renamed at the
    end); returns the non-byte items (the final summary)."""
    target = Path(dest)
    temp = target.with_name(f".{target.name}.part")
    others: list[Any] = []
    handle: IO[bytes] = await anyio.to_thread.run_sync(lambda: open(temp, "wb"))  # noqa: SIM115
    try:
        async for item in chunks:
            if isinstance(item, bytes):
                await anyio.to_thread.run_sync(handle.write, item)
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


class _Reader:
    """A file object for tarfile that pulls chunks from the event loop."""

    def __init__(self, pull: Callable[[], Any]) -> None:
        self._pull = pull
        self._buffer = b""
        self._eof = False

    def read(self, size: int = -1) -> bytes:
        while not self._buffer and not self._eof:
            chunk = anyio.from_thread.run(self._pull)
            if chunk is None:
                self._eof = True
            else:
                self._buffer = chunk
        if size < 0 or size >= len(self._buffer):
            data, self._buffer = self._buffer, b""
        else:
            data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data


async def extract_to(chunks: AsyncIterator[Any], dest: str | os.PathLike[str]) -> list[Any]:
    """Extract the tar byte chunks into ``dest`` with tarfile's ``data`` filter
    (the stream comes from a sandbox: no absolute names, no links out, no
    devices); returns the non-byte items."""
    others: list[Any] = []
    folder = Path(dest)
    await anyio.to_thread.run_sync(lambda: folder.mkdir(parents=True, exist_ok=True))

    async def pull() -> bytes | None:
        async for item in chunks:
            if isinstance(item, bytes):
                return item
            others.append(item)
        return None

    def extract() -> None:
        with tarfile.open(fileobj=_Reader(pull), mode="r|") as tar:  # type: ignore[call-overload]
            tar.extractall(folder, filter="data")

    await anyio.to_thread.run_sync(extract)
    async for item in chunks:  # the summary after the end-of-archive blocks
        if not isinstance(item, bytes):
            others.append(item)
    return others

"""Local ends of transfers: files and folders on this machine as chunk streams.

Blocking file and tar work runs on a worker thread and meets the event loop
through a bounded queue, so a transfer of any size holds a few chunks in
memory. Plain asyncio: the client's base install has nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tarfile
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import IO, Any

#: How much of a local file one read takes. Not a contract: the daemon re-chunks
#: whatever it is sent to its own transfer size.
CHUNK = 1 << 20

Source = str | os.PathLike[str] | bytes | AsyncIterable[bytes] | Iterable[bytes]
Progress = Callable[[int], None]


async def file_chunks(path: str | os.PathLike[str]) -> AsyncIterator[bytes]:
    handle = await asyncio.to_thread(lambda: open(path, "rb"))  # noqa: SIM115
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


def _on_loop(loop: asyncio.AbstractEventLoop, work: Any) -> Any:
    """Run a coroutine on the event loop from a worker thread; wait for it."""
    return asyncio.run_coroutine_threadsafe(work, loop).result()


class _Writer:
    """A file object for tarfile that hands chunks to the event loop."""

    def __init__(self, send: Callable[[bytes], Any]) -> None:
        self._send = send
        self._buffer = bytearray()

    def write(self, data: bytes) -> int:
        self._buffer += data
        if len(self._buffer) >= CHUNK:
            self._send(bytes(self._buffer))
            self._buffer.clear()
        return len(data)

    def flush_rest(self) -> None:
        if self._buffer:
            self._send(bytes(self._buffer))
            self._buffer.clear()


async def tar_of(folder: str | os.PathLike[str]) -> AsyncIterator[bytes]:
    """A tar stream of ``folder``'s contents (names relative to it, links kept)."""
    root = Path(folder)
    if not await asyncio.to_thread(root.is_dir):
        raise NotADirectoryError(f"{root} is not a folder")
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=4)

    def produce() -> None:
        writer = _Writer(lambda chunk: _on_loop(loop, queue.put(chunk)))
        with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames.sort()
                base = Path(dirpath)
                for name in [*dirnames, *sorted(filenames)]:
                    path = base / name
                    tar.add(path, arcname=str(path.relative_to(root)), recursive=False)
        writer.flush_rest()

    async def run() -> None:
        try:
            await asyncio.to_thread(produce)
        finally:
            await queue.put(None)

    producer = asyncio.create_task(run())
    try:
        while (chunk := await queue.get()) is not None:
            yield chunk
        await producer  # the producer's error, if it failed
    finally:
        if not producer.done():
            # The consumer stopped early: drain so the producer's puts return.
            while not producer.done():
                while not queue.empty():
                    queue.get_nowait()
                await asyncio.sleep(0.01)


async def write_file(
    chunks: AsyncIterator[Any], dest: str | os.PathLike[str], keep: Callable[[Any], bool]
) -> list[Any]:
    """Write the byte chunks to ``dest`` (through a temp file, renamed at the
    end); returns the non-byte items (the final summary)."""
    target = Path(dest)
    temp = target.with_name(f".{target.name}.part")
    others: list[Any] = []
    handle: IO[bytes] = await asyncio.to_thread(lambda: open(temp, "wb"))  # noqa: SIM115
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


class _Reader:
    """A file object for tarfile that pulls chunks from the event loop."""

    def __init__(self, pull: Callable[[], Any]) -> None:
        self._pull = pull
        self._buffer = b""
        self._eof = False

    def read(self, size: int = -1) -> bytes:
        while not self._buffer and not self._eof:
            chunk = self._pull()
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
    await asyncio.to_thread(lambda: folder.mkdir(parents=True, exist_ok=True))
    loop = asyncio.get_running_loop()

    async def pull() -> bytes | None:
        async for item in chunks:
            if isinstance(item, bytes):
                return item
            others.append(item)
        return None

    def extract() -> None:
        reader = _Reader(lambda: _on_loop(loop, pull()))
        with tarfile.open(fileobj=reader, mode="r|") as tar:  # type: ignore[call-overload]
            tar.extractall(folder, filter="data")

    await asyncio.to_thread(extract)
    async for item in chunks:  # the summary after the end-of-archive blocks
        if not isinstance(item, bytes):
            others.append(item)
    return others

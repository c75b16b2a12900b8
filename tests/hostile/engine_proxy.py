"""A unix-socket proxy in front of the Docker engine that a test can cut.

A daemon pointed at the proxy (``--docker-host unix://...``) loses every
engine connection, its attach streams included, exactly as when dockerd
stops -- without stopping the engine that other tests and other people on
this machine are using.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

ENGINE_SOCKET = "/var/run/docker.sock"


class EngineProxy:
    def __init__(self, path: Path, engine: str = ENGINE_SOCKET) -> None:
        self.path = path
        self.engine = engine
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    async def start(self) -> None:
        self.path.unlink(missing_ok=True)
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))

    async def cut(self) -> None:
        """The engine "stops": no new connections, every open one dropped."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()
        self.path.unlink(missing_ok=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(self.engine)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while chunk := await src.read(1 << 16):
                    dst.write(chunk)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self._writers.difference_update((writer, up_writer))

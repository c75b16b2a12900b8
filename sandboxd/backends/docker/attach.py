"""A raw asyncio connection to a container's stdio through the Docker API.

docker-py's attach socket is blocking; the executor channel needs a native
asyncio stream so a reply wakes the waiting call with no thread hop. This
speaks the one HTTP upgrade the attach endpoint needs and demultiplexes the
8-byte-header frames Docker uses for non-TTY containers.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from urllib.parse import urlparse

from sandboxd.contract.errors import SandboxUnavailable
from sandboxd.executor.direct import SOCKET_BUFFER, widen_socket

log = logging.getLogger(__name__)

_STDOUT, _STDERR = 1, 2
_MAX_HEADER_BYTES = 64 * 1024


async def _connect(docker_host: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    url = urlparse(docker_host)
    if url.scheme == "unix":
        return await asyncio.open_unix_connection(url.path, limit=1 << 20)
    if url.scheme in ("tcp", "http"):
        return await asyncio.open_connection(url.hostname, url.port or 2375, limit=1 << 20)
    raise SandboxUnavailable(f"unsupported DOCKER_HOST {docker_host!r}: use unix:// or tcp://")


async def open_attach(
    docker_host: str, container_id: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Attach to stdin, stdout and stderr of a container (running or not yet started)."""
    try:
        reader, writer = await _connect(docker_host)
    except OSError as exc:
        raise SandboxUnavailable(f"cannot reach the Docker engine at {docker_host}: {exc}") from exc
    request = (
        f"POST /containers/{container_id}/attach?stream=1&stdin=1&stdout=1&stderr=1 HTTP/1.1\r\n"
        "Host: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n"
    )
    writer.write(request.encode())
    await writer.drain()
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        writer.close()
        raise SandboxUnavailable(f"Docker closed the attach to {container_id[:12]}") from exc
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or parts[1] not in ("101", "200"):
        writer.close()
        raise SandboxUnavailable(f"Docker refused to attach to {container_id[:12]}: {status_line}")
    widen(writer)
    return reader, writer


def widen(writer: asyncio.StreamWriter) -> None:
    """The channel's socket buffers (executor.direct's, one size at both ends)."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return
    widen_socket(sock)
    # Let a few chunks queue before drain() waits (the window bounds them).
    writer.transport.set_write_buffer_limits(high=SOCKET_BUFFER)


class DemuxedStdout:
    """Yields the container's stdout bytes; stderr goes to the log, bounded."""

    def __init__(self, reader: asyncio.StreamReader, name: str) -> None:
        self._reader = reader
        self._name = name
        #: The last stderr the container wrote: the best clue when it dies.
        self.last_stderr = ""

    async def read(self) -> bytes:
        """Next stdout chunk; b"" at the end of the stream."""
        while True:
            try:
                header = await self._reader.readexactly(8)
                kind, size = header[0], struct.unpack(">I", header[4:])[0]
                payload = await self._reader.readexactly(size)
            except (asyncio.IncompleteReadError, ConnectionError):
                return b""
            if kind == _STDOUT:
                return payload
            if kind == _STDERR:
                text = payload[:2000].decode("utf-8", "replace").rstrip()
                log.warning("workspace %s: %s", self._name, text)
                self.last_stderr = (self.last_stderr + "\n" + text)[-2000:]

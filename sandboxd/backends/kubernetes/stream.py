"""exec and attach through the API server, as the executor channel's bytes.

``v5.channel.k8s.io``: every binary message is one channel byte and its
data: 0 stdin (to the Pod), 1 stdout, 2 stderr, 3 the final status (a JSON
``Status``), and 255 a close: ``[255, 0]`` ends stdin. ``ExecStream`` is a
``ByteSource`` (stdout) and a ``ByteSink`` (stdin) for ``ExecutorChannel``;
stderr goes to the log, bounded, and the status is kept for the error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Sequence

import aiohttp

from sandboxd.backends.kubernetes.api import KubeApi

log = logging.getLogger(__name__)

STDIN, STDOUT, STDERR, STATUS, CLOSE = 0, 1, 2, 3, 255
#: Bytes of stdin per message: the API server and kubelet forward each as
#: one frame; small enough for every buffer on the way, large enough that
#: a 1 MiB chunk is a handful of messages.
SEND_CHUNK = 256 << 10
_MAX_STDERR = 2000
_closing: set[asyncio.Task[bool]] = set()


class ExecStream:
    """One exec or attach stream: stdout in, stdin out."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse, name: str) -> None:
        self._socket = socket
        self._name = name
        self._pending: list[bytes] = []
        self._lock = asyncio.Lock()
        #: The last stderr the command wrote: the clue when it failed.
        self.stderr = ""
        #: The final ``Status`` (exit code, reason), once it came.
        self.status: dict[str, object] | None = None

    @classmethod
    async def open(
        cls,
        api: KubeApi,
        pod: str,
        subresource: str,
        params: Sequence[tuple[str, str]],
        *,
        name: str,
    ) -> ExecStream:
        socket = await api.websocket(api.path("pods", pod, subresource), params)
        return cls(socket, name)

    # ByteSource
    async def read(self) -> bytes:
        """Next stdout bytes; b"" when the stream ended."""
        while True:
            try:
                message = await self._socket.receive()
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError):
                return b""
            if message.type != aiohttp.WSMsgType.BINARY:
                if message.type in (
                    aiohttp.WSMsgType.CLOSE,
                    aiohttp.WSMsgType.CLOSING,
                    aiohttp.WSMsgType.CLOSED,
                    aiohttp.WSMsgType.ERROR,
                ):
                    return b""
                continue
            data: bytes = message.data
            if not data:
                continue
            channel, payload = data[0], data[1:]
            if channel == STDOUT:
                if payload:
                    return payload
            elif channel == STDERR:
                text = payload[:_MAX_STDERR].decode("utf-8", "replace").rstrip()
                if text:
                    log.warning("workspace %s: %s", self._name, text)
                    self.stderr = (self.stderr + "\n" + text)[-_MAX_STDERR:]
            elif channel == STATUS:
                with contextlib.suppress(ValueError):
                    status = json.loads(payload)
                    if isinstance(status, dict):
                        self.status = status

    # ByteSink
    def write(self, data: bytes) -> None:
        self._pending.append(bytes(data))

    async def drain(self) -> None:
        # One sender at a time: a frame's parts must stay together.
        async with self._lock:
            pending, self._pending = self._pending, []
            data = b"".join(pending)
            try:
                for start in range(0, len(data), SEND_CHUNK):
                    await self._socket.send_bytes(
                        bytes((STDIN,)) + data[start : start + SEND_CHUNK]
                    )
            except (aiohttp.ClientError, ConnectionError) as exc:
                raise OSError(f"the exec stream is closed: {exc}") from exc
            if self._socket.closed:
                raise OSError("the exec stream is closed")

    async def close_stdin(self) -> None:
        """The command sees EOF on stdin (v5's half-close); stdout stays open."""
        await self.drain()
        await self._socket.send_bytes(bytes((CLOSE, STDIN)))

    def close(self) -> None:
        if not self._socket.closed:
            with contextlib.suppress(RuntimeError):
                task = asyncio.get_running_loop().create_task(self._socket.close())
                # Held until done: the loop keeps only a weak reference.
                _closing.add(task)
                task.add_done_callback(_closing.discard)

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self._socket.close()

    def ran(self) -> bool:
        """Whether the command ran and exited (any code), by the status channel."""
        code = self.exit_code()
        return code is not None and code >= 0

    def reason(self) -> str:
        """The API server's words on a failed stream ("" without a status)."""
        status = self.status or {}
        return str(status.get("message") or status.get("reason") or "")

    def exit_code(self) -> int | None:
        """The command's exit code from the status channel (0 on Success)."""
        status = self.status
        if status is None:
            return None
        if status.get("status") == "Success":
            return 0
        details = status.get("details")
        if isinstance(details, dict):
            for cause in details.get("causes") or []:
                if isinstance(cause, dict) and cause.get("reason") == "ExitCode":
                    with contextlib.suppress(TypeError, ValueError):
                        return int(cause.get("message", ""))
        return -1

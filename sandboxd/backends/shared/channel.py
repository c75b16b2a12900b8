"""sandboxd's end of the executor channel: many concurrent calls over one stream.

Everything that arrives here comes from inside a sandbox and is untrusted:
lines and raw payloads are length-bounded (``max_line`` each, so a channel
holds at most about twice that while a frame arrives), frames are checked
before use, and a frame that fails a check is dropped (never raised into the
daemon). A raw frame whose length or end is wrong loses the stream's step:
the channel is dropped at once and the owner reconnects. When the stream
ends, every waiting call fails with SandboxUnavailable and the owner may
reconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from sandboxd.contract.errors import SandboxdError, SandboxUnavailable, Timeout, error_from_kind
from sandboxd.executor import wire
from sandboxd.executor.credits import WINDOW, window

log = logging.getLogger(__name__)
_HEX = frozenset("0123456789abcdef")

_MAX_ERROR_MESSAGE = 8192
_DECODE_INLINE_LIMIT = 1 << 20
#: Events a stream may have unread (its credit window, see executor.credits;
#: some ops ask for another, ``credits.window``).
STREAM_BUFFER = WINDOW
#: A frame's parts up to this size are joined into one write.
_JOIN_LIMIT = 256 << 10
#: Malformed frames tolerated on one channel before it is dropped.
MAX_BAD_FRAMES = 100


class ByteSource(Protocol):
    async def read(self) -> bytes:
        """Next chunk; b"" at the end."""
        ...


class ByteSink(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class _Stream:
    def __init__(self, window: int) -> None:
        # The window, plus room for the final reply or error.
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=window + 1)

    def abandon(self) -> None:
        # The consumer is gone: free the reader if it waits to put an event.
        while not self.queue.empty():
            self.queue.get_nowait()

    def fail(self, error: SandboxdError) -> None:
        # The stream is dead: make room for the error so the consumer sees it.
        while self.queue.full():
            self.queue.get_nowait()
        self.queue.put_nowait(("err", error))


class ExecutorChannel:
    def __init__(
        self, source: ByteSource, sink: ByteSink, *, name: str, max_line: int, resync: bool = False
    ) -> None:
        self.name = name
        self._source = source
        self._sink = sink
        self._max_line = max_line
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._streams: dict[int, _Stream] = {}
        self._failure: SandboxdError | None = None
        self._bad_frames = 0
        # ``resync``: attached to an executor that was already running, so what
        # arrives before the first good frame may be the tail of a frame the
        # previous attach was cut off in (a megabyte of raw bytes is many
        # "lines"): dropped quietly; the hello's timeout bounds it.
        self._synced = not resync
        #: The nonce a starting executor says first (executor.bundle, NONCE_ARG).
        self._nonce: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read_loop(), name=f"channel-{name}")

    @property
    def closed(self) -> bool:
        return self._failure is not None

    async def nonce(self, timeout: float) -> str | None:
        """The nonce the executor's start said, or None if none came in time."""
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(self._nonce)
        except TimeoutError:
            return None

    async def send_raw(self, data: bytes) -> None:
        self._sink.write(data)
        await self._sink.drain()

    async def _send_parts(self, parts: list[bytes]) -> None:
        if len(parts) > 1 and sum(map(len, parts)) <= _JOIN_LIMIT:
            # One write, one system call: a small raw frame (a pipe's bytes)
            # in three would cost two more.
            parts = [b"".join(parts)]
        for part in parts:
            self._sink.write(part)
        await self._sink.drain()

    async def call(
        self, op: str, args: Mapping[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        self._raise_if_closed()
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self._send({"id": request_id, "op": op}, dict(args))
            # asyncio.timeout arms one timer; wait_for would also wrap the future.
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            await self._cancel(request_id)
            raise Timeout(
                f"{op} got no answer from workspace {self.name} in {timeout:.0f} s"
            ) from None
        except asyncio.CancelledError:
            await self._cancel(request_id)
            raise
        finally:
            self._pending.pop(request_id, None)

    async def stream(self, op: str, args: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]:
        self._raise_if_closed()
        request_id = next(self._ids)
        credits = window(op)
        stream = self._streams[request_id] = _Stream(credits)
        finished = False
        try:
            await self._send(
                {"id": request_id, "op": op, "stream": True, "credits": credits}, dict(args)
            )
            drained = 0
            while True:
                kind, value = await stream.queue.get()
                if kind == "ev":
                    yield value
                    # The consumer asked for more: hand the executor back the
                    # credits of what it took, in batches of half a window.
                    drained += 1
                    if drained >= credits // 2:
                        await self._send_control(
                            {"op": "credit", "target": request_id, "n": drained}
                        )
                        drained = 0
                elif kind == "ok":
                    finished = True
                    yield {"result": value}
                    return
                else:
                    finished = True
                    raise value
        finally:
            self._streams.pop(request_id, None)
            stream.abandon()
            if not finished:
                await self._cancel(request_id)

    async def close(self) -> None:
        self._fail(SandboxUnavailable(f"the channel to workspace {self.name} was closed"))
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
        with contextlib.suppress(Exception):
            self._sink.close()

    # ------------------------------------------------------------ internals

    def _raise_if_closed(self) -> None:
        if self._failure is not None:
            raise SandboxUnavailable(self._failure.message)

    async def _send(self, head: dict[str, Any], args: dict[str, Any]) -> None:
        # Bulk bytes travel raw (no JSON escaping, no base64) up to the
        # executor's bound; larger ones as base64 text.
        parts = wire.frame(head, "args", args, raw_max=wire.REQUEST_RAW_MAX)
        await self._send_control_parts(parts)

    async def _send_control(self, message: dict[str, Any]) -> None:
        await self._send_control_parts([wire.encode(message)])

    async def _send_control_parts(self, parts: list[bytes]) -> None:
        try:
            await self._send_parts(parts)
        except (OSError, RuntimeError) as exc:
            self._fail(SandboxUnavailable(f"workspace {self.name}: channel write failed: {exc}"))
            self._raise_if_closed()

    async def _cancel(self, request_id: int) -> None:
        if self._failure is None:
            with contextlib.suppress(Exception):
                await self._send_parts([wire.encode({"op": "cancel", "target": request_id})])

    async def _read_loop(self) -> None:
        deframer = wire.Deframer(max_line=self._max_line, max_raw=self._max_line)
        try:
            while chunk := await self._source.read():
                for frame in deframer.feed(chunk):
                    if isinstance(frame, wire.Frame):
                        await self._dispatch(frame)
                    elif not self._synced:
                        continue
                    elif frame.lost_step:
                        self._lost_step(frame.reason)
                        return
                    else:
                        self._bad_frame(frame.reason)
        except Exception as exc:  # the channel must end cleanly, whatever happened
            log.warning("workspace %s: channel reader failed: %r", self.name, exc)
        self._fail(
            SandboxUnavailable(
                f"workspace {self.name}: the executor channel closed "
                "(container stopped or executor died)"
            )
        )

    def _take_nonce(self, value: object) -> None:
        # Echoed into the container's stdin in the bundle's header: only the
        # shape a bootstrap makes (32 hex digits), once.
        if self._nonce.done() or not (
            isinstance(value, str) and len(value) == 32 and all(c in _HEX for c in value)
        ):
            self._bad_frame("a nonce it should not have sent")
            return
        self._nonce.set_result(value)

    def _lost_step(self, reason: str) -> None:
        log.warning("workspace %s: the executor sent %s; dropping the channel", self.name, reason)
        self._fail(
            SandboxUnavailable(
                f"workspace {self.name}: the executor sent {reason}; the channel was "
                "dropped and will be re-established"
            )
        )

    def _fail(self, error: SandboxdError) -> None:
        if self._failure is None:
            self._failure = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(SandboxUnavailable(error.message))
        for stream in self._streams.values():
            stream.fail(SandboxUnavailable(error.message))

    def _bad_frame(self, what: str) -> None:
        self._bad_frames += 1
        # Logged sparsely: a flood of bad frames must not become a flood of log
        # lines on the event loop every other workspace shares.
        if self._bad_frames <= 5 or self._bad_frames % 1000 == 0:
            log.warning("workspace %s: dropped %s (%d so far)", self.name, what, self._bad_frames)
        if self._bad_frames > MAX_BAD_FRAMES:
            self._fail(
                SandboxUnavailable(
                    f"workspace {self.name}: the executor sent {self._bad_frames} malformed "
                    "frames; the channel was dropped and will be re-established"
                )
            )
            self._reader.cancel()

    async def _dispatch(self, frame: wire.Frame) -> None:
        line = frame.line
        try:
            if len(line) > _DECODE_INLINE_LIMIT:
                # A multi-megabyte reply is parsed off the event loop so it
                # cannot stall the calls of every other workspace.
                message = await asyncio.to_thread(wire.decode, line)
            else:
                message = wire.decode(line)
            request_id = message.get("id")
            if request_id is None and "nonce" in message:
                self._take_nonce(message["nonce"])
                return
            if not isinstance(request_id, int):
                raise ValueError("frame without an integer id")
            value: dict[str, Any] | SandboxdError
            if "ok" in message:
                kind, value = "ok", self._result(message["ok"], frame)
            elif "err" in message:
                kind, value = "err", self._error(message["err"])
            elif "ev" in message:
                kind, value = "ev", self._result(message["ev"], frame)
            else:
                raise ValueError("frame without ok, err or ev")
        except (ValueError, SandboxdError) as exc:
            if self._synced:
                self._bad_frame(f"a bad frame ({exc})")
            return
        self._synced = True
        stream = self._streams.get(request_id)
        if stream is not None:
            # Never waits: the executor sends a stream's events only against
            # credits, so a full queue means it broke the rule. Waiting here
            # would stall every call of the workspace behind one slow consumer.
            try:
                stream.queue.put_nowait((kind, value))
            except asyncio.QueueFull:
                self._bad_frame("an event beyond the stream's credits")
            return
        future = self._pending.get(request_id)
        if future is None or future.done() or kind == "ev":
            return  # late reply to a cancelled call
        if isinstance(value, SandboxdError):
            future.set_exception(value)
        else:
            future.set_result(value)

    @staticmethod
    def _result(value: Any, frame: wire.Frame) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValueError("result is not an object")
        fields = wire.from_wire(value)
        if frame.payload is not None:
            fields = wire.attach_raw(fields, frame.raw_key, frame.payload)
        return fields

    @staticmethod
    def _error(value: Any) -> SandboxdError:
        if not isinstance(value, dict):
            raise ValueError("error is not an object")
        kind, message = value.get("kind"), value.get("message")
        if not isinstance(kind, str) or not isinstance(message, str):
            raise ValueError("error without kind and message")
        return error_from_kind(kind, message[:_MAX_ERROR_MESSAGE])

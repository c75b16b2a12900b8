"""Socket pipes: TCP byte streams between the daemon and the sandbox's loopback.

The container has no network of its own; a forwarded port (the daemon
connects in, ``pipe_connect``) or an egress proxy (the sandbox connects out
to a loopback listener, ``pipe_listen`` then ``pipe_attach``) is a socket
here whose bytes ride the executor channel. Nothing here parses what flows:
the daemon does any protocol work.

Flow control, both ways:
- sandbox -> daemon: each chunk read from the socket is one streamed event,
  sent against the stream's credits (executor.credits, ``PIPE_WINDOW`` of
  them: 4 MiB). A daemon-side reader that stops reading stops this socket's
  reader only.
- daemon -> sandbox: ``pipe_write`` returns once its bytes are in the
  socket; the daemon awaits it before sending the next, so at most one write
  (``MAX_WRITE``) per pipe is in flight. A server that never reads holds
  back its own client, never the channel. ``pipe_connect`` may carry the
  first bytes (``data``, at most ``MAX_WRITE``): a client that speaks first
  (an HTTP request) costs no round trip of its own. They go out from the
  pipe's relay loop as the socket takes them, so a server that sends before
  it reads is still read meanwhile.
"""

from __future__ import annotations

import contextlib
import ipaddress
import secrets
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from sandboxd.contract.errors import (
    Conflict,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    SandboxUnavailable,
)

Emit = Callable[[dict[str, Any]], None]

#: Bytes read from a socket per event at most (the daemon buffers at most a
#: credit window of these per pipe, ``credits.PIPE_WINDOW``). Large: every
#: event costs a frame here, a dispatch in the daemon and a gRPC message.
CHUNK = 256 << 10
#: Largest ``pipe_write``: the bytes one pipe may have in flight towards the sandbox.
MAX_WRITE = 256 << 10
#: Pipes (connected or attached) one executor holds at most.
MAX_PIPES = 1024
#: Accepted connections waiting for ``pipe_attach`` at most; more are closed.
MAX_PENDING = 64
#: An accepted connection nobody attaches to within this is closed.
PENDING_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10.0
#: How often a blocked reader, writer or listener looks at its cancel flag.
POLL_S = 0.2
#: How long a listen waits for an earlier listen of the same address to let go.
TAKEOVER_S = 2.0
_ID_MAX = 64


def loopback(host: object) -> str:
    """``host`` if it is a loopback address literal; InvalidArgument otherwise.

    Only loopback: with ``network: full`` a pipe to any other address would
    turn the sandbox into the daemon's way out.
    """
    if not isinstance(host, str):
        raise InvalidArgument("host must be a string")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise InvalidArgument(
            f"host must be a loopback address such as 127.0.0.1 or ::1 (got {host!r})"
        ) from None
    if not address.is_loopback:
        raise InvalidArgument(f"host must be a loopback address (got {host})")
    return str(address)


def port_number(value: object, *, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument("port must be an integer")
    if not (0 if allow_zero else 1) <= value <= 65535:
        raise InvalidArgument(f"port must be from 1 to 65535 (got {value})")
    return value


def pipe_id(value: object, what: str = "pipe") -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= _ID_MAX:
        raise InvalidArgument(f"{what} must be a string of 1-{_ID_MAX} characters")
    return value


class _Pipe:
    def __init__(self, sock: socket.socket, cancel: threading.Event) -> None:
        self.sock = sock
        self.closed = threading.Event()
        #: The daemon half-closed (``pipe_shutdown``).
        self.write_shut = threading.Event()
        #: The sandbox's side sent its end.
        self.ended = False
        #: The stream's cancel flag. Once the sandbox's side has ended, the
        #: relay waits on it alone and a half-close sets it too: a pipe the
        #: daemon closes or shuts frees its thread at once, not a poll later.
        self.cancel = cancel
        self.writing = threading.Lock()

    def close(self, *, abort: bool) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        with contextlib.suppress(OSError):
            if abort:
                # A reset: bytes the peer never read are dropped, not kept
                # trying to deliver (a server that never reads would never
                # see a FIN queued behind them).
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()


class _Hold:
    """One listen's claim on its addresses."""

    def __init__(self, cancel: threading.Event, channel: object) -> None:
        self.cancel = cancel
        self.channel = channel
        #: Set when another listen took the addresses over; ``taken_by``: its channel.
        self.taken = threading.Event()
        self.taken_by: object = None

    def take(self, channel: object) -> None:
        self.taken_by = channel
        self.taken.set()


class Pipes:
    """The pipes and pending accepted connections of one executor."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pipes: dict[str, _Pipe] = {}
        self._pending: dict[str, tuple[socket.socket, float]] = {}
        #: (host, port) -> the listen that holds it.
        self._listening: dict[tuple[str, int], _Hold] = {}

    # ------------------------------------------------------------ streams

    def connect(
        self,
        pipe: str,
        host: str,
        port: int,
        cancel: threading.Event,
        emit: Emit,
        first: bytes = b"",
    ) -> dict[str, Any]:
        if len(first) > MAX_WRITE:
            raise InvalidArgument(
                f"a pipe's first bytes are at most {MAX_WRITE} (got {len(first)})"
            )
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(CONNECT_TIMEOUT_S)
            sock.connect((host, port))
            sock.settimeout(None)
        except ConnectionRefusedError:
            sock.close()
            raise NotFound(f"nothing listens on {host} port {port} in the sandbox") from None
        except OSError as exc:
            sock.close()
            raise SandboxUnavailable(f"cannot connect to {host} port {port}: {exc}") from None
        return self._relay(pipe, sock, cancel, emit, first)

    def attach(self, pipe: str, conn: str, cancel: threading.Event, emit: Emit) -> dict[str, Any]:
        with self._lock:
            entry = self._pending.pop(conn, None)
        if entry is None:
            raise NotFound(f"no accepted connection {conn!r} (closed, or attached already)")
        return self._relay(pipe, entry[0], cancel, emit)

    def _relay(
        self,
        pipe_key: str,
        sock: socket.socket,
        cancel: threading.Event,
        emit: Emit,
        first: bytes = b"",
    ) -> dict[str, Any]:
        # No Nagle: a small write (a request's body after its head) goes out
        # at once instead of waiting for the peer's delayed ack.
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pipe = _Pipe(sock, cancel)
        # Held until the first bytes are out: a pipe_write waits behind them.
        pending = memoryview(first)
        if pending:
            pipe.writing.acquire()
        with self._lock:
            if pipe_key in self._pipes:
                pipe.close(abort=True)
                raise Conflict(f"pipe {pipe_key!r} is open already")
            if len(self._pipes) >= MAX_PIPES:
                pipe.close(abort=True)
                raise ResourceExhausted(f"the sandbox has {MAX_PIPES} pipes open already")
            self._pipes[pipe_key] = pipe
        clean = False
        try:
            # First event: the socket is there (the daemon's open returns on it).
            emit({"connected": True})
            while not cancel.is_set() and not pipe.closed.is_set():
                if pipe.ended and not pending:
                    # The daemon's side may still write (half-close), so the
                    # pipe lives until it ends too (or the daemon lets go).
                    if pipe.write_shut.is_set():
                        clean = True
                        return {"eof": True}
                    cancel.wait(POLL_S)
                    continue
                readable, writable, _ = select.select(
                    [] if pipe.ended else [sock], [sock] if pending else [], [], POLL_S
                )
                if writable:
                    try:
                        pending = pending[sock.send(pending, socket.MSG_DONTWAIT) :]
                    except BlockingIOError:
                        pass
                    except OSError:
                        break
                    if not pending:
                        pipe.writing.release()
                if not readable:
                    continue
                try:
                    data = sock.recv(CHUNK)
                except OSError:
                    break
                if not data:
                    emit({"eof": True})
                    pipe.ended = True
                    continue
                data, ended = _more(sock, data)
                if ended:
                    # The end rides with the last bytes: one event, one frame,
                    # one gRPC message less per connection.
                    emit({"data": data, "eof": True})
                    pipe.ended = True
                else:
                    emit({"data": data})
            if pipe.ended:
                return {"eof": True}
            if not cancel.is_set():
                raise SandboxUnavailable(
                    "the connection was closed inside the sandbox (deleted or restarted)"
                )
            return {"eof": False}
        finally:
            with self._lock:
                self._pipes.pop(pipe_key, None)
            pipe.close(abort=not clean)
            if pending:
                pipe.writing.release()

    # ------------------------------------------------------------ calls

    def write_now(self, pipe_key: str, data: bytes) -> int:
        """Send what the socket takes without waiting; the bytes sent (0 when
        another write holds the pipe, or the socket is full or failed: ``write``
        then does the rest and reports any error). Run on the channel's reader
        thread, it spares a write the hand-over to a worker thread."""
        if len(data) > MAX_WRITE:
            raise InvalidArgument(f"a pipe write is at most {MAX_WRITE} bytes (got {len(data)})")
        pipe = self._get(pipe_key)
        if not pipe.writing.acquire(blocking=False):
            return 0
        try:
            if pipe.closed.is_set():
                return 0
            return pipe.sock.send(data, socket.MSG_DONTWAIT)
        except OSError:  # BlockingIOError too
            return 0
        finally:
            pipe.writing.release()

    def write(self, pipe_key: str, data: bytes, cancel: threading.Event) -> dict[str, Any]:
        if len(data) > MAX_WRITE:
            raise InvalidArgument(f"a pipe write is at most {MAX_WRITE} bytes (got {len(data)})")
        pipe = self._get(pipe_key)
        view = memoryview(data)
        # One writer at a time keeps a pipe's bytes in order even if a daemon
        # (wrongly) overlapped writes.
        with pipe.writing:
            while view:
                if cancel.is_set() or pipe.closed.is_set():
                    raise SandboxUnavailable(f"pipe {pipe_key!r} closed during a write")
                _, writable, _ = select.select([], [pipe.sock], [], POLL_S)
                if not writable:
                    continue
                try:
                    sent = pipe.sock.send(view, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    raise SandboxUnavailable(f"pipe {pipe_key!r}: {exc}") from None
                view = view[sent:]
        return {"written": len(data)}

    def shutdown(self, pipe_key: str, *, wait: bool = True) -> dict[str, Any] | None:
        """Half-close towards the sandbox's side, after any write in flight.
        With ``wait`` False (the channel's reader thread), None instead of
        waiting for such a write."""
        pipe = self._get(pipe_key)
        if not pipe.writing.acquire(blocking=wait):
            return None
        try:
            with contextlib.suppress(OSError):
                pipe.sock.shutdown(socket.SHUT_WR)
        finally:
            pipe.writing.release()
        pipe.write_shut.set()
        if pipe.ended:
            pipe.cancel.set()  # its relay waits for this only: let it go now
        return {}

    def _get(self, pipe_key: str) -> _Pipe:
        with self._lock:
            pipe = self._pipes.get(pipe_key)
        if pipe is None:
            raise NotFound(f"no open pipe {pipe_key!r}")
        return pipe

    # ------------------------------------------------------------ listeners

    def listen(
        self,
        listeners: list[tuple[str, str, int]],
        cancel: threading.Event,
        emit: Emit,
        *,
        owns: Callable[[], bool] = lambda: True,
        channel: object = None,
    ) -> dict[str, Any]:
        """Listen until cancelled; each accepted connection is an event.

        An address another listen holds is taken over only when ``owns()``
        (this call's channel owns the sandbox, executor.owners); otherwise
        this listen stands by (a ``standby`` event) until its channel owns
        or the address is let go. A listen taken over by another channel's
        stands by the same way, so two daemons never take it back and forth;
        one taken over by a listen of its own channel has been replaced and ends.
        """
        hold = _Hold(cancel, channel)
        waiting = False
        while not cancel.is_set():
            bound = self._claim(listeners, hold, owns)
            if bound is None:
                if not waiting:
                    emit({"standby": True})
                    waiting = True
                cancel.wait(POLL_S)
                continue
            waiting = False
            self._serve(bound, hold, emit)
            if hold.taken.is_set() and hold.taken_by is channel:
                break
            hold.taken.clear()
        return {}

    def _serve(self, bound: dict[socket.socket, tuple[str, int]], hold: _Hold, emit: Emit) -> None:
        """Accept on ``bound`` until the listen is cancelled or taken over."""
        mine: set[str] = set()
        try:
            emit({"listening": [[name, *s.getsockname()[:2]] for s, (name, _) in bound.items()]})
            while not hold.cancel.is_set() and not hold.taken.is_set():
                readable, _, _ = select.select(list(bound), [], [], POLL_S)
                self._expire(mine)
                for sock in readable:
                    with contextlib.suppress(OSError):
                        conn, _ = sock.accept()
                        conn_id = self._park(conn)
                        if conn_id is not None:
                            mine.add(conn_id)
                            emit({"accepted": conn_id, "listener": bound[sock][0]})
        finally:
            self._release(bound, hold)
            with self._lock:
                leftovers = [self._pending.pop(c, None) for c in mine]
            for entry in leftovers:
                if entry is not None:
                    entry[0].close()

    def _claim(
        self, listeners: list[tuple[str, str, int]], hold: _Hold, owns: Callable[[], bool]
    ) -> dict[socket.socket, tuple[str, int]] | None:
        """The bound sockets of ``listeners``; None when another listen holds
        one of the addresses and this one may not take it over."""
        fixed = [(host, port) for _, host, port in listeners if port]
        with self._lock:
            held = {a: h for a in fixed if (h := self._listening.get(a)) not in (None, hold)}
            if held and not owns():
                return None
            for address in fixed:
                self._listening[address] = hold
        # An earlier listen on the address belongs to a daemon that lost the
        # sandbox (another took it over, or it went without cancelling: killed,
        # its channel the attach stream that never closes). Left alone it would
        # hold the address for good. It lets go within a poll.
        for previous in set(held.values()):
            previous.take(hold.channel)
        bound: dict[socket.socket, tuple[str, int]] = {}
        try:
            for name, host, port in listeners:
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                sock = socket.socket(family, socket.SOCK_STREAM)
                bound[sock] = (name, port)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                self._bind(sock, host, port, hold.cancel, wait=bool(held))
                sock.listen(MAX_PENDING)
        except BaseException:
            self._release(bound, hold)
            raise
        return bound

    def _release(self, bound: dict[socket.socket, tuple[str, int]], hold: _Hold) -> None:
        for sock in bound:
            sock.close()
        with self._lock:
            for address, holder in list(self._listening.items()):
                if holder is hold:
                    del self._listening[address]

    @staticmethod
    def _bind(
        sock: socket.socket, host: str, port: int, cancel: threading.Event, *, wait: bool
    ) -> None:
        """Bind ``sock``; with ``wait``, while an earlier listen lets the address go.

        A listener the workload made is never touched: its address stays a Conflict.
        """
        deadline = time.monotonic() + (TAKEOVER_S if wait else 0)
        while True:
            try:
                sock.bind((host, port))
                return
            except OSError as exc:
                if time.monotonic() >= deadline or cancel.is_set():
                    raise Conflict(f"cannot listen on {host} port {port}: {exc}") from None
                time.sleep(POLL_S / 4)  # the earlier listen closes within a poll

    def _park(self, conn: socket.socket) -> str | None:
        with self._lock:
            if len(self._pending) >= MAX_PENDING:
                conn.close()
                return None
            conn_id = secrets.token_hex(8)
            self._pending[conn_id] = (conn, time.monotonic())
            return conn_id

    def _expire(self, mine: set[str]) -> None:
        now = time.monotonic()
        stale: list[socket.socket] = []
        with self._lock:
            for conn_id in list(mine):
                entry = self._pending.get(conn_id)
                if entry is None:
                    mine.discard(conn_id)
                elif now - entry[1] > PENDING_TIMEOUT_S:
                    del self._pending[conn_id]
                    mine.discard(conn_id)
                    stale.append(entry[0])
        for conn in stale:
            conn.close()

    def close(self) -> None:
        with self._lock:
            pipes = list(self._pipes.values())
            pending = [entry[0] for entry in self._pending.values()]
            self._pending.clear()
        for pipe in pipes:
            pipe.close(abort=True)
        for conn in pending:
            conn.close()


def _more(sock: socket.socket, data: bytes) -> tuple[bytes, bool]:
    """``data`` and whatever else the socket holds already, up to ``CHUNK``;
    True when its end is there too. A response's head, body and end often
    arrive together: sent as one event they cost one frame, one dispatch in
    the daemon and one gRPC message instead of three."""
    parts = [data]
    size = len(data)
    while size < CHUNK:
        try:
            more = sock.recv(CHUNK - size, socket.MSG_DONTWAIT)
        except OSError:  # nothing yet (BlockingIOError), or a reset the next recv reports
            break
        if not more:
            return b"".join(parts), True
        parts.append(more)
        size += len(more)
    return (data if len(parts) == 1 else b"".join(parts)), False


def listeners_arg(value: object) -> list[tuple[str, str, int]]:
    if not isinstance(value, list) or not 1 <= len(value) <= 8:
        raise InvalidArgument("listeners must be a list of 1-8 {name, host, port} objects")
    out: list[tuple[str, str, int]] = []
    for item in value:
        if not isinstance(item, Mapping):
            raise InvalidArgument("each listener must be an object with name, host and port")
        name = pipe_id(item.get("name"), "a listener's name")
        out.append(
            (name, loopback(item.get("host")), port_number(item.get("port"), allow_zero=True))
        )
    return out


# ------------------------------------------------------------ listening ports

_LISTEN = "0A"


def listening_ports(proc_net: str = "/proc/net") -> list[dict[str, Any]]:
    """The TCP ports something listens on in the sandbox (IPv4 and IPv6)."""
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    for name, family in (("tcp", 4), ("tcp6", 6)):
        try:
            with open(f"{proc_net}/{name}") as table:
                lines = table.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 4 or fields[3] != _LISTEN:
                continue
            address_hex, _, port_hex = fields[1].partition(":")
            host = _address(address_hex, family)
            port = int(port_hex, 16)
            seen.setdefault((host, port), {"host": host, "port": port})
    return sorted(seen.values(), key=lambda p: (p["port"], p["host"]))


def _address(hex_text: str, family: int) -> str:
    raw = bytes.fromhex(hex_text)
    # /proc/net prints each 32-bit word in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))

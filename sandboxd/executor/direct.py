"""The direct channel: a unix socket the daemon reaches without Docker's attach proxy.

Over the attach stream every frame crosses dockerd and containerd-shim (two
extra copies and a few hundred microseconds of CPU per call). The executor
therefore also listens on a unix socket in a private directory of its state
tmpfs (``<STATE_DIR>/<random>/s``, the directory root's and 0700: the
sandbox user cannot reach it). It names the path in its ``hello`` reply; the
daemon, root on the host, connects to it through ``/proc/<pid>/root`` and
checks the listener's credentials before it sends a byte.

Requests may come from stdin or from any direct connection, and each is
answered on the one it came on: several daemons (replicas) may each hold a
connection at once. A connection lives until its peer goes (a daemon that
dies closes its end; a relay's exec stream ending half-closes it). One a
peer never ends (a half-open stream) is not kept for ever either: at
``MAX_CONNECTIONS`` a new connection takes the place of the one heard from
least recently (a live daemon whose connection went only reconnects). Once
a hello retired every other connection; that made two live daemons take the
sandbox from each other on every reconnect. Nothing here may end the
executor: the accepting thread and each connection's reader survive every
error of their own.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import BinaryIO, Protocol

from sandboxd.executor import wire
from sandboxd.executor.relay import Relay, Watchdog

#: The socket's name inside the private directory (short: the daemon's path
#: to it goes through /proc/<pid>/root and a unix path holds 107 bytes).
SOCKET_NAME = "s"
#: Connections open at once (one per daemon replica, and a reconnect's
#: overlap); one more replaces the least recently heard (only root can
#: connect, but a loop of connects must not grow threads without end).
MAX_CONNECTIONS = 8
#: Bytes asked of a connection per read (a raw upload chunk in one or two).
READ_SIZE = 1 << 20
#: Socket buffers of a channel socket, at both ends (the daemon's too): a
#: 1 MiB raw chunk leaves in one send (root may exceed the sysctl cap;
#: otherwise the kernel clamps it, which is fine).
SOCKET_BUFFER = 4 << 20
_SO_SNDBUFFORCE, _SO_RCVBUFFORCE = 32, 33
_UCRED = struct.Struct("3i")


class Outlet(Protocol):
    """Where replies go: stdout or one direct connection. Called from many
    threads; each call writes one whole frame (an outlet orders its own)."""

    def write(self, parts: list[bytes]) -> None: ...


class PipeOutlet:
    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def write(self, parts: list[bytes]) -> None:
        with self._lock:
            for part in parts:
                self._out.write(part)
            self._out.flush()


class Connection:
    """One accepted direct connection: an outlet, and a reader on its own thread."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.closed = False
        #: Frames go out whole; the socket is closed only while nobody writes.
        self.lock = threading.Lock()
        #: When its daemon last sent anything (who goes first at capacity).
        self.heard = time.monotonic()

    def write(self, parts: list[bytes]) -> None:
        with self.lock:
            if self.closed:
                raise OSError("the direct connection is closed")
            if len(parts) == 1:
                self.sock.sendall(parts[0])
                return
            # A raw frame's header, payload and end in one system call (three
            # sendall calls cost two more, per event of a stream).
            views = [memoryview(part) for part in parts if part]
            while views:
                sent = self.sock.sendmsg(views)
                while views and sent >= len(views[0]):
                    sent -= len(views.pop(0))
                if sent:
                    views[0] = views[0][sent:]

    def shutdown(self) -> None:
        # Wakes the reader (EOF) and any writer blocked on a full buffer
        # (EPIPE); the reader closes the socket when it leaves.
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


#: Takes one request off a connection. With ``inline`` it may return the
#: call instead of queueing it: the reader runs it itself (``relay.Relay.run``).
Accept = Callable[[wire.Frame, Outlet, bool], Callable[[], None] | None]
#: Told of a connection that ended, once (its streams and transfers go).
Closed = Callable[[Outlet], None]
Log = Callable[[str], None]


class Listener:
    """The executor's end: accepts the daemon's connections and reads their requests."""

    def __init__(
        self,
        sock: socket.socket,
        path: str,
        *,
        accept: Accept,
        closed: Closed,
        log: Log,
        max_line: int,
    ) -> None:
        self._sock = sock
        self.path = path
        self._accept = accept
        self._closed = closed
        self._log = log
        self._max_line = max_line
        self._lock = threading.Lock()
        self._connections: list[Connection] = []
        self._watchdog = Watchdog()

    @classmethod
    def open(
        cls,
        state_dir: str,
        *,
        accept: Accept,
        closed: Closed,
        log: Log,
        max_line: int,
    ) -> Listener:
        """Bind in a fresh private directory; call as root (the daemon checks it)."""
        # os.urandom is what secrets.token_hex reads; importing secrets
        # (hmac, random) would cost every executor start.
        directory = os.path.join(state_dir, os.urandom(8).hex())
        # mkdir fails on anything already there (a planted symlink included).
        os.mkdir(directory, 0o700)
        os.chmod(directory, 0o700)
        path = os.path.join(directory, SOCKET_NAME)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.bind(path)
            # The daemon's peer check reads the credentials of this call.
            sock.listen(MAX_CONNECTIONS)
        except BaseException:
            sock.close()
            raise
        return cls(sock, path, accept=accept, closed=closed, log=log, max_line=max_line)

    def start(self) -> None:
        threading.Thread(target=self._accept_loop, name="direct-accept", daemon=True).start()

    def connections(self) -> int:
        with self._lock:
            return len(self._connections)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
        with self._lock:
            stale = list(self._connections)
        for connection in stale:
            connection.shutdown()

    # ------------------------------------------------------------ internals

    def _accept_loop(self) -> None:
        while True:
            try:
                sock, _ = self._sock.accept()
            except OSError as exc:
                if self._sock.fileno() < 0:
                    return  # closed
                # EMFILE and the like: the sandbox's condition; try again later.
                self._log(f"direct channel: accept failed: {exc}")
                time.sleep(0.1)
                continue
            try:
                self._admit(sock)
            except Exception as exc:  # one bad connection must not end the loop
                self._log(f"direct channel: connection dropped: {exc!r}")
                with contextlib.suppress(OSError):
                    sock.close()

    def _admit(self, sock: socket.socket) -> None:
        pid, uid, _ = _UCRED.unpack(
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        )
        if uid != 0:
            # Only root can reach the directory; this is the second line.
            self._log(f"direct channel: refused a connection of uid {uid} (pid {pid})")
            sock.close()
            return
        connection = Connection(sock)
        with self._lock:
            quietest = None
            if len(self._connections) >= MAX_CONNECTIONS:
                quietest = min(self._connections, key=lambda c: c.heard)
                self._connections.remove(quietest)
            self._connections.append(connection)
        if quietest is not None:
            # Its reader sees the end and tells the server (its streams go).
            self._log("direct channel: too many connections; closed the least recently heard")
            quietest.shutdown()
        widen_socket(sock)
        # A fresh deframer per connection: a frame a dead daemon left torn
        # died with its connection. Every reader of the connection shares it.
        deframer = wire.Deframer(max_line=self._max_line, max_raw=wire.REQUEST_RAW_MAX)

        def read_loop(relay: Relay, generation: int) -> None:
            self._read_loop(connection, deframer, relay, generation)

        relay = Relay(read_loop, self._watchdog, name="direct-read")
        try:
            relay.start()
        except BaseException:
            relay.stop()
            self._forget(connection)
            raise

    def _read_loop(
        self, connection: Connection, deframer: wire.Deframer, relay: Relay, generation: int
    ) -> None:
        try:
            # Calls a reader held up past the watchdog's patience left behind.
            if not relay.run(generation, []):
                return
            while not connection.closed:
                chunk = connection.sock.recv(READ_SIZE)
                if not chunk:
                    break
                connection.heard = time.monotonic()
                calls = []
                # Every frame is accepted (cancels and credits acted on)
                # before any call runs here.
                for frame in deframer.feed(chunk):
                    if not isinstance(frame, wire.Frame):
                        self._log(f"dropped bytes from the direct channel: {frame.reason}")
                    elif (call := self._accept(frame, connection, True)) is not None:
                        calls.append(call)
                if calls and not relay.run(generation, calls):
                    return  # a successor reads the connection now
        except Exception as exc:  # a reset, or a bug: this connection only
            if not connection.closed:
                self._log(f"direct channel: connection ended: {exc!r}")
        relay.stop()
        self._forget(connection)

    def _forget(self, connection: Connection) -> None:
        connection.shutdown()
        with self._lock, contextlib.suppress(ValueError):
            self._connections.remove(connection)
        with connection.lock, contextlib.suppress(OSError):
            connection.sock.close()
        try:
            self._closed(connection)
        except Exception as exc:  # the server's bug must not end the reader silently
            self._log(f"direct channel: ending a connection failed: {exc!r}")


def widen_socket(sock: socket.socket) -> None:
    for forced, plain in ((_SO_SNDBUFFORCE, socket.SO_SNDBUF), (_SO_RCVBUFFORCE, socket.SO_RCVBUF)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, forced, SOCKET_BUFFER)
        except OSError:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, plain, SOCKET_BUFFER)

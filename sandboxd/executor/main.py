"""The executor's main loop inside a workspace container.

Reads request lines from stdin (the Docker attach stream sandboxd holds)
and, with privilege separation, from the daemons' connections to its own
unix socket (executor.direct); runs each on a worker thread so a long
command never blocks a file read, and writes each reply to the channel its
request came on. Several daemons (replicas) may serve the sandbox at once:
request ids, cancels and credits are per channel, and a channel that closes
takes its own streams with it (executor.owners says who owns what the
sandbox has one of). Nothing a request carries can end this loop: every
failure becomes an error reply.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import fcntl
import functools
import io
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sandboxd.contract.errors import InvalidArgument, SandboxdError
from sandboxd.executor import direct, identity, wire
from sandboxd.executor.credits import MAX_GRANT, WINDOW, Credits
from sandboxd.executor.dispatch import Executor
from sandboxd.executor.pipes import pipe_id
from sandboxd.executor.tools import gilpause
from sandboxd.executor.wire import from_wire

#: A tmpfs of its own (see backends.docker), so a sandbox filling /tmp does
#: not take the tools' state and logs down with it.
STATE_DIR = "/run/sandboxd"
MAX_WORKERS = 256
#: Socket pipes (egress connections, forwarded ports) start only while fewer
#: calls than this run: however many connections a workload or a client
#: opens, the agent's own calls keep MAX_WORKERS - MAX_PIPE_WORKERS slots.
MAX_PIPE_WORKERS = 192
PIPE_OPS = frozenset({"pipe_connect", "pipe_listen", "pipe_attach", "pipe_write", "pipe_shutdown"})
#: Pipe calls tried first on the channel's reader thread (they never wait there).
_QUICK_PIPE_OPS = frozenset({"pipe_write", "pipe_shutdown"})
#: Tools whose work one file and the request bound: run by the thread that
#: read them off a direct connection, no hand-over to a worker
#: (executor.relay keeps the connection read if one is slow).
#: ``SANDBOXD_QUICK_INLINE=0`` in the container's environment turns it off
#: (A/B measurements: `python -m bench.throughput_ab inline`).
QUICK_TOOLS = (
    frozenset({"read", "write", "edit"})
    if os.environ.get("SANDBOXD_QUICK_INLINE", "1") != "0"
    else frozenset()
)
#: Bytes asked of stdin per read (a raw upload chunk arrives in one or two).
READ_SIZE = 1 << 20
MAX_REQUEST_LINE = 1 << 30
#: How this executor's modules were made: "compiled" from the bundle's
#: sources here, or "shipped" bytecode the bootstrap loaded (executor.bundle
#: sets it). Said in hello, so the daemon and tests can tell.
BYTECODE = "compiled"
#: The channel's pipes are widened to this (Linux caps it at pipe-max-size),
#: so a 1 MiB chunk crosses in one hand-over instead of sixteen.
PIPE_SIZE = 1 << 20
_PR_SET_DUMPABLE = 4


def _log(message: str) -> None:
    with contextlib.suppress(OSError):
        sys.stderr.write(f"executor: {message}\n")
        sys.stderr.flush()


def _harden() -> None:
    # Not dumpable: /proc/<executor>/fd becomes root-owned, so a process of
    # the sandbox user cannot open the executor's stdin/stdout and forge frames.
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


# Resource errors inside the sandbox are the sandbox's condition, not a bug.
_OS_ERROR_KINDS = {
    errno.ENOSPC: "resource_exhausted",
    errno.EDQUOT: "resource_exhausted",
    errno.EAGAIN: "resource_exhausted",
    errno.ENOMEM: "resource_exhausted",
    errno.EMFILE: "resource_exhausted",
    errno.ENFILE: "resource_exhausted",
}


class _Call:
    """A request accepted and not yet answered."""

    __slots__ = ("cancel", "credits", "stream")

    def __init__(self, stream: bool, credits: Credits | None) -> None:
        self.cancel = threading.Event()
        self.stream = stream
        self.credits = credits


class _Server:
    def __init__(self, executor: Executor, stdio: direct.Outlet) -> None:
        self.executor = executor
        #: The attach stream's outlet: stdin's replies go to stdout (a direct
        #: connection is its own outlet). Each outlet orders its own frames.
        self.stdio = stdio
        executor.owners.fallback = stdio
        #: (channel, request id) -> the call: ids are the channel's daemon's.
        self.calls: dict[tuple[direct.Outlet, int], _Call] = {}
        self.calls_lock = threading.Lock()
        #: Requests accepted and not yet answered. At MAX_WORKERS a new one is
        #: refused at once: the pool's queue would otherwise grow without
        #: bound behind calls that never finish.
        self.busy = 0
        self.busy_lock = threading.Lock()
        #: Requests answered with "out of threads" while queued in the pool.
        self.refused: set[tuple[direct.Outlet, int]] = set()
        # Workers act as the sandbox user (a no-op without privilege separation).
        self.pool = ThreadPoolExecutor(
            max_workers=MAX_WORKERS, thread_name_prefix="op", initializer=identity.become_user
        )

    def send(self, out: direct.Outlet, message: dict[str, Any]) -> None:
        """A frame without bytes (errors)."""
        self._framed(out, message.get("id"), lambda: [wire.encode(message)])

    def reply(self, out: direct.Outlet, request_id: int, body: str, fields: dict[str, Any]) -> None:
        """An ``ok`` or ``ev`` frame; its first bytes field travels raw."""
        self._framed(out, request_id, lambda: wire.frame({"id": request_id}, body, fields))

    def _framed(self, out: direct.Outlet, request_id: Any, make: Callable[[], list[bytes]]) -> None:
        try:
            parts = make()
        except SandboxdError as exc:
            # A reply that cannot be framed (text from the sandbox that is not
            # valid Unicode) still answers its request, or the caller would wait.
            error = {"kind": exc.kind, "message": exc.message}
            parts = [wire.encode({"id": request_id, "err": error})]
        try:
            out.write(parts)
        except OSError as exc:
            # The channel went (its daemon with it): nobody waits for this.
            _log(f"cannot write reply: {exc}")

    def closed(self, origin: direct.Outlet) -> None:
        """A channel ended: its streams have nobody to go to, and what it
        set up goes (its transfers; what it owned passes on, executor.owners).
        Its other calls finish: their results are kept for a replay by
        ``tool_call_id`` (executor.records) when its daemon asks again."""
        self._end_streams(origin)
        self.executor.channel_closed(origin)

    def _end_streams(self, origin: direct.Outlet) -> None:
        with self.calls_lock:
            streams = [c for (o, _), c in self.calls.items() if o is origin and c.stream]
        for call in streams:
            call.cancel.set()

    def accept(
        self, frame: wire.Frame | bytes, origin: direct.Outlet | None = None, inline: bool = False
    ) -> Callable[[], None] | None:
        """One request off a channel (a bytes line: a frame without payload).

        ``origin`` is the channel it came from (None: the attach stream). With
        ``inline``, a quick tool call is returned for the caller's thread to
        run instead of going to a worker.
        """
        out = self.stdio if origin is None else origin
        if isinstance(frame, bytes):
            frame = wire.Frame(frame.rstrip(b"\n"))
        try:
            message = wire.decode(frame.line)
        except ValueError:
            _log(f"dropped a malformed frame of {len(frame.line)} bytes")
            return None
        request_id = message.get("id")
        op = message.get("op")
        if op in ("cancel", "credit"):
            target = message.get("target")
            with self.calls_lock:
                call = self.calls.get((out, target)) if isinstance(target, int) else None
            count = message.get("n")
            if call is None:
                pass
            elif op == "cancel":
                call.cancel.set()
            elif call.credits is not None and isinstance(count, int) and 0 < count <= MAX_GRANT:
                call.credits.grant(count)
            return None
        if not isinstance(request_id, int) or not isinstance(op, str):
            _log("dropped a frame without an integer id and an op")
            return None
        if op == "ping":
            # Answered here, ahead of any worker: the daemon pings a quiet
            # channel before a call to learn whether this executor is alive.
            self.send(out, {"id": request_id, "ok": {}})
            return None
        if op == "hello":
            # A daemon (re)starting on this channel: streams an earlier one
            # left on it (a daemon killed on the attach stream, which stays
            # open) have nobody to go to.
            self._end_streams(out)
        args = message.get("args") or {}
        if not isinstance(args, dict):
            self.send(
                out,
                {
                    "id": request_id,
                    "err": {"kind": "invalid_argument", "message": "args must be an object"},
                },
            )
            return None
        if op in _QUICK_PIPE_OPS:
            quick = self._pipe_now(out, request_id, op, args, frame)
            if quick is None:
                return None
            frame = quick
        pipe = op in PIPE_OPS
        with self.busy_lock:
            full = self.busy >= (MAX_PIPE_WORKERS if pipe else MAX_WORKERS)
            if not full:
                self.busy += 1
        if full:
            refusal = (
                f"the sandbox's connections hold {MAX_PIPE_WORKERS} of its executor's "
                f"{MAX_WORKERS} slots; close some"
                if pipe
                else f"the sandbox is already running {MAX_WORKERS} calls; "
                "wait for some to finish, or restart the sandbox"
            )
            error = {"kind": "resource_exhausted", "message": refusal}
            self.send(out, {"id": request_id, "err": error})
            return None
        stream = bool(message.get("stream"))
        credits = None
        if stream:
            window = message.get("credits", WINDOW)
            if not isinstance(window, int) or not 0 < window <= MAX_GRANT:
                window = WINDOW
            credits = Credits(window)
        call = _Call(stream, credits)
        key = (out, request_id)
        with self.calls_lock:
            self.calls[key] = call
        if inline and not stream and op == "tool" and args.get("name") in QUICK_TOOLS:
            return functools.partial(self.serve, out, request_id, op, args, frame, call)
        try:
            self.pool.submit(self.serve, out, request_id, op, args, frame, call)
        except RuntimeError as exc:  # "can't start new thread": the pids limit is reached
            # The request is queued already (submit queues, then starts a
            # thread): a worker finishing its call takes it, so with workers
            # alive it only waits. Without any, it is refused, and marked so
            # that a worker started later does not run it after the refusal.
            if self.pool._threads:
                return None
            self.refused.add(key)
            self._done(key, call)
            self.send(
                out,
                {
                    "id": request_id,
                    "err": {
                        "kind": "resource_exhausted",
                        "message": f"the sandbox is out of processes or threads ({exc}); "
                        "stop some processes, or restart the sandbox",
                    },
                },
            )
        return None

    def _pipe_now(
        self, out: direct.Outlet, request_id: int, op: str, args: dict[str, Any], frame: wire.Frame
    ) -> wire.Frame | None:
        """A pipe write or half-close done here on the reader's thread when it
        needs no wait (the usual case: a socket with room), sparing the
        hand-over to a worker and back. None: answered; else the frame left
        for a worker (a write's unsent rest as its payload)."""
        try:
            key = pipe_id(args.get("pipe"))
            if op == "pipe_shutdown":
                result = self.executor.pipes.shutdown(key, wait=False)
                if result is None:
                    return frame
                self.reply(out, request_id, "ok", result)
                return None
            if frame.raw_key != "data" or frame.payload is None or "data" in args:
                return frame  # not the raw form: the worker decodes and checks it
            sent = self.executor.pipes.write_now(key, frame.payload)
            if sent < len(frame.payload):
                return dataclasses.replace(frame, payload=frame.payload[sent:])
            self.reply(out, request_id, "ok", {"written": sent})
        except SandboxdError as exc:
            self.send(out, {"id": request_id, "err": {"kind": exc.kind, "message": exc.message}})
        return None

    def serve(
        self,
        out: direct.Outlet,
        request_id: int,
        op: str,
        args: dict[str, Any],
        frame: wire.Frame,
        call: _Call,
    ) -> None:
        key = (out, request_id)
        if key in self.refused:
            self.refused.discard(key)
            return
        # Workers switch in their initializer; a reader thread running a
        # quick call acts as the sandbox user already (threads inherit the
        # identity of their starter). Made sure: a tool never runs as root.
        identity.become_user()
        cancel, credits = call.cancel, call.credits

        def emit(event: dict[str, Any]) -> None:
            # Without a credit the consumer is behind: wait (this call only).
            # A cancelled stream's events have nobody to go to.
            if credits is None or credits.take(cancel):
                self.reply(out, request_id, "ev", event)

        try:
            # Decoded here, on the call's own thread, not the reader's.
            args = from_wire(args)
            if frame.payload is not None:
                try:
                    args = wire.attach_raw(args, frame.raw_key, frame.payload)
                except ValueError as exc:
                    raise InvalidArgument(str(exc)) from None
            result = self.executor.handle(op, args, cancel, emit if call.stream else None, out)
            self.reply(out, request_id, "ok", result)
        except SandboxdError as exc:
            self.send(out, {"id": request_id, "err": {"kind": exc.kind, "message": exc.message}})
        except OSError as exc:
            kind = _OS_ERROR_KINDS.get(exc.errno or 0, "internal")
            self.send(out, {"id": request_id, "err": {"kind": kind, "message": f"{op}: {exc}"}})
        except Exception as exc:  # a bug must not end the loop
            _log(f"{op} failed: {exc!r}")
            error = {"kind": "internal", "message": f"{op}: {exc!r}"}
            self.send(out, {"id": request_id, "err": error})
        finally:
            self._done(key, call)

    def _done(self, key: tuple[direct.Outlet, int], call: _Call) -> None:
        with self.calls_lock:
            # A daemon that reused an id while its first call ran keeps the newer.
            if self.calls.get(key) is call:
                del self.calls[key]
        with self.busy_lock:
            self.busy -= 1


def _widen_pipes() -> None:
    for fd in (0, 1):
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)


def _separate(wanted: bool) -> None:
    """Started as root by the Docker backend: keep the state root's, act as the user.

    Without the bootstrap's ``separate`` argument (tests that run the bundle
    on a host) or when not root, everything runs as the current user.
    """
    if not wanted or os.geteuid() != 0:
        if wanted:
            _log("privilege separation asked for, but not started as root: off")
        os.makedirs(STATE_DIR, mode=0o700, exist_ok=True)
        return
    os.makedirs(STATE_DIR, mode=0o755, exist_ok=True)
    os.chmod(STATE_DIR, 0o755)
    identity.enable()
    _log(f"privilege separation on: workload runs as {identity.active()}")


def _listen(server: _Server) -> direct.Listener | None:
    """The direct channel, with privilege separation only (else None).

    Bound as root, in a directory only root can enter: the daemon checks
    that the listener is root, and the workload cannot connect.
    """
    if identity.active() is None:
        return None
    try:
        with identity.as_executor():
            listener = direct.Listener.open(
                STATE_DIR,
                accept=server.accept,
                closed=server.closed,
                log=_log,
                max_line=MAX_REQUEST_LINE,
            )
        listener.start()
    except Exception as exc:  # the attach stream still serves
        _log(f"no direct channel: {exc!r}")
        return None
    server.executor.direct_path = listener.path
    return listener


def main(stdin: io.BufferedReader, bundle_id: str, argv: Sequence[str] = ()) -> None:
    _harden()
    _separate(identity.SEPARATE in argv)
    executor = Executor(os.getcwd(), state_dir=STATE_DIR, bundle_id=bundle_id)
    executor.bytecode = BYTECODE
    _widen_pipes()
    stdio = direct.PipeOutlet(sys.stdout.buffer)
    server = _Server(executor, stdio)
    # Long walks give the GIL away only while another call is in flight.
    gilpause.contended = lambda: server.busy > 1
    listener = _listen(server)
    # Requests come from the daemon; the bound only keeps a broken one from
    # growing a line without end.
    deframer = wire.Deframer(max_line=MAX_REQUEST_LINE, max_raw=wire.REQUEST_RAW_MAX)
    while chunk := stdin.read1(READ_SIZE):
        for frame in deframer.feed(chunk):
            if isinstance(frame, wire.Frame):
                server.accept(frame, stdio)
            else:
                _log(f"dropped bytes from the channel: {frame.reason}")
    # stdin only closes when the container is being torn down.
    if listener is not None:
        listener.close()
    executor.close()

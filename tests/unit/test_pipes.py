"""Socket pipes end to end in one process: the daemon's ExecutorChannel wired
to a real executor server (executor.main._Server) through memory, and real
TCP sockets on this host's loopback playing the sandbox's servers and clients."""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from sandboxd.backends.shared import pipes
from sandboxd.backends.shared.channel import ExecutorChannel
from sandboxd.contract.errors import InvalidArgument, NotFound
from sandboxd.executor import credits, wire
from sandboxd.executor import pipes as executor_pipes
from sandboxd.executor.dispatch import Executor
from sandboxd.executor.main import _Server

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


class _Memory:
    """Both directions of a channel in memory: the daemon's source and sink,
    the executor's outlet."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._to_daemon: asyncio.Queue[bytes] = asyncio.Queue()
        self._deframer = wire.Deframer(max_line=1 << 30, max_raw=wire.REQUEST_RAW_MAX)
        self.server: _Server | None = None

    # the executor's outlet (called from its worker threads)
    def write_parts(self, parts: list[bytes]) -> None:
        data = b"".join(parts)
        # Workers still answering after a test ended have nobody to tell.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._to_daemon.put_nowait, data)

    # the daemon's source
    async def read(self) -> bytes:
        return await self._to_daemon.get()

    # the daemon's sink
    def write(self, data: bytes) -> None:
        assert self.server is not None
        for frame in self._deframer.feed(data):
            assert isinstance(frame, wire.Frame)
            self.server.accept(frame)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None


class _Outlet:
    def __init__(self, memory: _Memory) -> None:
        self._memory = memory

    def write(self, parts: list[bytes]) -> None:
        self._memory.write_parts(parts)


class Calls(pipes.PipeEndpoints):
    def __init__(self, channel: ExecutorChannel) -> None:
        self.channel = channel
        self.server: _Server | None = None

    async def call(self, op: str, args: Mapping[str, Any]) -> dict[str, Any]:
        return await self.channel.call(op, args, timeout=30)

    def stream(self, op: str, args: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]:
        return self.channel.stream(op, args)


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[Calls, Executor]]:
    memory = _Memory(asyncio.get_running_loop())
    executor = Executor(str(tmp_path), state_dir=str(tmp_path))
    server = _Server(executor, _Outlet(memory))
    memory.server = server
    channel = ExecutorChannel(memory, memory, name="pipes", max_line=1 << 30)
    calls = Calls(channel)
    calls.server = server
    yield calls, executor
    await channel.close()
    executor.close()
    server.pool.shutdown(wait=False, cancel_futures=True)


class TcpServer:
    """A loopback server on its own thread, one connection at a time."""

    def __init__(self, host: str = "127.0.0.1", *, mode: str = "echo", send: int = 0) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.port: int = self.sock.getsockname()[1]
        self.mode = mode
        self.to_send = send
        self.sent = 0
        self.received = bytearray()
        self.peer_closed = threading.Event()
        self.conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            conn, _ = self.sock.accept()
            self.conns.append(conn)
            if self.mode == "echo":
                # Echo until the peer half-closes, then answer once and close.
                while data := conn.recv(65536):
                    self.received += data
                conn.sendall(b"got %d bytes" % len(self.received))
                conn.close()
            elif self.mode == "flood":
                chunk = b"x" * 65536
                while self.sent < self.to_send:
                    self.sent += conn.send(chunk)
                conn.close()
            elif self.mode == "deaf":
                # Never reads; notices the peer's end (FIN) without reading.
                poll = select.poll()
                poll.register(conn, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
                while not poll.poll(50):
                    pass
                self.peer_closed.set()
            elif self.mode == "hold":
                with contextlib.suppress(OSError):
                    while conn.recv(65536):
                        pass
                self.peer_closed.set()
            elif self.mode == "speak-first":
                # Says its piece and half-closes, then still listens.
                conn.sendall(b"banner")
                conn.shutdown(socket.SHUT_WR)
                while data := conn.recv(65536):
                    self.received += data
                self.peer_closed.set()

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.close()


@pytest.fixture
def servers() -> Iterator[list[TcpServer]]:
    made: list[TcpServer] = []
    yield made
    for server in made:
        server.close()


async def _read_all(pipe: pipes.Pipe) -> bytes:
    out = bytearray()
    while chunk := await pipe.read():
        out += chunk
    return bytes(out)


async def _until(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
async def test_bytes_both_ways_and_half_close(
    pair: tuple[Calls, Executor], servers: list[TcpServer], host: str
) -> None:
    calls, _ = pair
    server = TcpServer(host)
    servers.append(server)
    pipe = await calls.connect_port(server.port, host)
    payload = bytes(range(256)) * 4096  # 1 MiB, over several writes
    await pipe.write(payload)
    await pipe.shutdown_write()
    # The server saw the end (half-close) and can still answer on its side.
    assert await _read_all(pipe) == b"got %d bytes" % len(payload)
    assert bytes(server.received) == payload
    await pipe.close()


async def test_the_first_bytes_go_with_the_connect(
    pair: tuple[Calls, Executor], servers: list[TcpServer]
) -> None:
    calls, _ = pair
    server = TcpServer()
    servers.append(server)
    writes: list[int] = []
    call = calls.call

    async def counted(op: str, args: Mapping[str, Any]) -> dict[str, Any]:
        if op == "pipe_write":
            writes.append(len(args["data"]))
        return await call(op, args)

    calls.call = counted  # type: ignore[method-assign]
    # Up to MAX_WRITE ride the connect: no pipe_write (no round trip) for them.
    pipe = await calls.connect_port(server.port, data=b"hello")
    assert writes == []
    await pipe.shutdown_write()
    assert await _read_all(pipe) == b"got 5 bytes"
    assert bytes(server.received) == b"hello"
    await pipe.close()
    # More than that: the rest follows in order, after the connect.
    server = TcpServer()
    servers.append(server)
    payload = bytes(range(256)) * 2048 + b"!"  # 512 KiB + 1
    pipe = await calls.connect_port(server.port, data=payload)
    assert sum(writes) == len(payload) - pipes.MAX_WRITE
    await pipe.write(b"tail")
    await pipe.shutdown_write()
    assert await _read_all(pipe) == b"got %d bytes" % (len(payload) + 4)
    assert bytes(server.received) == payload + b"tail"
    await pipe.close()


async def test_first_bytes_to_a_server_that_speaks_first_and_half_closes(
    pair: tuple[Calls, Executor], servers: list[TcpServer]
) -> None:
    calls, executor = pair
    server = TcpServer(mode="speak-first")
    servers.append(server)
    pipe = await calls.connect_port(server.port, data=b"first")
    # Its banner and its end arrive; the first bytes still reached it.
    assert await _read_all(pipe) == b"banner"
    await pipe.write(b" and more")
    await pipe.shutdown_write()
    await asyncio.to_thread(server.peer_closed.wait, 5)
    assert bytes(server.received) == b"first and more"
    await pipe.close()
    await _until(lambda: not executor.pipes._pipes)


async def test_the_sandbox_side_half_closes_first(
    pair: tuple[Calls, Executor], servers: list[TcpServer]
) -> None:
    calls, executor = pair
    server = TcpServer(mode="speak-first")
    servers.append(server)
    pipe = await calls.connect_port(server.port)
    assert await _read_all(pipe) == b"banner"
    # The server's end came first; the daemon's direction is still open.
    await pipe.write(b"late words")
    await pipe.shutdown_write()
    await asyncio.to_thread(server.peer_closed.wait, 5)
    assert bytes(server.received) == b"late words"
    await _until(lambda: not executor.pipes._pipes)
    await pipe.close()


async def test_nothing_listening_is_not_found(pair: tuple[Calls, Executor]) -> None:
    calls, executor = pair
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with pytest.raises(NotFound, match="nothing listens"):
        await calls.connect_port(port)
    assert not executor.pipes._pipes


@pytest.mark.parametrize("host", ["10.0.0.1", "example.com", "0.0.0.0", ""])
async def test_only_loopback(pair: tuple[Calls, Executor], host: str) -> None:
    calls, _ = pair
    with pytest.raises(InvalidArgument, match="loopback"):
        await calls.connect_port(80, host)


async def test_a_reader_that_never_reads_holds_back_only_its_socket(
    pair: tuple[Calls, Executor], servers: list[TcpServer]
) -> None:
    calls, _ = pair
    server = TcpServer(mode="flood", send=200 << 20)
    servers.append(server)
    pipe = await calls.connect_port(server.port)
    await asyncio.sleep(1.0)
    # The daemon holds at most a window of chunks; the rest waits in the
    # server's socket (kernel buffers) and in the server itself.
    in_daemon = (credits.PIPE_WINDOW + 2) * executor_pipes.CHUNK
    assert in_daemon <= 5 << 20
    assert server.sent < in_daemon + (16 << 20), server.sent
    # The channel still serves other calls at once.
    started = time.monotonic()
    assert "ports" in await calls.call("ports_list", {})
    assert time.monotonic() - started < 1.0
    # And the pipe resumes when read.
    first = await pipe.read()
    assert first and set(first) == {ord("x")}
    await pipe.close()


async def test_a_server_that_never_reads_holds_back_only_its_writer(
    pair: tuple[Calls, Executor], servers: list[TcpServer]
) -> None:
    calls, executor = pair
    server = TcpServer(mode="deaf")
    servers.append(server)
    pipe = await calls.connect_port(server.port)
    written = 0

    async def flood() -> None:
        nonlocal written
        chunk = b"y" * pipes.MAX_WRITE
        while True:
            await pipe.write(chunk)
            written += len(chunk)

    writer = asyncio.create_task(flood())
    await asyncio.sleep(1.0)
    # Kernel buffers take some; the writer then waits on its own pipe.
    assert not writer.done()
    assert written < 64 << 20, written
    assert "ports" in await calls.call("ports_list", {})
    # Closing the pipe frees the blocked write and the server sees the end.
    await pipe.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(writer, 5)
    assert writer.done()
    await asyncio.to_thread(server.peer_closed.wait, 5)
    assert server.peer_closed.is_set()
    await _until(lambda: not executor.pipes._pipes)


async def test_close_aborts_the_sandbox_side(
    pair: tuple[Calls, Executor], servers: list[TcpServer]
) -> None:
    calls, executor = pair
    server = TcpServer(mode="hold")
    servers.append(server)
    pipe = await calls.connect_port(server.port)
    await pipe.write(b"hello")
    assert executor.pipes._pipes
    await pipe.close()
    await pipe.close()  # idempotent
    assert await pipe.read() == b""
    await asyncio.to_thread(server.peer_closed.wait, 5)
    assert server.peer_closed.is_set()
    await _until(lambda: not executor.pipes._pipes)


async def test_accepted_connections_become_pipes(pair: tuple[Calls, Executor]) -> None:
    calls, executor = pair
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    accepted = calls.accept_pipes([pipes.Listener("http", "127.0.0.1", port)])

    def client() -> bytes:
        for _ in range(100):
            try:
                sock = socket.create_connection(("127.0.0.1", port))
                break
            except ConnectionRefusedError:
                time.sleep(0.05)
        sock.sendall(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
        sock.shutdown(socket.SHUT_WR)
        answer = bytearray()
        while data := sock.recv(65536):
            answer += data
        sock.close()
        return bytes(answer)

    answer = asyncio.create_task(asyncio.to_thread(client))
    name, pipe = await anext(aiter(accepted))
    assert name == "http"
    assert await _read_all(pipe) == b"CONNECT example.com:443 HTTP/1.1\r\n\r\n"
    await pipe.write(b"HTTP/1.1 403 Forbidden\r\n\r\n")
    await pipe.shutdown_write()
    assert await answer == b"HTTP/1.1 403 Forbidden\r\n\r\n"
    await pipe.close()
    await accepted.aclose()  # type: ignore[attr-defined]
    await _until(lambda: not executor.pipes._pipes)


async def test_unattached_connections_are_bounded_and_expire(
    pair: tuple[Calls, Executor], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls, executor = pair
    monkeypatch.setattr(executor_pipes, "PENDING_TIMEOUT_S", 0.5)
    events = calls.stream(
        "pipe_listen", {"listeners": [{"name": "socks", "host": "127.0.0.1", "port": 0}]}
    )
    listening = await anext(events)
    port = listening["listening"][0][2]
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    seen = [await anext(events) for _ in clients]
    assert all(e["listener"] == "socks" for e in seen)
    assert len(executor.pipes._pending) == 3
    # Nobody attaches: closed after the timeout (the client sees the end).
    await _until(lambda: not executor.pipes._pending)
    for client in clients:
        client.settimeout(5)
        assert client.recv(1) == b""
        client.close()
    await events.aclose()  # type: ignore[attr-defined]


async def test_writes_to_a_pipe_that_is_not_open_are_refused(
    pair: tuple[Calls, Executor],
) -> None:
    calls, _ = pair
    with pytest.raises(NotFound):
        await calls.call("pipe_write", {"pipe": "nope", "data": b"x"})
    with pytest.raises(InvalidArgument):
        await calls.call("pipe_write", {"pipe": "nope", "data": b"x" * (pipes.MAX_WRITE + 1)})
    with pytest.raises(InvalidArgument, match="streamed"):
        await calls.call("pipe_attach", {"pipe": "p", "conn": "forged"})
    with pytest.raises(NotFound):
        await anext(calls.stream("pipe_attach", {"pipe": "p", "conn": "forged"}))


async def test_listening_ports_reads_both_tables(tmp_path: Path) -> None:
    (tmp_path / "tcp").write_text(
        "  sl  local_address rem_address   st\n"
        "   0: 0100007F:1F90 00000000:0000 0A 0\n"
        "   1: 0100007F:1F91 0100007F:D000 01 0\n"
    )
    (tmp_path / "tcp6").write_text(
        "  sl  local_address rem_address   st\n"
        "   0: 00000000000000000000000001000000:0BB8 00000000000000000000000000000000:0000 0A 0\n"
    )
    assert executor_pipes.listening_ports(str(tmp_path)) == [
        {"host": "::1", "port": 3000},
        {"host": "127.0.0.1", "port": 8080},
    ]


async def test_listening_ports_sees_a_real_listener() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    port = sock.getsockname()[1]
    try:
        assert {"host": "127.0.0.1", "port": port} in executor_pipes.listening_ports()
    finally:
        sock.close()


@pytest.mark.parametrize("end", ["close", "shutdown_write"])
async def test_a_pipe_whose_sandbox_side_ended_is_let_go_at_once(
    pair: tuple[Calls, Executor],
    servers: list[TcpServer],
    monkeypatch: pytest.MonkeyPatch,
    end: str,
) -> None:
    # With the poll made long, only a wake-up frees the relay's thread in time
    # (after a close it waited a poll before: the close case failed so).
    monkeypatch.setattr(executor_pipes, "POLL_S", 30.0)
    calls, executor = pair
    server = TcpServer(mode="speak-first")
    servers.append(server)
    pipe = await calls.connect_port(server.port)
    assert await _read_all(pipe) == b"banner"
    await getattr(pipe, end)()
    await _until(lambda: not executor.pipes._pipes)
    if end == "shutdown_write":  # a clean end: the server reads its EOF
        await asyncio.to_thread(server.peer_closed.wait, 5)
        assert server.peer_closed.is_set()
    await pipe.close()


def test_a_listen_takes_over_its_address_from_an_earlier_listen_nobody_cancelled() -> None:
    """A daemon killed (or a replica replaced) leaves its pipe_listen running in
    the executor; the next daemon's listen of the same address takes it over,
    while an address the workload holds stays a Conflict. How checked: without
    the takeover the second listen is a Conflict (address in use)."""
    from sandboxd.contract.errors import Conflict

    listeners = executor_pipes.Pipes()
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    events: dict[str, list[Mapping[str, Any]]] = {"old": [], "new": []}
    cancels = {"old": threading.Event(), "new": threading.Event()}
    ended: dict[str, object] = {}

    def run(who: str) -> None:
        ended[who] = listeners.listen(
            [("proxy", "127.0.0.1", port)], cancels[who], events[who].append
        )

    old = threading.Thread(target=run, args=("old",))
    old.start()
    deadline = time.monotonic() + 5
    while not events["old"] and time.monotonic() < deadline:
        time.sleep(0.01)
    new = threading.Thread(target=run, args=("new",))
    new.start()
    old.join(timeout=5)
    assert ended == {"old": {}}  # the earlier listen let go
    while not events["new"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert events["new"] == [{"listening": [["proxy", "127.0.0.1", port]]}]
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    cancels["new"].set()
    new.join(timeout=5)
    # An address a workload's own server holds is not the executor's to take.
    with socket.socket() as workload:
        workload.bind(("127.0.0.1", 0))
        workload.listen(1)
        taken = workload.getsockname()[1]
        with pytest.raises(Conflict, match=f"cannot listen on 127.0.0.1 port {taken}"):
            listeners.listen([("proxy", "127.0.0.1", taken)], threading.Event(), lambda e: None)


def test_bytes_already_there_and_the_end_make_one_event() -> None:
    # A response's head, body and end often arrive together: one event, one
    # frame, one gRPC message instead of three.
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(b"head ")
        theirs.sendall(b"body")
        assert executor_pipes._more(ours, ours.recv(2)) == (b"head body", False)
        theirs.sendall(b"tail")
        theirs.shutdown(socket.SHUT_WR)
        assert executor_pipes._more(ours, ours.recv(1)) == (b"tail", True)


async def test_a_pipe_takes_its_last_bytes_and_its_end_in_one_event() -> None:
    async def events() -> AsyncIterator[dict[str, Any]]:
        yield {"connected": True}
        yield {"data": b"last", "eof": True}
        yield {"result": {"eof": True}}

    pipe = pipes.ChannelPipe(None, "p", events())  # type: ignore[arg-type]
    assert not pipe.opened
    await pipe.wait_opened()
    assert pipe.opened and not pipe.at_eof
    assert await pipe.read() == b"last"
    assert pipe.at_eof
    assert await pipe.read() == b""
    await pipe.close()


async def test_writes_and_the_half_close_need_no_worker_thread(
    pair: tuple[Calls, Executor], servers: list[TcpServer]
) -> None:
    # A socket with room takes them on the channel's reader thread: no hand-over.
    calls, _ = pair
    assert calls.server is not None
    server = TcpServer()
    servers.append(server)
    pipe = await calls.connect_port(server.port)
    handed_over: list[str] = []
    pool = calls.server.pool
    submit = pool.submit

    def recording(fn: Any, *args: Any) -> Any:
        handed_over.append(args[1])
        return submit(fn, *args)

    pool.submit = recording  # type: ignore[method-assign]
    await pipe.write(b"x" * 1000)
    await pipe.write(b"y" * 1000)
    await pipe.shutdown_write()
    assert await _read_all(pipe) == b"got 2000 bytes"
    assert bytes(server.received) == b"x" * 1000 + b"y" * 1000
    assert handed_over == []
    await pipe.close()

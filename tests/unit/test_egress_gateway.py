"""The egress gateway's protocol work, over in-memory pipes and real upstream sockets.

The sandbox side is a fake pipe (unit tier); upstream servers are real
sockets on loopback addresses the policy names explicitly (127.0.0.2 allowed,
127.0.0.3 not). The hostile tier runs the same through real sandboxes.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from ipaddress import ip_address
from pathlib import Path

import pytest

from sandboxd.backends.shared.pipes import Listener
from sandboxd.contract.network import NetworkDecision, NetworkPolicy
from sandboxd.egress.gateway import PHRASE_REASON_MAX, Gateway, status_line
from sandboxd.egress.limits import Limits, LoopPacer, RateLimiter
from sandboxd.egress.precedence import Precedence
from sandboxd.egress.resolver import HostsResolver

pytestmark = pytest.mark.anyio

ALLOWED = "127.0.0.2"
DENIED = "127.0.0.3"


def _a_port_free_on_both() -> int:
    """A port both upstream addresses can listen on: other test runs (the
    per-Python ones) share this host's loopback at the same time."""
    for _ in range(50):
        with socket.socket() as first, socket.socket() as second:
            first.bind((ALLOWED, 0))
            port = int(first.getsockname()[1])
            with contextlib.suppress(OSError):
                second.bind((DENIED, port))
                return port
    raise RuntimeError("no port free on both loopback addresses")


PORT = _a_port_free_on_both()
P = b"%d" % PORT


class MemPipe:
    """The daemon's side of a pipe; the test drives the sandbox's side."""

    def __init__(self) -> None:
        self.to_daemon: asyncio.Queue[bytes] = asyncio.Queue()
        self.to_sandbox: asyncio.Queue[bytes] = asyncio.Queue()
        self.closed = False

    async def read(self) -> bytes:
        if self.closed:
            return b""
        return await self.to_daemon.get()

    async def write(self, data: bytes) -> None:
        if self.closed:
            raise ConnectionError("closed")
        await self.to_sandbox.put(bytes(data))

    async def shutdown_write(self) -> None:
        await self.to_sandbox.put(b"")

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self.to_sandbox.put(b"")
            await self.to_daemon.put(b"")

    # the sandbox's side
    def send(self, data: bytes) -> None:
        self.to_daemon.put_nowait(data)

    def send_eof(self) -> None:
        self.to_daemon.put_nowait(b"")

    async def recv_all(self, timeout: float = 5) -> bytes:
        out = bytearray()
        async with asyncio.timeout(timeout):
            while chunk := await self.to_sandbox.get():
                out += chunk
        return bytes(out)

    async def recv(self, n: int, timeout: float = 5) -> bytes:
        out = bytearray()
        async with asyncio.timeout(timeout):
            while len(out) < n:
                chunk = await self.to_sandbox.get()
                if not chunk:
                    break
                out += chunk
        return bytes(out)


@dataclass
class Registry:
    policy: NetworkPolicy
    entries: list[NetworkDecision] = field(default_factory=list)

    def current(self, instance_id: str) -> NetworkPolicy:
        return self.policy

    def record(self, instance_id: str, entry: NetworkDecision) -> None:
        self.entries.append(entry)


class Harness:
    def __init__(self, gateway: Gateway, registry: Registry) -> None:
        self.gateway = gateway
        self.registry = registry
        self.incoming: asyncio.Queue[tuple[str, MemPipe]] = asyncio.Queue()

    async def accept(self, listeners: Sequence[Listener]) -> AsyncIterator[tuple[str, MemPipe]]:
        assert [x.port for x in listeners] == [3128, 1080]
        while True:
            yield await self.incoming.get()

    def open(self, listener: str = "http") -> MemPipe:
        pipe = MemPipe()
        self.incoming.put_nowait((listener, pipe))
        return pipe


@pytest.fixture
async def upstream() -> AsyncIterator[dict[str, list[bytes]]]:
    """Echo servers on 127.0.0.2 and 127.0.0.3: "OK " then what they read, until EOF."""
    seen: dict[str, list[bytes]] = {ALLOWED: [], DENIED: []}

    def serve(address: str):  # type: ignore[no-untyped-def]
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            data = await reader.read(1 << 20)
            seen[address].append(data)
            writer.write(b"OK " + data)
            with contextlib.suppress(Exception):
                while more := await reader.read(1 << 16):
                    writer.write(more)
                await writer.drain()
            writer.close()

        return handler

    servers = [await asyncio.start_server(serve(a), a, PORT) for a in (ALLOWED, DENIED)]
    yield seen
    for server in servers:
        server.close()


@pytest.fixture
def hosts(tmp_path: Path) -> Path:
    path = tmp_path / "hosts"
    path.write_text(f"{ALLOWED} allowed.test\n{DENIED} denied.test rebind.test\n")
    return path


@contextlib.asynccontextmanager
async def running(
    hosts: Path,
    policy: NetworkPolicy,
    limits: Limits | None = None,
    interceptor: object = None,
    precedence: Precedence | None = None,
) -> AsyncIterator[Harness]:
    registry = Registry(policy)
    harness = Harness(None, registry)  # type: ignore[arg-type]
    gateway = Gateway(
        "box",
        harness.accept,  # type: ignore[arg-type]
        registry,
        registry,
        HostsResolver(hosts),
        limits or Limits(),
        interceptor=interceptor,  # type: ignore[arg-type]
        own=frozenset(),
        precedence=precedence,
    )
    harness.gateway = gateway
    task = asyncio.create_task(gateway.serve())
    try:
        yield harness
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# The name, and the loopback address the tests serve it on (a special range: named explicitly).
POLICY = NetworkPolicy(mode="allow", allow=("allowed.test", "rebind.test", ALLOWED))


async def test_connect_to_an_allowed_host_is_relayed(
    hosts: Path, upstream: dict[str, list[bytes]]
) -> None:
    async with running(hosts, POLICY) as h:
        pipe = h.open()
        pipe.send(
            b"CONNECT allowed.test:"
            + P
            + b" HTTP/1.1\r\nHost: allowed.test:"
            + P
            + b"\r\n\r\nhello"
        )
        assert await pipe.recv(39) == b"HTTP/1.1 200 Connection established\r\n\r\n"
        pipe.send_eof()
        assert await pipe.recv_all() == b"OK hello"
        (entry,) = h.registry.entries
        assert (entry.host, entry.port, entry.address, entry.allowed, entry.rule, entry.via) == (
            "allowed.test",
            PORT,
            ALLOWED,
            True,
            ALLOWED,
            "connect",
        )


async def test_a_refused_connect_says_why(hosts: Path, upstream: dict[str, list[bytes]]) -> None:
    async with running(hosts, POLICY) as h:
        pipe = h.open()
        pipe.send(b"CONNECT denied.test:" + P + b" HTTP/1.1\r\n\r\n")
        answer = await pipe.recv_all()
        # The status line says why too: pip shows it, never a refused CONNECT's body.
        assert answer.startswith(
            b"HTTP/1.1 403 Forbidden (sandboxd egress: denied.test is not in this sandbox's "
            b"allow list)\r\n"
        )
        assert answer.endswith(
            b"\r\n\r\nsandboxd egress: denied.test is not in this sandbox's allow list\n"
        )
        assert [(e.allowed, e.address) for e in h.registry.entries] == [(False, "")]
        # An allowed name whose address is not: the address decides.
        pipe = h.open()
        pipe.send(b"CONNECT rebind.test:" + P + b" HTTP/1.1\r\n\r\n")
        assert (await pipe.recv_all()).endswith(
            b"sandboxd egress: rebind.test resolves to 127.0.0.3, a loopback address: "
            b"only an allow rule naming that address or range opens it\n"
        )
        pipe = h.open()
        pipe.send(b"CONNECT 127.0.0.3:" + P + b" HTTP/1.1\r\n\r\n")
        assert b"127.0.0.3, a loopback address" in await pipe.recv_all()
        assert upstream[DENIED] == []


@pytest.mark.parametrize(
    ("head", "why"),
    [
        (b"CONNECT allowed.test:" + P + b"\r\nX HTTP/1.1\r\n\r\n", b"not an HTTP/1.x request line"),
        (b"CONNECT allowed.test\x00.evil:" + P + b" HTTP/1.1\r\n\r\n", b"NUL"),
        (b"CONNECT allowed.test:" + P + b" HTTP/1.1\nHost: x\r\n\r\n", b"bare CR or LF"),
        (b"CONNECT 2130706433:" + P + b" HTTP/1.1\r\n\r\n", b"IPv4 address in another form"),
        (b"CONNECT 0x7f.1:" + P + b" HTTP/1.1\r\n\r\n", b"IPv4 address in another form"),
        (
            b"GET http://allowed.test:" + P + b"/ HTTP/1.1\r\nHost: denied.test:" + P + b"\r\n\r\n",
            b"names another host than the URL",
        ),
        (b"GET https://allowed.test/ HTTP/1.1\r\n\r\n", b"https goes through CONNECT"),
    ],
    # The same names on every run, whichever port the upstreams got.
    ids=lambda value: value.replace(P, b"PORT").decode("latin-1"),
)
async def test_malformed_requests_are_refused(
    hosts: Path, upstream: dict[str, list[bytes]], head: bytes, why: bytes
) -> None:
    async with running(hosts, POLICY) as h:
        pipe = h.open()
        pipe.send(head)
        answer = await pipe.recv_all()
        assert answer.startswith(b"HTTP/1.1 400 Bad Request (sandboxd egress: ")
        assert why in answer
        assert answer.count(b"\r\n\r\n") == 1  # what the request held never splits the head
        assert upstream[ALLOWED] == upstream[DENIED] == []


def test_the_status_line_carries_a_printable_reason_only() -> None:
    """The reason goes into the head: a CR, LF, NUL or non-ASCII character
    from anywhere becomes ``?`` (no header injected into the sandbox's own
    client), and a long one is cut (the body keeps it whole)."""
    line = status_line(400, "x\r\nSet-Cookie: a=b\x00 \u0430llowed.test")
    assert line == "HTTP/1.1 400 Bad Request (sandboxd egress: x??Set-Cookie: a=b? ?llowed.test)"
    long = status_line(403, "y" * 1000)
    assert len(long) < PHRASE_REASON_MAX + 50 and long.endswith("...)")
    assert status_line(418, "why").startswith("HTTP/1.1 418 Error (")


async def test_plain_http_goes_upstream_in_origin_form(
    hosts: Path, upstream: dict[str, list[bytes]]
) -> None:
    async with running(hosts, POLICY) as h:
        pipe = h.open()
        pipe.send(
            b"GET http://allowed.test:"
            + P
            + b"/a?b=1 HTTP/1.1\r\nHost: allowed.test:"
            + P
            + b"\r\n"
            b"Proxy-Authorization: x\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n"
        )
        pipe.send_eof()
        answer = await pipe.recv_all()
        assert answer == b"OK " + (
            b"GET /a?b=1 HTTP/1.1\r\nHost: allowed.test:" + P + b"\r\nAccept: */*\r\n"
            b"Connection: close\r\n\r\n"
        )
        assert h.registry.entries[-1].via == "http"


def _socks_request(host: bytes, port: int, kind: int = 3) -> bytes:
    address = bytes((len(host),)) + host if kind == 3 else host
    return b"\x05\x01\x00" + bytes((5, 1, 0, kind)) + address + struct.pack("!H", port)


async def test_socks5_connects_and_refuses_by_ruleset(
    hosts: Path, upstream: dict[str, list[bytes]]
) -> None:
    async with running(hosts, POLICY) as h:
        pipe = h.open("socks")
        pipe.send(_socks_request(b"allowed.test", PORT) + b"hi")
        assert await pipe.recv(2) == b"\x05\x00"
        assert (await pipe.recv(10))[:2] == b"\x05\x00"
        pipe.send_eof()
        assert await pipe.recv_all() == b"OK hi"
        for request in (
            _socks_request(b"denied.test", PORT),
            _socks_request(ip_address(DENIED).packed, PORT, kind=1),
            _socks_request(ip_address("::ffff:" + DENIED).packed, PORT, kind=4),
        ):
            pipe = h.open("socks")
            pipe.send(request)
            assert await pipe.recv(2) == b"\x05\x00"
            assert (await pipe.recv(10))[:2] == b"\x05\x02"  # not allowed by ruleset
        # UDP ASSOCIATE is not offered.
        pipe = h.open("socks")
        pipe.send(b"\x05\x01\x00\x05\x03\x00\x01\x00\x00\x00\x00\x00\x00")
        assert await pipe.recv(2) == b"\x05\x00"
        assert (await pipe.recv(10))[:2] == b"\x05\x07"
    assert upstream[DENIED] == []


def _client_hello(server_name: str) -> bytes:
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_name)
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


async def test_a_tunnel_whose_sni_names_another_host_is_cut(
    hosts: Path, upstream: dict[str, list[bytes]]
) -> None:
    async with running(hosts, POLICY) as h:
        pipe = h.open()
        hello = _client_hello("evil.test")
        # Sent in two pieces: the check waits for the whole record.
        pipe.send(b"CONNECT allowed.test:" + P + b" HTTP/1.1\r\n\r\n" + hello[:20])
        assert await pipe.recv(39) == b"HTTP/1.1 200 Connection established\r\n\r\n"
        pipe.send(hello[20:])
        assert await pipe.recv_all() == b""
        assert upstream[ALLOWED] == []
        assert h.registry.entries[-1].reason == (
            "the TLS server name (SNI) 'evil.test' is not allowed.test, the host this tunnel "
            "was allowed to"
        )
        pipe = h.open()
        hello = _client_hello("Allowed.Test")
        pipe.send(b"CONNECT allowed.test:" + P + b" HTTP/1.1\r\n\r\n" + hello)
        assert await pipe.recv(39) == b"HTTP/1.1 200 Connection established\r\n\r\n"
        pipe.send_eof()
        assert (await pipe.recv_all()) == b"OK " + hello


async def test_a_policy_change_closes_the_live_connections_it_forbids(
    hosts: Path, upstream: dict[str, list[bytes]]
) -> None:
    async with running(hosts, POLICY) as h:
        pipe = h.open()
        pipe.send(b"CONNECT allowed.test:" + P + b" HTTP/1.1\r\n\r\nx")
        assert await pipe.recv(43) == b"HTTP/1.1 200 Connection established\r\n\r\nOK x"
        h.registry.policy = NetworkPolicy(mode="allow", allow=POLICY.allow, deny=("allowed.test",))
        h.gateway.policy_changed()
        assert await pipe.recv_all() == b""  # the end, at once
        assert h.registry.entries[-1].reason == (
            "closed by a policy change: allowed.test is denied by rule 'allowed.test'"
        )
        assert h.registry.entries[-1].via == "policy"


async def test_mode_none_refuses(hosts: Path, upstream: dict[str, list[bytes]]) -> None:
    async with running(hosts, NetworkPolicy()) as h:
        pipe = h.open()
        pipe.send(b"CONNECT allowed.test:" + P + b" HTTP/1.1\r\n\r\n")
        assert b"network policy is none" in await pipe.recv_all()


async def test_connections_over_the_limit_are_answered_503(
    hosts: Path, upstream: dict[str, list[bytes]]
) -> None:
    async with running(hosts, POLICY, Limits(max_connections=2)) as h:
        held = [h.open(), h.open()]
        await asyncio.sleep(0.05)
        pipe = h.open()
        answer = await pipe.recv_all()
        assert answer.startswith(b"HTTP/1.1 503 ")
        assert b"SANDBOXD_EGRESS_MAX_CONNECTIONS" in answer
        for p in held:
            await p.close()


async def test_an_interceptor_takes_the_flows_it_wants(
    hosts: Path, upstream: dict[str, list[bytes]]
) -> None:
    taken: list[tuple[str, str, int, bool]] = []

    class Interceptor:
        def wants(self, instance_id: str, host: str) -> bool:
            return host == "allowed.test"

        async def relay(
            self,
            instance_id: str,
            host: str,
            port: int,
            sandbox: MemPipe,
            upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
            *,
            tls: bool,
            initial: bytes = b"",
            meter: object = None,
        ) -> None:
            taken.append((instance_id, host, port, tls))
            reader, writer = upstream
            writer.write(initial.replace(b"PLACEHOLDER", b"real"))
            await writer.drain()
            writer.write_eof()
            await sandbox.write(await reader.read(100))

    async with running(hosts, POLICY, interceptor=Interceptor()) as h:
        pipe = h.open()
        pipe.send(
            b"GET http://allowed.test:" + P + b"/ HTTP/1.1\r\nAuthorization: PLACEHOLDER\r\n\r\n"
        )
        assert b"Authorization: real" in await pipe.recv_all()
        assert taken == [("box", "allowed.test", PORT, False)]


async def test_relayed_bytes_wait_for_another_sandboxs_tool_call(
    hosts: Path, upstream: dict[str, list[bytes]]
) -> None:
    class Slow(Precedence):
        HOLD_S = MAX_WAIT_S = 5.0

    precedence = Slow()
    async with running(hosts, POLICY, precedence=precedence) as h:
        pipe = h.open()
        with precedence.call("another-box"):
            pipe.send(b"CONNECT allowed.test:" + P + b" HTTP/1.1\r\n\r\nhello")
            assert await pipe.recv(39) == b"HTTP/1.1 200 Connection established\r\n\r\n"
            await asyncio.sleep(0.2)
            assert upstream[ALLOWED] == []  # "hello" waits for the call
        pipe.send_eof()
        assert await pipe.recv_all() == b"OK hello"


async def test_the_pacer_holds_relays_back_only_when_several_sandboxes_relay() -> None:
    pacer = LoopPacer(threshold_s=0.001)
    try:
        await pacer.pace("a")
        pacer.lag = 0.02  # the loop runs 20 ms late
        started = time.monotonic()
        for _ in range(5):
            await pacer.pace("a")  # one sandbox alone: never held
        assert time.monotonic() - started < 0.02
        pacer.lag = 0.02
        await pacer.pace("b")
        started = time.monotonic()
        pacer.lag = 0.02
        await pacer.pace("a")  # two relaying: each chunk waits twice the lag
        assert time.monotonic() - started >= 0.035
    finally:
        pacer.close()


async def test_the_byte_rate_limit_holds_a_sandbox_to_its_rate() -> None:
    limiter = RateLimiter(10_000)  # bytes per second, one second of burst
    started = time.monotonic()
    await limiter.take(10_000)  # the burst: at once
    assert time.monotonic() - started < 0.05
    await limiter.take(5_000)  # half a second more
    assert 0.4 <= time.monotonic() - started < 1.0
    unlimited = RateLimiter(0)
    started = time.monotonic()
    await unlimited.take(1 << 30)
    assert time.monotonic() - started < 0.05

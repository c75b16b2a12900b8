"""One sandbox's egress gateway: the proxies its workload connects out through.

The container has no network. The executor listens on the sandbox's
loopback (``backends.shared.proxy_env``: the HTTP proxy and SOCKS5) and hands
each connection to the daemon as a pipe (``Workspace.accept_pipes``); here,
in the daemon, the request is read (CONNECT / absolute-form HTTP / SOCKS5),
the name resolved (``resolver``), the policy asked about the name and every
address (``rules.Ruleset.decide``), and the connection made to an address
that was allowed, never to the name again. A TLS tunnel's ClientHello must
name the host that was allowed (SNI). Every decision goes to the sandbox's
log; a policy change closes the live connections it now forbids.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import Protocol

from sandboxd.backends.shared.pipes import MAX_WRITE, Listener, Pipe
from sandboxd.backends.shared.proxy_env import HTTP_PROXY_PORT, PROXY_HOST, SOCKS_PORT
from sandboxd.contract.errors import InvalidArgument, NotFound, SandboxdError, Timeout
from sandboxd.contract.network import NetworkDecision
from sandboxd.egress import sni, socks
from sandboxd.egress.buffered import Buffered
from sandboxd.egress.http_head import MAX_HEAD, parse_head
from sandboxd.egress.intercept import Interceptor
from sandboxd.egress.limits import Limits, LoopPacer, RateLimiter
from sandboxd.egress.precedence import Precedence
from sandboxd.egress.resolver import Resolver
from sandboxd.egress.rules import Address, Decision, Policy, Ruleset, normalize_host

__all__ = ["LISTENERS", "DecisionLog", "Flow", "Gateway", "Interceptor", "Policies"]

log = logging.getLogger(__name__)

#: What the executor listens on for the gateway (the ports: one source, proxy_env).
LISTENERS = (
    Listener("http", PROXY_HOST, HTTP_PROXY_PORT),
    Listener("socks", PROXY_HOST, SOCKS_PORT),
)
#: A client that has not sent its whole request within this is dropped.
HEAD_TIMEOUT_S = 30.0
#: A TLS tunnel's first record (its ClientHello) must arrive within this.
HELLO_TIMEOUT_S = 30.0


class Policies(Protocol):
    """The daemon's policy in force per sandbox (service.network.NetworkRegistry)."""

    def current(self, instance_id: str) -> Policy: ...


class DecisionLog(Protocol):
    """Where decisions go (service.network.NetworkRegistry: a ring and metrics)."""

    def record(self, instance_id: str, entry: NetworkDecision) -> None: ...


@dataclass(slots=True)
class Flow:
    """An allowed connection, connected upstream, before any byte was relayed."""

    instance_id: str
    #: The name the workload asked for (the address as text when it gave one).
    host: str
    port: int
    #: The address connected to (the one the policy allowed).
    address: Address
    #: "connect" | "http" | "socks"
    via: str
    #: The sandbox's side.
    client: Pipe
    #: Bytes for upstream already read from the client (plain HTTP: the head,
    #: rewritten to origin form).
    first: bytes
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter


class _Refused(Exception):
    def __init__(self, decision: Decision, status: int = 403, code: int = socks.Reply.NOT_ALLOWED):
        super().__init__(decision.reason)
        self.decision = decision
        self.status = status
        self.code = code


@dataclass(eq=False, slots=True)
class _Live:
    """A relayed connection, re-checked when the policy changes."""

    host: str | None
    port: int
    address: Address
    task: asyncio.Task[None]
    closed_by_policy: Decision | None = None


@dataclass(slots=True)
class _Counters:
    up: int = 0
    down: int = 0


class _SniRefused(Exception):
    """The tunnel's TLS ClientHello names another host (the message says which)."""


#: Mode none refuses before looking at an address; decide still takes one.
_ANY = IPv4Address(0)


def _rule_text(decision: Decision) -> str:
    return decision.rule or ""


class Gateway:
    """The gateway of one sandbox, over its workspace's pipes."""

    def __init__(
        self,
        instance_id: str,
        accept: Callable[[Sequence[Listener]], AsyncIterator[tuple[str, Pipe]]],
        policies: Policies,
        decisions: DecisionLog,
        resolver: Resolver,
        limits: Limits,
        interceptor: Interceptor | None = None,
        own: frozenset[Address] | None = None,
        pacer: LoopPacer | None = None,
        precedence: Precedence | None = None,
    ) -> None:
        self.instance_id = instance_id
        self._pacer = pacer
        self._precedence = precedence
        self._accept = accept
        self._policies = policies
        self._decisions = decisions
        self._resolver = resolver
        self._limits = limits
        self._interceptor = interceptor
        self._own = own
        self._rate = RateLimiter(limits.bytes_per_second)
        self._live: set[_Live] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._cached: tuple[Policy, Ruleset] | None = None
        self.counters = _Counters()

    # ------------------------------------------------------------ policy

    def ruleset(self) -> Ruleset:
        policy = self._policies.current(self.instance_id)
        if self._cached is None or self._cached[0] != policy:
            self._cached = (policy, Ruleset.from_policy(policy, own=self._own))
        return self._cached[1]

    def policy_changed(self) -> None:
        """Close every live connection the policy in force now forbids."""
        rules = self.ruleset()
        for live in list(self._live):
            decision = rules.decide(live.host, live.port, live.address)
            if not decision.allowed and not live.task.done():
                live.closed_by_policy = decision
                live.task.cancel()
                self._record(
                    live.host or str(live.address),
                    live.port,
                    str(live.address),
                    "policy",
                    Decision(False, decision.rule, f"closed by a policy change: {decision.reason}"),
                )

    @property
    def open_connections(self) -> int:
        return len(self._handlers)

    # ------------------------------------------------------------ serving

    async def serve(self) -> None:
        """Take the sandbox's connections until the workspace goes (or cancelled)."""
        try:
            async for listener, pipe in self._accept(LISTENERS):
                task = asyncio.create_task(
                    self._handle(listener, pipe), name=f"egress-{self.instance_id}"
                )
                self._handlers.add(task)
                task.add_done_callback(self._handlers.discard)
        finally:
            for task in list(self._handlers):
                task.cancel()
            if self._handlers:
                await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _handle(self, listener: str, pipe: Pipe) -> None:
        try:
            if len(self._handlers) > self._limits.max_connections:
                await self._over_limit(listener, pipe)
                return
            if listener == "socks":
                await self._socks(pipe)
            else:
                await self._http(pipe)
        except asyncio.CancelledError:
            pass
        except SandboxdError as exc:  # the sandbox's side went (closed, restarted, busy)
            log.debug("egress %s: connection ended: %s", self.instance_id, exc)
        except Exception:  # one connection's surprise must not end the gateway
            log.exception("egress %s: connection failed", self.instance_id)
        finally:
            await pipe.close()

    async def _over_limit(self, listener: str, pipe: Pipe) -> None:
        reason = (
            f"this sandbox has {self._limits.max_connections} connections open, the most it may "
            "(SANDBOXD_EGRESS_MAX_CONNECTIONS); close some and retry"
        )
        self._record("", 0, "", listener, Decision(False, None, reason))
        if listener == "socks":
            stream = Buffered(pipe)

            async def refuse() -> None:
                await pipe.write(await socks.greet(stream))
                await socks.read_request(stream)
                await pipe.write(socks.reply(socks.Reply.GENERAL_FAILURE))

            with contextlib.suppress(SandboxdError, ValueError, asyncio.TimeoutError):
                await asyncio.wait_for(refuse(), HEAD_TIMEOUT_S)
        else:
            await _answer(pipe, 503, reason)

    # ------------------------------------------------------------ HTTP proxy

    async def _http(self, pipe: Pipe) -> None:
        stream = Buffered(pipe)
        try:
            head = await asyncio.wait_for(stream.until(b"\r\n\r\n", MAX_HEAD), HEAD_TIMEOUT_S)
            request = parse_head(head)
        except asyncio.TimeoutError:
            return
        except InvalidArgument as exc:
            self._record("", 0, "", "http", Decision(False, None, exc.message))
            await _answer(pipe, 400, exc.message)
            return
        via = "connect" if request.method == "CONNECT" else "http"
        try:
            address, reader, writer = await self._open(request.host, request.port, via)
        except _Refused as refused:
            await _answer(pipe, refused.status, refused.decision.reason)
            return
        host = request.host if isinstance(request.host, str) else str(request.host)
        if via == "connect":
            await pipe.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            first = stream.take()
        else:
            first = request.upstream_head + stream.take()
        await self._relay(
            Flow(self.instance_id, host, request.port, address, via, pipe, first, reader, writer),
            tunnel=via == "connect",
        )

    # ------------------------------------------------------------ SOCKS5

    async def _socks(self, pipe: Pipe) -> None:
        stream = Buffered(pipe)

        async def handshake() -> socks.Target | None:
            answer = await socks.greet(stream)
            await pipe.write(answer)
            if answer[1] == socks.NO_ACCEPTABLE:
                return None
            return await socks.read_request(stream)

        try:
            target = await asyncio.wait_for(handshake(), HEAD_TIMEOUT_S)
            if target is None:
                return
        except asyncio.TimeoutError:
            return
        except socks.Unsupported as exc:
            self._record("", 0, "", "socks", Decision(False, None, exc.message))
            await pipe.write(socks.reply(exc.code))
            return
        except InvalidArgument as exc:
            self._record("", 0, "", "socks", Decision(False, None, exc.message))
            return
        try:
            address, reader, writer = await self._open(target.host, target.port, "socks")
        except _Refused as refused:
            await pipe.write(socks.reply(refused.code))
            return
        await pipe.write(socks.reply(socks.Reply.SUCCEEDED))
        host = target.host if isinstance(target.host, str) else str(target.host)
        await self._relay(
            Flow(
                self.instance_id,
                host,
                target.port,
                address,
                "socks",
                pipe,
                stream.take(),
                reader,
                writer,
            ),
            tunnel=True,
        )

    # ------------------------------------------------------------ decide and connect

    async def _open(
        self, host: str | Address, port: int, via: str
    ) -> tuple[Address, asyncio.StreamReader, asyncio.StreamWriter]:
        """Resolve, decide on the name and each address, connect to an allowed one."""
        name = host if isinstance(host, str) else None
        asked = name if name is not None else str(host)
        rules = self.ruleset()
        if rules.mode == "none":
            decision = rules.decide(name, port, _ANY)
            self._record(asked, port, "", via, decision)
            raise _Refused(decision)
        if name is None:
            addresses: list[Address] = [host]  # type: ignore[list-item]
        else:
            early = rules.before_resolving(name, port)
            if early is not None:
                self._record(asked, port, "", via, early)
                raise _Refused(early)
            try:
                addresses = await self._resolver.resolve(name)
            except (NotFound, Timeout) as exc:
                decision = Decision(False, None, exc.message)
                self._record(asked, port, "", via, decision)
                raise _Refused(decision, 502, socks.Reply.HOST_UNREACHABLE) from None
        refusal: Decision | None = None
        failure: str | None = None
        for address in addresses:
            decision = rules.decide(name, port, address)
            if not decision.allowed:
                refusal = refusal or decision
                continue
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(str(address), port, limit=MAX_WRITE),
                    self._limits.connect_timeout_s,
                )
            except asyncio.TimeoutError:
                failure = f"connecting to {asked} port {port} ({address}) timed out"
                continue
            except OSError as exc:
                failure = (
                    f"cannot connect to {asked} port {port} ({address}): {exc.strerror or exc}"
                )
                continue
            self._record(asked, port, str(address), via, decision)
            return address, reader, writer
        if refusal is not None and failure is None:
            self._record(asked, port, str(addresses[0]), via, refusal)
            raise _Refused(refusal)
        reason = failure or "no address to connect to"
        self._record(asked, port, str(addresses[0]), via, Decision(False, None, reason))
        raise _Refused(Decision(False, None, reason), 502, socks.Reply.CONNECTION_REFUSED)

    # ------------------------------------------------------------ relaying

    async def _relay(self, flow: Flow, *, tunnel: bool) -> None:
        live = _Live(
            None if flow.host == str(flow.address) else flow.host,
            flow.port,
            flow.address,
            asyncio.current_task(),  # type: ignore[arg-type]
        )
        self._live.add(live)
        try:
            interceptor = self._interceptor
            if interceptor is not None and interceptor.wants(self.instance_id, flow.host):
                first = flow.first
                if tunnel and live.host is not None:
                    first = await _hello_for(flow, live.host)
                await interceptor.relay(
                    self.instance_id,
                    flow.host,
                    flow.port,
                    flow.client,
                    (flow.reader, flow.writer),
                    tls=tunnel and first[:1] == bytes((sni.HANDSHAKE,)),
                    initial=first,
                    meter=self._meter,
                )
                return
            await self._pump(flow, live.host if tunnel else None)
        except asyncio.TimeoutError:
            self._record(
                flow.host,
                flow.port,
                str(flow.address),
                flow.via,
                Decision(False, None, "the tunnel's TLS ClientHello did not arrive in time"),
            )
        except _SniRefused as refused:
            self._record(
                flow.host,
                flow.port,
                str(flow.address),
                flow.via,
                Decision(False, None, str(refused)),
            )
        finally:
            self._live.discard(live)
            flow.writer.close()
            with contextlib.suppress(Exception):
                await flow.writer.wait_closed()

    async def _meter(self, direction: str, size: int) -> None:
        """Every relayed chunk, plain or intercepted: the calls in flight first, the
        loop's pace, the byte-rate limit, then the counters."""
        if self._precedence is not None:
            await self._precedence.yield_to_calls(self.instance_id)
        if self._pacer is not None:
            await self._pacer.pace(self.instance_id)
        await self._rate.take(size)
        if direction == "up":
            self.counters.up += size
        else:
            self.counters.down += size

    async def _pump(self, flow: Flow, sni_host: str | None) -> None:
        """Relay both ways; first, when ``sni_host``, check a ClientHello's SNI."""

        async def up() -> None:
            data = flow.first
            if sni_host is not None:
                data = await _hello_for(flow, sni_host)
            while data:
                await self._meter("up", len(data))
                flow.writer.write(data)
                await flow.writer.drain()
                data = await flow.client.read()
            if flow.writer.can_write_eof():
                flow.writer.write_eof()

        async def down() -> None:
            # Up to one pipe write's worth: each write is a round trip to the executor.
            while data := await flow.reader.read(MAX_WRITE):
                await self._meter("down", len(data))
                await flow.client.write(data)
            await flow.client.shutdown_write()

        tasks = [asyncio.create_task(up()), asyncio.create_task(down())]
        try:
            # Each half ends on its own (half-close); an error in either ends both.
            for finished in asyncio.as_completed(tasks):
                await finished
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------ the log

    def _record(self, host: str, port: int, address: str, via: str, decision: Decision) -> None:
        entry = NetworkDecision(
            at_ms=int(time.time() * 1000),
            host=host,
            port=port,
            address=address,
            allowed=decision.allowed,
            rule=_rule_text(decision),
            reason=decision.reason,
            via=via,
        )
        try:
            self._decisions.record(self.instance_id, entry)
        except Exception:  # the log must never take a connection down
            log.exception("egress %s: recording a decision failed", self.instance_id)


#: Longest reason carried in a status line (the body has it whole).
PHRASE_REASON_MAX = 200


async def _answer(pipe: Pipe, status: int, reason: str) -> None:
    """A proxy error answer that says why, for the agent to act on: in the body,
    and in the status line too, because the tools that meet a refused CONNECT
    most never show its body (pip prints the status line, git and curl only
    the code)."""
    body = f"sandboxd egress: {reason}\n".encode()
    head = (
        f"{status_line(status, reason)}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "X-Sandboxd-Egress: refused\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    with contextlib.suppress(SandboxdError, OSError):
        await pipe.write(head + body)
        await pipe.shutdown_write()


def status_line(status: int, reason: str) -> str:
    """``HTTP/1.1 403 Forbidden (sandboxd egress: <reason>)``, the reason made
    printable ASCII (nothing a sandbox sent can split the head) and cut short."""
    phrase = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway", 503: "Service Unavailable"}
    printable = "".join(c if " " <= c <= "~" else "?" for c in reason)
    if len(printable) > PHRASE_REASON_MAX:
        printable = printable[: PHRASE_REASON_MAX - 3] + "..."
    return f"HTTP/1.1 {status} {phrase.get(status, 'Error')} (sandboxd egress: {printable})"


async def _hello_for(flow: Flow, host: str) -> bytes:
    """The tunnel's first bytes, once a ClientHello among them (if they start
    with a TLS record) was read whole and names ``host`` (or no host)."""
    buffered = bytearray(flow.first)

    async def first_record() -> str | bytes | None:
        """The SNI (None: none), or the bytes when they are no TLS or ended early."""
        while True:
            if buffered and buffered[0] != sni.HANDSHAKE:
                return bytes(buffered)  # not TLS: the address was what was checked
            if buffered:
                try:
                    return sni.server_name(bytes(buffered))
                except sni.Incomplete:
                    if len(buffered) > sni.MAX_RECORD:
                        raise _SniRefused("the tunnel's TLS ClientHello is too long") from None
                except ValueError as exc:
                    raise _SniRefused(
                        f"the tunnel's TLS ClientHello is unreadable: {exc}"
                    ) from None
            chunk = await flow.client.read()
            if not chunk:
                return bytes(buffered)
            buffered.extend(chunk)

    found = await asyncio.wait_for(first_record(), HELLO_TIMEOUT_S)
    if isinstance(found, bytes):
        return found
    name = found
    if name is not None:
        try:
            normal: object = normalize_host(name)
        except InvalidArgument:
            normal = name
        if normal != host:
            raise _SniRefused(
                f"the TLS server name (SNI) {name!r} is not {host}, the host this tunnel was "
                "allowed to"
            )
    return bytes(buffered)

"""Secrets at egress: the gateway's interceptor (issue 25, item 4).

The gateway asks ``wants(instance_id, host)`` before it relays a connection;
only when the sandbox has a secret bound to that host does the connection
come here (``relay``) instead of the plain byte relay. Here:

* HTTPS: TLS from the sandbox is terminated with a leaf of the daemon's CA
  (egress.ca) for that host, and TLS to the upstream is made anew, verified
  against the system's trust (plus ``upstream_cafile`` if the operator gives
  one) for that same host name — a host whose certificate does not verify
  gets a 502 naming the host, and no request;
* plain HTTP: the same, without TLS;
* both: request heads pass through ``RequestRewriter``, which replaces the
  placeholders of the secrets bound to this host, in header values only;
  everything else (bodies both ways, responses) streams through.

A placeholder sent to any other host is never seen here: that connection is
relayed as it is. No value is ever logged or put in an error: log lines name
the sandbox, the host and the secret names only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sandboxd.contract.secrets import normal_host
from sandboxd.egress.book import SecretBook
from sandboxd.egress.headers import HeaderError, RequestRewriter
from sandboxd.egress.tls import ByteStream, SocketStream, TlsStream

if TYPE_CHECKING:  # cryptography is the server extra's; the service imports the book only
    from sandboxd.egress.ca import CertificateAuthority

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 15.0
#: The gateway's accounting of relayed plaintext ("up" to the host, "down" to the
#: sandbox): its per-sandbox byte-rate limit and counters hold for intercepted
#: connections as for plain ones.
Meter = Callable[[str, int], Awaitable[None]]


class Interceptor(Protocol):
    """The gateway's hook: relay a connection itself, or leave it to the byte relay."""

    def wants(self, instance_id: str, host: str) -> bool: ...

    async def relay(
        self,
        instance_id: str,
        host: str,
        port: int,
        sandbox: ByteStream,
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        *,
        tls: bool,
        initial: bytes = b"",
        meter: Meter | None = None,
    ) -> None: ...


class SecretInterceptor:
    """``Interceptor`` for the secrets in a ``SecretBook``."""

    def __init__(
        self,
        ca: Callable[[], CertificateAuthority],
        upstream_cafile: Path | None = None,
    ) -> None:
        #: The CA's loader: called once, when the first sandbox gets secrets.
        self._load_ca = ca
        self._ca: CertificateAuthority | None = None
        self._ca_lock = threading.Lock()
        self.book = SecretBook(prepare=lambda: self.ca)
        self._upstream = ssl.create_default_context()
        if upstream_cafile is not None:
            self._upstream.load_verify_locations(cafile=str(upstream_cafile))
        self._upstream.set_alpn_protocols(["http/1.1"])

    @property
    def ca(self) -> CertificateAuthority:
        with self._ca_lock:
            if self._ca is None:
                self._ca = self._load_ca()
            return self._ca

    def __repr__(self) -> str:
        return f"SecretInterceptor({self._ca!r})"

    def wants(self, instance_id: str, host: str) -> bool:
        return bool(self.book.for_host(instance_id, host))

    async def relay(
        self,
        instance_id: str,
        host: str,
        port: int,
        sandbox: ByteStream,
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        *,
        tls: bool,
        initial: bytes = b"",
        meter: Meter | None = None,
    ) -> None:
        host = normal_host(host)
        upstream_stream: ByteStream = SocketStream(*upstream)
        inner: ByteStream = sandbox
        pending = initial
        try:
            if tls:
                terminated = TlsStream(
                    sandbox, self.ca.server_context(host), server_side=True, initial=initial
                )
                inner, pending = terminated, b""
                await asyncio.wait_for(terminated.handshake(), HANDSHAKE_TIMEOUT_S)
                verified = TlsStream(
                    upstream_stream, self._upstream, server_side=False, server_hostname=host
                )
                try:
                    await asyncio.wait_for(verified.handshake(), HANDSHAKE_TIMEOUT_S)
                except (ssl.SSLError, ConnectionError, asyncio.TimeoutError) as exc:
                    reason = _tls_reason(exc)
                    log.warning(
                        "egress %s: upstream TLS to %s failed: %s", instance_id, host, reason
                    )
                    await _answer_502(inner, f"sandboxd: TLS to {host} failed: {reason}\n")
                    return
                upstream_stream = verified
            await _pump_both(
                instance_id, host, inner, upstream_stream, self.book, pending, tls, meter
            )
        except (ssl.SSLError, ConnectionError, asyncio.TimeoutError, HeaderError) as exc:
            log.info(
                "egress %s: intercepted connection to %s ended: %s",
                instance_id,
                host,
                _tls_reason(exc),
            )
        finally:
            with contextlib.suppress(Exception):
                await sandbox.close()
            with contextlib.suppress(Exception):
                await upstream_stream.close()


async def _pump_both(
    instance_id: str,
    host: str,
    sandbox: ByteStream,
    upstream: ByteStream,
    book: SecretBook,
    pending: bytes,
    tls: bool,
    meter: Meter | None,
) -> None:
    # Looked up per connection: a secret removed since is no longer put in.
    replacements: Mapping[bytes, bytes] = book.for_host(instance_id, host)
    rewriter = RequestRewriter(replacements, check_target=None if tls else _same_host_target(host))

    async def outward() -> None:
        data = pending
        while True:
            if data:
                out = rewriter.feed(data)
                if out:
                    if meter is not None:
                        await meter("up", len(out))
                    await upstream.write(out)
            data = await sandbox.read()
            if not data:
                break
        await upstream.shutdown_write()

    async def inward() -> None:
        while data := await upstream.read():
            if meter is not None:
                await meter("down", len(data))
            await sandbox.write(data)
        await sandbox.shutdown_write()

    tasks = [asyncio.ensure_future(outward()), asyncio.ensure_future(inward())]
    try:
        # Either side failing ends the connection; a clean end of one side
        # waits for the other (half-close: a response may follow the request's end).
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task


def _same_host_target(host: str) -> Callable[[bytes], bool]:
    """Plain HTTP through a proxy names the host in each request: all must be this one."""

    def check(target: bytes) -> bool:
        if target.startswith(b"/"):
            return True  # origin form: the connection's host
        text = target.decode("ascii", "replace").lower()
        if not text.startswith("http://"):
            return False
        authority = text[len("http://") :].split("/", 1)[0].rsplit("@", 1)[-1]
        if authority.startswith("["):
            name = authority.split("]", 1)[0] + "]"
        else:
            name = authority.split(":", 1)[0]
        return normal_host(name) == host

    return check


async def _answer_502(stream: ByteStream, text: str) -> None:
    body = text.encode()
    head = (
        b"HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\nconnection: close\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    with contextlib.suppress(Exception):
        await stream.write(head + body)
        await stream.shutdown_write()


def _tls_reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"certificate verify failed ({exc.verify_message})"
    if isinstance(exc, HeaderError):
        return f"not HTTP/1.1 the gateway can frame: {exc}"
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    reason = getattr(exc, "reason", None)
    return type(exc).__name__ + (f" ({reason})" if reason else "")

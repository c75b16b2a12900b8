"""Secrets at egress: the header rewriter, the daemon's CA, and the interceptor end to end
over real sockets on this host's loopback (a TLS upstream signed by a test CA)."""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import socket
import ssl
from pathlib import Path

import pytest

from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.secrets import Secret, SecretValue, placeholder, validate
from sandboxd.egress.book import SecretBook
from sandboxd.egress.ca import CertificateAuthority
from sandboxd.egress.headers import HeaderError, RequestRewriter
from sandboxd.egress.intercept import Meter, SecretInterceptor
from sandboxd.egress.tls import SocketStream

pytestmark = [pytest.mark.unit]

VALUE = "real-token-9f8e7d6c5b4a"
PH = b"sandboxd-secret-TOKEN-0123"
OTHER = b"sandboxd-secret-OTHER-4567"


def _rewrite(data: bytes, step: int = 0) -> bytes:
    rewriter = RequestRewriter({PH: VALUE.encode()})
    if not step:
        return rewriter.feed(data)
    return b"".join(rewriter.feed(data[i : i + step]) for i in range(0, len(data), step))


# -- the header rewriter ---------------------------------------------------


def test_replaces_in_header_values_only() -> None:
    body = b"token=" + PH
    request = (
        b"POST /path?t="
        + PH
        + b" HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer "
        + PH
        + b"\r\nX-Other: "
        + OTHER
        + b"\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    out = _rewrite(request)
    head, _, rest = out.partition(b"\r\n\r\n")
    assert b"Authorization: Bearer " + VALUE.encode() in head
    assert head.startswith(b"POST /path?t=" + PH + b" HTTP/1.1")  # not in the URL
    assert b"X-Other: " + OTHER in head  # another secret's placeholder: unchanged
    assert rest == body  # not in the body


@pytest.mark.parametrize("step", [0, 1, 3, 7])
def test_keep_alive_chunked_and_length_bodies_split_anywhere(step: int) -> None:
    # A body that looks like a request head must not be taken for one.
    fake_head = b"GET / HTTP/1.1\r\nAuthorization: " + PH + b"\r\n\r\n"
    chunked = (
        b"POST /a HTTP/1.1\r\nAuthorization: "
        + PH
        + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
        + hex(len(fake_head))[2:].encode()
        + b"\r\n"
        + fake_head
        + b"\r\n0\r\nX-T: 1\r\n\r\n"
    )
    length = (
        b"PUT /b HTTP/1.1\r\nAuthorization: "
        + PH
        + b"\r\nContent-Length: "
        + str(len(fake_head)).encode()
        + b"\r\n\r\n"
        + fake_head
    )
    plain = b"GET /c HTTP/1.1\r\nAuthorization: " + PH + b"\r\n\r\n"
    rewriter = RequestRewriter({PH: VALUE.encode()})
    data = chunked + length + plain
    pieces = [data] if not step else [data[i : i + step] for i in range(0, len(data), step)]
    out = b"".join(rewriter.feed(p) for p in pieces)
    assert rewriter.requests == 3 and rewriter.at_boundary()
    assert out.count(b"Authorization: " + VALUE.encode()) == 3
    assert out.count(b"Authorization: " + PH) == 2  # the two inside bodies
    real = b"Authorization: " + VALUE.encode()
    expected = (
        chunked.replace(b"Authorization: " + PH + b"\r\nT", real + b"\r\nT")
        + length.replace(b"Authorization: " + PH + b"\r\nC", real + b"\r\nC")
        + plain.replace(PH, VALUE.encode())
    )
    assert out == expected


@pytest.mark.parametrize(
    "head",
    [
        b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        b"POST / HTTP/1.1\r\nBad Header : x\r\n\r\n",
        b"GET /\r\n\r\n",
    ],
)
def test_ambiguous_framing_ends_the_connection(head: bytes) -> None:
    # Guessing differently from the server is request smuggling (a second head
    # hidden in a body would leave with the secret's value in it).
    with pytest.raises(HeaderError):
        _rewrite(head)


def test_oversize_head_and_bad_chunk() -> None:
    with pytest.raises(HeaderError):
        _rewrite(b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000)
    with pytest.raises(HeaderError):
        _rewrite(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
    with pytest.raises(HeaderError):
        _rewrite(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc")


def test_plain_http_target_must_be_the_connection_host() -> None:
    from sandboxd.egress.intercept import _same_host_target

    check = _same_host_target("api.test")
    assert check(b"http://api.test/x") and check(b"http://API.test.:80/x") and check(b"/x")
    assert not check(b"http://evil.test/x") and not check(b"http://api.test.evil.test/")
    rewriter = RequestRewriter({PH: b"v"}, check_target=check)
    with pytest.raises(HeaderError):
        rewriter.feed(b"GET http://evil.test/ HTTP/1.1\r\nAuthorization: " + PH + b"\r\n\r\n")


# -- the model ---------------------------------------------------------------


def test_value_masked_everywhere_but_reveal() -> None:
    secret = Secret("TOKEN", SecretValue(VALUE), ("api.test",), env="TOKEN")
    assert VALUE not in repr(secret) and VALUE not in str(secret.value)
    assert VALUE not in str(secret.to_json())
    assert secret.value.reveal() == VALUE
    with pytest.raises(TypeError):
        pickle.dumps(secret.value)


@pytest.mark.parametrize(
    ("secret", "words"),
    [
        (Secret("TOKEN", VALUE + "\r\nX: y", ("api.test",), env="T"), "line breaks"),
        (Secret("TOKEN", VALUE, (), env="T"), "hosts"),
        (Secret("TOKEN", VALUE, ("api test",), env="T"), "not a host name"),
        (Secret("TOKEN", VALUE, ("api.test",)), "exactly one"),
        (Secret("TOKEN", VALUE, ("api.test",), file="rel/path"), "absolute"),
        (Secret("1X", VALUE, ("api.test",), env="T"), "secret name"),
        (Secret("TOKEN", "", ("api.test",), env="T"), "no value"),
    ],
)
def test_validation_errors_never_carry_the_value(secret: Secret, words: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validate([secret])
    assert words in str(caught.value) and VALUE not in str(caught.value)


def test_hosts_normalised_and_wildcards() -> None:
    (secret,) = validate([Secret("T", VALUE, ("API.Test.", "*.example.com"), env="T")])
    assert secret.hosts == ("api.test", "*.example.com")
    book = SecretBook()
    book.set("sb", [secret])
    ph = placeholder("sb", "T").encode()
    assert book.for_host("sb", "api.test") == {ph: VALUE.encode()}
    assert book.for_host("sb", "x.example.com") and not book.for_host("sb", "example.com")
    assert not book.for_host("sb", "api.test.evil.test") and not book.for_host("other", "api.test")


# -- the CA ------------------------------------------------------------------


def test_ca_made_once_private_and_reloaded(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path / "state")
    key = tmp_path / "state" / "egress-ca.key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700
    again = CertificateAuthority.load_or_create(tmp_path / "state")
    assert again.cert_pem == ca.cert_pem
    assert b"PRIVATE" not in ca.cert_pem
    assert ca.server_context("api.test") is ca.server_context("api.test")  # cached
    os.chmod(key, 0o644)
    with pytest.raises(PermissionError):
        CertificateAuthority.load_or_create(tmp_path / "state")


# -- the interceptor over real sockets -----------------------------------------


class _Upstream:
    """An HTTPS (or HTTP) server on 127.0.0.1 that records request heads and bodies."""

    def __init__(self, context: ssl.SSLContext | None) -> None:
        self.context = context
        self.seen: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.context)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                self.seen.append(head + body)
                answer = b"echo:" + head.split(b"\r\n")[0]
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-length: "
                    + str(len(answer)).encode()
                    + b"\r\n\r\n"
                    + answer
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


async def _intercepted(
    interceptor: SecretInterceptor,
    port: int,
    tls: bool,
    client_ctx: ssl.SSLContext | None,
    meter: Meter | None = None,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, asyncio.Task[None]]:
    """The sandbox's client on one end of a socketpair, the interceptor on the other."""
    ours, theirs = socket.socketpair()
    sandbox = SocketStream(*await asyncio.open_connection(sock=ours))
    upstream = await asyncio.open_connection("127.0.0.1", port)
    task = asyncio.ensure_future(
        interceptor.relay("sb", "api.test", port, sandbox, upstream, tls=tls, meter=meter)
    )
    reader, writer = await asyncio.open_connection(
        sock=theirs, ssl=client_ctx, server_hostname="api.test" if client_ctx else None
    )
    return reader, writer, task


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> bytes:
    writer.write(head)
    await writer.drain()
    answer = await reader.readuntil(b"\r\n\r\n")
    length = int(answer.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    return await reader.readexactly(length)


@pytest.fixture
def world(tmp_path: Path) -> tuple[SecretInterceptor, CertificateAuthority, Path]:
    daemon_ca = CertificateAuthority.load_or_create(tmp_path / "daemon")
    test_ca = CertificateAuthority.load_or_create(tmp_path / "upstream")  # the test hosts' CA
    cafile = tmp_path / "upstream-ca.pem"
    cafile.write_bytes(test_ca.cert_pem)
    interceptor = SecretInterceptor(lambda: daemon_ca, upstream_cafile=cafile)
    interceptor.book.set(
        "sb",
        validate(
            [
                Secret("TOKEN", VALUE, ("api.test",), env="TOKEN"),
                Secret("OTHER", "other-value-xyz", ("elsewhere.test",), env="OTHER"),
            ]
        ),
    )
    return interceptor, test_ca, tmp_path


def _client_trusting(pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=pem.decode())
    return context


def test_https_secret_arrives_as_value_keep_alive(
    world: tuple[SecretInterceptor, CertificateAuthority, Path], caplog: pytest.LogCaptureFixture
) -> None:
    interceptor, test_ca, _ = world
    caplog.set_level(logging.DEBUG)
    token = placeholder("sb", "TOKEN").encode()
    other = placeholder("sb", "OTHER").encode()

    async def run() -> list[bytes]:
        upstream = _Upstream(test_ca.server_context("api.test"))
        port = await upstream.start()
        client = _client_trusting(interceptor.ca.cert_pem)
        reader, writer, task = await _intercepted(interceptor, port, True, client)
        first = await _get(
            reader,
            writer,
            b"GET /one HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer "
            + token
            + b"\r\nX-Other: "
            + other
            + b"\r\n\r\n",
        )
        body = b"body keeps " + token
        second = await _get(
            reader,
            writer,
            b"POST /two HTTP/1.1\r\nAuthorization: Bearer "
            + token
            + b"\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body,
        )
        assert first == b"echo:GET /one HTTP/1.1" and second == b"echo:POST /two HTTP/1.1"
        writer.close()
        await asyncio.wait_for(task, 10)
        assert upstream.server is not None
        upstream.server.close()
        return upstream.seen

    seen = asyncio.run(run())
    assert len(seen) == 2
    assert b"Authorization: Bearer " + VALUE.encode() in seen[0]
    assert b"X-Other: " + other in seen[0]  # bound to another host: unchanged
    assert b"Authorization: Bearer " + VALUE.encode() in seen[1]
    assert seen[1].endswith(b"body keeps " + token)
    assert all(VALUE not in r.getMessage() for r in caplog.records)


def test_upstream_not_verified_answers_502_and_sends_nothing(
    world: tuple[SecretInterceptor, CertificateAuthority, Path], caplog: pytest.LogCaptureFixture
) -> None:
    interceptor, _, tmp_path = world
    caplog.set_level(logging.DEBUG)
    # Signed by a CA nobody told the daemon to trust: the value must not go there.
    rogue = CertificateAuthority.load_or_create(tmp_path / "rogue")
    token = placeholder("sb", "TOKEN").encode()

    async def run() -> tuple[bytes, list[bytes]]:
        upstream = _Upstream(rogue.server_context("api.test"))
        port = await upstream.start()
        client = _client_trusting(interceptor.ca.cert_pem)
        reader, writer, task = await _intercepted(interceptor, port, True, client)
        answer = await _get(
            reader, writer, b"GET / HTTP/1.1\r\nAuthorization: " + token + b"\r\n\r\n"
        )
        await asyncio.wait_for(task, 10)
        assert upstream.server is not None
        upstream.server.close()
        return answer, upstream.seen

    answer, seen = asyncio.run(run())
    assert b"TLS to api.test failed: certificate verify failed" in answer
    assert seen == []
    assert all(VALUE not in r.getMessage() for r in caplog.records)


def test_plain_http_gets_the_same_replacement(
    world: tuple[SecretInterceptor, CertificateAuthority, Path],
) -> None:
    interceptor, _, _ = world
    token = placeholder("sb", "TOKEN").encode()

    metered = {"up": 0, "down": 0}

    async def meter(direction: str, size: int) -> None:
        metered[direction] += size

    async def run() -> list[bytes]:
        upstream = _Upstream(None)
        port = await upstream.start()
        reader, writer, task = await _intercepted(interceptor, port, False, None, meter)
        await _get(
            reader,
            writer,
            b"GET http://api.test/x HTTP/1.1\r\nAuthorization: " + token + b"\r\n\r\n",
        )
        writer.close()
        await asyncio.wait_for(task, 10)
        assert upstream.server is not None
        upstream.server.close()
        return upstream.seen

    (seen,) = asyncio.run(run())
    assert b"Authorization: " + VALUE.encode() in seen
    # The gateway's byte-rate limit and counters see intercepted bytes too.
    assert metered["up"] == len(seen) and metered["down"] > len(b"echo:")


def test_sandboxctl_secret_takes_the_value_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import typer

    from sandboxd.ctl.app import _secret

    monkeypatch.setenv("TOKEN", VALUE)
    as_env = _secret("TOKEN@api.test,*.b.test")
    assert (as_env.name, as_env.hosts, as_env.env, as_env.file) == (
        "TOKEN",
        ("api.test", "*.b.test"),
        "TOKEN",
        "",
    )
    assert as_env.value.reveal() == VALUE
    as_file = _secret("TOKEN@api.test=/home/sandbox/.token")
    assert (as_file.env, as_file.file) == ("", "/home/sandbox/.token")
    monkeypatch.delenv("TOKEN")
    for bad in ("TOKEN@api.test", "TOKEN", "@api.test"):
        with pytest.raises(typer.BadParameter):
            _secret(bad)

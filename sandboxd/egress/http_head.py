"""The request head a workload sends to the HTTP proxy: CONNECT or absolute-form HTTP.

Strict on purpose: a head with a bare CR or LF, a NUL, an obs-fold or a
Host that names another host than the URL is refused rather than guessed
at (a lenient parser here and a strict one upstream disagree on which host
was asked for, and the gateway decided on one of them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from sandboxd.contract.errors import InvalidArgument
from sandboxd.egress.rules import Address, normalize_host

__all__ = ["MAX_HEAD", "Request", "parse_head", "split_authority"]

#: Longest request head the proxy reads.
MAX_HEAD = 32 << 10

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_VERSION = re.compile(r"HTTP/1\.[01]")
#: Headers about the hop to the proxy: never sent on.
_HOP = frozenset(
    {"proxy-connection", "proxy-authorization", "proxy-authenticate", "keep-alive", "connection"}
)


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    #: The host as asked (a name, or an address literal), normalized.
    host: str | Address
    port: int
    #: CONNECT: b"". Plain HTTP: the head to send upstream (origin form,
    #: hop-by-hop headers dropped, ``Connection: close``).
    upstream_head: bytes


def split_authority(authority: str, default_port: int | None) -> tuple[str | Address, int]:
    """``host[:port]`` (IPv6 in brackets) -> (normalized host, port)."""
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise InvalidArgument(f"{authority!r}: an IPv6 address needs its closing ']'")
        host, rest = authority[: end + 1], authority[end + 1 :]
        if rest and not rest.startswith(":"):
            raise InvalidArgument(f"{authority!r} is not host:port")
        raw_port = rest[1:] if rest else None
    elif ":" in authority:
        host, raw_port = authority.rsplit(":", 1)
    else:
        host, raw_port = authority, None
    if raw_port is None:
        if default_port is None:
            raise InvalidArgument(f"{authority!r} needs a port (host:port)")
        port = default_port
    else:
        if not raw_port.isdigit() or not raw_port.isascii() or not 1 <= int(raw_port) <= 65535:
            raise InvalidArgument(f"{authority!r}: the port must be a number from 1 to 65535")
        port = int(raw_port)
    return normalize_host(host), port


def parse_head(head: bytes) -> Request:
    """A complete head (ending in CRLF CRLF) -> Request; InvalidArgument with why."""
    if b"\x00" in head:
        raise InvalidArgument("the request has a NUL byte")
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise InvalidArgument("the request head is not ASCII") from None
    if not text.endswith("\r\n\r\n"):
        raise InvalidArgument("the request head does not end in an empty line")
    lines = text[:-4].split("\r\n")
    if any("\r" in line or "\n" in line for line in lines):
        raise InvalidArgument("the request has a bare CR or LF")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not _VERSION.fullmatch(parts[2]):
        raise InvalidArgument(f"not an HTTP/1.x request line: {lines[0][:200]!r}")
    method, target, version = parts
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line[:1] in (" ", "\t"):
            raise InvalidArgument("folded header lines are not accepted")
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name):
            raise InvalidArgument(f"not a header line: {line[:200]!r}")
        headers.append((name, value.strip(" \t")))
    hosts = [value for name, value in headers if name.lower() == "host"]
    if len(hosts) > 1:
        raise InvalidArgument("the request has more than one Host header")
    if method == "CONNECT":
        host, port = split_authority(target, None)
        return Request(method, host, port, b"")
    url = urlsplit(target)
    if url.scheme.lower() != "http" or not url.netloc or "@" in url.netloc:
        raise InvalidArgument(
            "the HTTP proxy takes CONNECT host:port, or a plain http:// URL in absolute form "
            "(https goes through CONNECT)"
        )
    host, port = split_authority(url.netloc, 80)
    if hosts and split_authority(hosts[0], 80) != (host, port):
        raise InvalidArgument(f"the Host header {hosts[0]!r} names another host than the URL")
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    kept = [(n, v) for n, v in headers if n.lower() not in _HOP and n.lower() != "host"]
    out = [f"{method} {path} {version}", f"Host: {url.netloc}"]
    out += [f"{n}: {v}" for n, v in kept]
    # One request per connection: a second one on a kept-alive connection
    # could name another host than the one decided on.
    out.append("Connection: close")
    return Request(method, host, port, ("\r\n".join(out) + "\r\n\r\n").encode("ascii"))

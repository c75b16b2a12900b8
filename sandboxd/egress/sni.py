"""The server name (SNI) of a TLS ClientHello, read without terminating TLS.

The gateway checks it against the host it allowed: a tunnel opened to an
allowed name must not carry a handshake for another (a shared front-end
would route it there).
"""

from __future__ import annotations

import struct

__all__ = ["HANDSHAKE", "MAX_RECORD", "Incomplete", "server_name"]

#: The first byte of a TLS handshake record.
HANDSHAKE = 0x16
#: Largest first record the gateway waits for (a TLS record's length field is 16 bits).
MAX_RECORD = 5 + 0xFFFF


class Incomplete(Exception):
    """More bytes are needed for the first record."""


def _take(data: bytes, at: int, n: int) -> tuple[bytes, int]:
    if at + n > len(data):
        raise ValueError("truncated ClientHello")
    return data[at : at + n], at + n


def _u(data: bytes, at: int, n: int) -> tuple[int, int]:
    raw, at = _take(data, at, n)
    return int.from_bytes(raw, "big"), at


def server_name(data: bytes) -> str | None:
    """The SNI host name of the ClientHello starting ``data`` (None: it names none).

    Raises Incomplete when the first record is not all here yet, ValueError
    when it is no ClientHello (the gateway then refuses: a tunnel that starts
    with a handshake record it cannot read is not let through unchecked).
    """
    if len(data) < 5:
        raise Incomplete
    kind, _version, length = struct.unpack("!BHH", data[:5])
    if kind != HANDSHAKE:
        raise ValueError("not a TLS handshake record")
    if len(data) < 5 + length:
        raise Incomplete
    body = data[5 : 5 + length]
    msg_type, at = _u(body, 0, 1)
    if msg_type != 1:
        raise ValueError("the first handshake message is no ClientHello")
    hello_len, at = _u(body, at, 3)
    if hello_len > len(body) - at:
        # A ClientHello split over records: rare (post-quantum key shares can
        # do it); read what this record has, the extensions may be cut.
        pass
    at += 2 + 32  # version, random
    sid_len, at = _u(body, at, 1)
    at += sid_len
    suites_len, at = _u(body, at, 2)
    at += suites_len
    comp_len, at = _u(body, at, 1)
    at += comp_len
    if at >= len(body):
        return None  # no extensions
    ext_total, at = _u(body, at, 2)
    end = min(len(body), at + ext_total)
    while at + 4 <= end:
        ext_type, at = _u(body, at, 2)
        ext_len, at = _u(body, at, 2)
        ext, at = _take(body, at, ext_len)
        if ext_type != 0:
            continue
        list_len, pos = _u(ext, 0, 2)
        stop = min(len(ext), pos + list_len)
        while pos + 3 <= stop:
            name_type, pos = _u(ext, pos, 1)
            name_len, pos = _u(ext, pos, 2)
            name, pos = _take(ext, pos, name_len)
            if name_type == 0:
                try:
                    return name.decode("ascii")
                except UnicodeDecodeError:
                    raise ValueError("the SNI name is not ASCII") from None
        return None
    if at < end:
        raise ValueError("truncated ClientHello")
    return None

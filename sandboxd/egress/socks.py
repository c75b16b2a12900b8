"""SOCKS5 (RFC 1928) as the gateway speaks it: no authentication, CONNECT only.

The reply codes are the protocol's; a refusal by policy is 0x02 "connection
not allowed by ruleset" (the reason in words is in the sandbox's decision
log: SOCKS has no place for text).
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from sandboxd.contract.errors import InvalidArgument
from sandboxd.egress.buffered import Buffered
from sandboxd.egress.rules import Address, normalize_host

__all__ = ["Reply", "Target", "Unsupported", "greet", "read_request", "reply"]

VERSION = 5
NO_AUTH = 0x00
NO_ACCEPTABLE = 0xFF
CMD_CONNECT = 0x01


class Reply:
    SUCCEEDED = 0x00
    GENERAL_FAILURE = 0x01
    NOT_ALLOWED = 0x02  # "connection not allowed by ruleset"
    NETWORK_UNREACHABLE = 0x03
    HOST_UNREACHABLE = 0x04
    CONNECTION_REFUSED = 0x05
    TTL_EXPIRED = 0x06
    COMMAND_NOT_SUPPORTED = 0x07
    ADDRESS_TYPE_NOT_SUPPORTED = 0x08


class Unsupported(InvalidArgument):
    """A well-formed request the gateway does not serve (the reply code says which)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Target:
    host: str | Address
    port: int


def reply(code: int) -> bytes:
    # The bound address is not the client's business (and is the daemon's): zeros.
    return struct.pack("!BBBB4sH", VERSION, code, 0, 1, b"\0\0\0\0", 0)


async def greet(stream: Buffered) -> bytes:
    """Read the greeting; the method-selection answer to send."""
    version, count = await stream.exactly(2)
    if version != VERSION:
        raise InvalidArgument(f"not SOCKS version 5 (got {version})")
    methods = await stream.exactly(count)
    if NO_AUTH not in methods:
        return bytes((VERSION, NO_ACCEPTABLE))
    return bytes((VERSION, NO_AUTH))


async def read_request(stream: Buffered) -> Target:
    version, command, _reserved, kind = await stream.exactly(4)
    if version != VERSION:
        raise InvalidArgument(f"not SOCKS version 5 (got {version})")
    if kind == 1:
        host: str | Address = ipaddress.IPv4Address(await stream.exactly(4))
    elif kind == 4:
        host = ipaddress.IPv6Address(await stream.exactly(16))
        if host.ipv4_mapped is not None:
            host = host.ipv4_mapped
    elif kind == 3:
        (length,) = await stream.exactly(1)
        raw = await stream.exactly(length)
        try:
            name = raw.decode("ascii")
        except UnicodeDecodeError:
            raise Unsupported("the name is not ASCII", Reply.ADDRESS_TYPE_NOT_SUPPORTED) from None
        try:
            host = normalize_host(name)
        except InvalidArgument as exc:
            raise Unsupported(exc.message, Reply.ADDRESS_TYPE_NOT_SUPPORTED) from None
    else:
        raise Unsupported(f"address type {kind}", Reply.ADDRESS_TYPE_NOT_SUPPORTED)
    (port,) = struct.unpack("!H", await stream.exactly(2))
    if command != CMD_CONNECT:
        raise Unsupported(
            "only CONNECT: BIND and UDP ASSOCIATE are not offered", Reply.COMMAND_NOT_SUPPORTED
        )
    if port == 0:
        raise Unsupported("port 0", Reply.GENERAL_FAILURE)
    return Target(host, port)

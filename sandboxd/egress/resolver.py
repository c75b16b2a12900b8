"""Name resolution for egress: in the daemon, never in the sandbox.

The gateway resolves a name once per connection and connects to the very
address it checked, so a name that answers one address to the check and
another to the connect (DNS rebinding) has nothing to exploit. The system
resolver is the default; ``HostsResolver`` answers from a hosts-format file
only (tests point names at addresses in namespaces they create; an
air-gapped deployment can pin its package mirrors the same way).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from pathlib import Path
from typing import Protocol

from sandboxd.contract.errors import InvalidArgument, NotFound, Timeout
from sandboxd.egress.rules import Address, normalize_host

__all__ = ["HostsResolver", "Resolver", "SystemResolver"]

RESOLVE_TIMEOUT_S = 5.0


class Resolver(Protocol):
    async def resolve(self, host: str) -> list[Address]:
        """The addresses of a normalized name, in the order to try them.

        NotFound when it has none; Timeout when the answer did not come.
        """
        ...


class SystemResolver:
    """The daemon host's resolver (getaddrinfo), bounded in time."""

    async def resolve(self, host: str) -> list[Address]:
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(host, None, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT_S
            )
        except TimeoutError:
            raise Timeout(f"resolving {host} took longer than {RESOLVE_TIMEOUT_S:g} s") from None
        except OSError:
            raise NotFound(f"{host} does not resolve") from None
        found: list[Address] = []
        for info in infos:
            # The scope of a link-local v6 answer ("fe80::1%eth0") is dropped: it is denied anyway.
            address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
            if address not in found:
                found.append(address)
        if not found:
            raise NotFound(f"{host} does not resolve")
        return found


class HostsResolver:
    """Answers from a hosts-format file (``address name...`` lines) and nothing else.

    The file is read again when it changes, so a test can move a name.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._stamp: tuple[int, int] | None = None
        self._table: dict[str, list[Address]] = {}

    def _load(self) -> dict[str, list[Address]]:
        try:
            info = os.stat(self._path)
        except OSError:
            return {}
        stamp = (info.st_mtime_ns, info.st_size)
        if stamp != self._stamp:
            table: dict[str, list[Address]] = {}
            for line in self._path.read_text().splitlines():
                words = line.split("#", 1)[0].split()
                if len(words) < 2:
                    continue
                try:
                    address = ipaddress.ip_address(words[0])
                except ValueError:
                    continue
                for name in words[1:]:
                    try:
                        normal = normalize_host(name)
                    except InvalidArgument:
                        continue
                    if isinstance(normal, str):
                        table.setdefault(normal, []).append(address)
            self._table, self._stamp = table, stamp
        return self._table

    async def resolve(self, host: str) -> list[Address]:
        found = self._load().get(host)
        if not found:
            raise NotFound(f"{host} does not resolve")
        return list(found)

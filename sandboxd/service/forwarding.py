"""Ports: byte streams to servers inside a sandbox, the ports that listen
there, and preview tokens that hand one port to a browser.

The stream is a socket pipe (backends.shared.pipes) over the executor
channel, so it works with the sandbox's network off and on every engine.
The caller's scope is checked like any call: a token for one tenant's
sandboxes opens no port of another's.
"""

from __future__ import annotations

import contextlib
import functools
import time
from urllib.parse import quote

from sandboxd.backends.shared.pipes import Pipe
from sandboxd.contract.errors import InvalidArgument, NotFound, PermissionDenied
from sandboxd.contract.models import ListeningPort, Preview
from sandboxd.executor.pipes import loopback, port_number
from sandboxd.service.core import ServiceCore
from sandboxd.service.previews import PreviewSigner
from sandboxd.service.scope import IdRule, Scope, enter_scope, leave_scope

LOCALHOST = "localhost"
_LOCALHOSTS = ("127.0.0.1", "::1")
#: The query parameter a signed URL carries its token in.
PREVIEW_QUERY = "sandboxd_preview_token"
DEFAULT_PREVIEW_TTL_S = 3600


def preview_path(instance_id: str, port: int) -> str:
    return f"/v1/sandboxes/{quote(instance_id, safe='')}/ports/{port}/"


class Forwarding(ServiceCore):
    async def open_port(
        self,
        instance_id: str,
        port: int,
        host: str = LOCALHOST,
        data: bytes = b"",
        *,
        wait: bool = True,
    ) -> Pipe:
        """A connection to ``host:port`` on the sandbox's loopback: 127.0.0.1, ::1,
        or ``localhost`` (empty too): 127.0.0.1, then ::1 if nothing listens there,
        as a browser tries both (dev servers listen on either). ``data``: the
        client's first bytes, sent with the connect (one round trip less).
        ``wait`` is the transports' (runtime_client's in-process factory uses
        this service as one): here the pipe always comes back connected."""
        # Checked here too, so a bad request fails before a workspace starts.
        checked_port = port_number(port)
        hosts = _LOCALHOSTS if host in ("", LOCALHOST) else (loopback(host),)
        workspace = await self._workspace(instance_id)
        for candidate in hosts[:-1]:
            with contextlib.suppress(NotFound):
                return await workspace.connect_port(checked_port, candidate, data)
        return await workspace.connect_port(checked_port, hosts[-1], data)

    async def list_ports(self, instance_id: str) -> list[ListeningPort]:
        workspace = await self._workspace(instance_id)
        reply = await workspace.call("ports_list", {})
        return ListeningPort.list_from_raw(reply.get("ports"))

    # ------------------------------------------------------------ previews

    @functools.cached_property
    def _previews(self) -> PreviewSigner:
        secret = self.settings.preview_secret
        return PreviewSigner(secret.get_secret_value().encode() if secret else None)

    async def create_preview(
        self, instance_id: str, port: int, ttl_s: int = DEFAULT_PREVIEW_TTL_S
    ) -> Preview:
        """A token (and signed URL) opening ``port`` of the sandbox over HTTP until it expires."""
        port_number(port)
        limit = self.settings.preview_max_ttl_s
        if not 0 < ttl_s <= limit:
            raise InvalidArgument(f"ttl_s must be from 1 to {limit} (got {ttl_s})")
        info = await self._owned(instance_id) or await self.backend.get(instance_id)
        expires_at = int(time.time()) + ttl_s
        token = self._previews.sign(instance_id, port, info.created_at_ms, expires_at)
        domain = self.settings.preview_domain
        return Preview(
            token=token,
            expires_at=expires_at,
            path=f"{preview_path(instance_id, port)}?{PREVIEW_QUERY}={token}",
            host=f"{port}-{instance_id}.{domain}" if domain else "",
        )

    async def open_preview(
        self, instance_id: str, port: int, token: str, data: bytes = b""
    ) -> Pipe:
        """``open_port`` for the holder of a preview token (no API token)."""
        port_number(port)
        try:
            info = await self.backend.get(instance_id)
        except NotFound:
            # No sandbox and a wrong token answer alike: a token-less caller
            # learns nothing about which ids exist.
            raise PermissionDenied("the preview token is not for this sandbox and port") from None
        self._previews.check(token, instance_id, port, info.created_at_ms, time.time())
        scope = enter_scope(Scope(ids=(IdRule(instance_id),)))
        try:
            return await self.open_port(instance_id, port, data=data)
        finally:
            leave_scope(scope)

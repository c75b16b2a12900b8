"""Preview tokens: a signed, expiring right to one port of one sandbox over HTTP.

A token is handed to a browser (a signed URL), so it carries no API token and
reaches nothing else: it is bound by its MAC to the instance id, the port and
the sandbox's creation time (an id deleted and created again, perhaps by
another tenant, does not inherit old tokens), and it expires.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from sandboxd.contract.errors import PermissionDenied

_CONTEXT = b"sandboxd-preview-v1"
_MAX_TOKEN = 200


class PreviewSigner:
    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def _mac(self, instance_id: str, port: int, created_at_ms: int, expires_at: int) -> str:
        message = b"|".join(
            [
                _CONTEXT,
                instance_id.encode(),
                b"%d" % port,
                b"%d" % created_at_ms,
                b"%d" % expires_at,
            ]
        )
        digest = hmac.new(self._secret, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def sign(self, instance_id: str, port: int, created_at_ms: int, expires_at: int) -> str:
        return f"{expires_at}.{self._mac(instance_id, port, created_at_ms, expires_at)}"

    def check(
        self, token: str, instance_id: str, port: int, created_at_ms: int, now: float
    ) -> None:
        """PermissionDenied unless ``token`` is this port's, unexpired."""
        expires, _, mac = token[:_MAX_TOKEN].partition(".")
        if not expires.isdigit() or not mac:
            raise PermissionDenied("not a preview token")
        expected = self._mac(instance_id, port, created_at_ms, int(expires))
        if not hmac.compare_digest(mac.encode(), expected.encode()):
            raise PermissionDenied("the preview token is not for this sandbox and port")
        if int(expires) <= now:
            raise PermissionDenied("the preview token has expired")

"""Bearer tokens on TCP, each optionally scoped to a tenant and to instance ids.

The unix socket is protected by its 0600 mode, so its peers get full scope.
A TCP call must carry ``authorization: Bearer <token>``; the token is compared
in constant time against every configured token (so neither its value nor
its position leaks through timing) and is never logged. A scoped token only
reaches the ids its rules allow and its tenant's sandboxes
(``sandboxd.service.scope``): another id is PERMISSION_DENIED, another
tenant's sandbox NOT_FOUND, and listing shows only what it may touch.
Both transports (gRPC, HTTP) ask the same ``Authenticator``; the daemon
builds it from the configured tokens (``sandboxd.daemon.auth``).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sandboxd.contract.errors import Unauthenticated
from sandboxd.service.scope import FULL_SCOPE, Scope


@dataclass(frozen=True)
class _Token:
    secret: bytes
    scope: Scope


class Authenticator:
    def __init__(self, tokens: Sequence[tuple[str, Scope]]) -> None:
        self._tokens = tuple(_Token(secret.encode(), scope) for secret, scope in tokens)

    @property
    def enabled(self) -> bool:
        return bool(self._tokens)

    def scope_for(self, peer: str, metadata: Iterable[tuple[str, str | bytes]]) -> Scope:
        if peer.startswith("unix:"):
            return FULL_SCOPE
        header = next((str(v) for k, v in metadata if k.lower() == "authorization"), "")
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not presented:
            raise Unauthenticated("this listener needs an `authorization: Bearer <token>` header")
        candidate = presented.strip().encode()
        match: Scope | None = None
        for token in self._tokens:
            # Compare against every token so timing does not tell which matched.
            if hmac.compare_digest(candidate, token.secret) and match is None:
                match = token.scope
        if match is None:
            raise Unauthenticated("the bearer token is not valid")
        return match
